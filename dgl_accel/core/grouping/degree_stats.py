"""In-degree statistics of a graph, computed from its in-CSR view.

Kernel heuristics (e.g. group size
``gs = round(0.65538 + 1.67431e-5*num_nodes - 2.24342e-6*num_edges + 0.63641*avg_degree)``)
read these fields, so they are plain numbers with plain names.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..csr import Structure

__all__ = ["DegreeStats", "degree_stats_of", "HUB_DEGREE"]

HUB_DEGREE = 1024  # rows longer than this need a split / multi-block path in the kernels


@dataclass(frozen=True)
class DegreeStats:
    """Statistics of the in-degrees of the destination nodes (population moments, ddof=0)."""

    num_nodes: int  # destination nodes (rows of in_csr)
    num_src: int
    num_edges: int
    avg_degree: float
    max_degree: int
    std: float
    cv: float  # coefficient of variation std / avg_degree; 0 when avg_degree is 0
    skewness: float  # third standardised moment; 0 when std is 0
    num_zero_in_degree: int
    p50: float
    p90: float
    p99: float
    num_hubs_over_1024: int  # nodes with in-degree > 1024


def degree_stats_of(s: Structure) -> DegreeStats:
    """In-degree statistics of the graph whose in-CSR view (one row per destination) is ``s``."""
    # float64 on the host: one-off, and exact for any realistic degree (no 2**24 cut-off).
    deg = np.diff(s.indptr.cpu().numpy()).astype(np.float64)
    n = deg.size
    if n == 0:
        return DegreeStats(0, s.num_cols, s.num_edges, 0.0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0)
    mean = float(deg.mean())
    centred = deg - mean
    std = float(np.sqrt(np.mean(centred**2)))
    skew = float(np.mean(centred**3) / std**3) if std > 0 else 0.0
    p50, p90, p99 = (float(v) for v in np.percentile(deg, [50, 90, 99]))
    return DegreeStats(
        num_nodes=n,
        num_src=s.num_cols,
        num_edges=s.num_edges,
        avg_degree=mean,
        max_degree=int(deg.max()),
        std=std,
        cv=std / mean if mean > 0 else 0.0,
        skewness=skew,
        num_zero_in_degree=int((deg == 0).sum()),
        p50=p50,
        p90=p90,
        p99=p99,
        num_hubs_over_1024=int((deg > HUB_DEGREE).sum()),
    )

