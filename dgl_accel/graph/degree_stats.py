"""In-degree statistics of a DGL graph (see ``dgl_accel.core.grouping.degree_stats``), cached
per graph version like its CSR views."""
from __future__ import annotations

from ..core.grouping.degree_stats import HUB_DEGREE, DegreeStats
from .structure import check_graph
from .views import DGLGraphViews

__all__ = ["DegreeStats", "degree_stats", "HUB_DEGREE"]


def degree_stats(g) -> DegreeStats:
    """In-degree statistics of ``g`` (homogeneous graph or block), cached like in_csr."""
    check_graph(g)
    return DGLGraphViews(g).degree_stats()
