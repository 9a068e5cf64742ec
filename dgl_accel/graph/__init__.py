"""Graph structure views (CSR by destination / source) and degree statistics, cached per graph."""

from ..core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
from .degree_stats import DegreeStats, degree_stats
from .structure import Structure, cache_info, clear_cache, in_csr, out_csr

__all__ = ["Structure", "in_csr", "out_csr", "DegreeStats", "degree_stats", "cache_info", "clear_cache"]
