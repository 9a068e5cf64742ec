"""Graph structure views (CSR by destination / source) and degree statistics, cached per graph."""
from .degree_stats import DegreeStats, degree_stats
from .structure import Structure, cache_info, clear_cache, in_csr, out_csr

__all__ = ["Structure", "in_csr", "out_csr", "DegreeStats", "degree_stats", "cache_info", "clear_cache"]
