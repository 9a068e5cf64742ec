"""In-degree statistics of a graph, computed from its in-CSR view: with numpy for a graph on the
CPU, on the device for a graph elsewhere (one host read of nine numbers, no node-sized copy: each
minibatch's sampled graph on a GPU computes them once).

Kernel heuristics (e.g. group size
``gs = round(0.65538 + 1.67431e-5*num_nodes - 2.24342e-6*num_edges + 0.63641*avg_degree)``)
read these fields, so they are plain numbers with plain names.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

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


QUANTILES = (0.5, 0.9, 0.99)


def _on_host(indptr) -> tuple:
    # float64 on the host: exact for any realistic degree (no 2**24 cut-off)
    deg = np.diff(indptr.cpu().numpy()).astype(np.float64)
    mean = float(deg.mean())
    centred = deg - mean
    p50, p90, p99 = (float(v) for v in np.percentile(deg, [100 * q for q in QUANTILES]))
    return (mean, float(np.mean(centred**2)), float(np.mean(centred**3)), float(deg.max()),
            float((deg == 0).sum()), float((deg > HUB_DEGREE).sum()), p50, p90, p99)


def _on_device(indptr: torch.Tensor) -> tuple:
    """The same nine numbers as :func:`_on_host`, computed where ``indptr`` lives (float64, numpy's
    linear percentile interpolation on the sorted degrees), read back at once."""
    deg = (indptr[1:] - indptr[:-1]).to(torch.float64)
    n = deg.numel()
    mean = deg.mean()
    centred = deg - mean
    ranked, _ = torch.sort(deg)
    pos = torch.tensor(QUANTILES, dtype=torch.float64, device=deg.device) * (n - 1)
    lo = pos.floor().long()
    hi = torch.clamp(lo + 1, max=n - 1)
    pct = ranked[lo] + (pos - lo) * (ranked[hi] - ranked[lo])
    head = torch.stack([mean, (centred**2).mean(), (centred**3).mean(), ranked[-1], (deg == 0).sum().double(),
                        (deg > HUB_DEGREE).sum().double()])
    return tuple(torch.cat([head, pct]).tolist())


def degree_stats_of(s: Structure, *, on_device: bool | None = None) -> DegreeStats:
    """In-degree statistics of the graph whose in-CSR view (one row per destination) is ``s``
    (``on_device``: compute where the CSR lives; default: on the host for a CPU graph only)."""
    n = s.indptr.numel() - 1
    if n <= 0:
        return DegreeStats(0, s.num_cols, s.num_edges, 0.0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0)
    device = s.indptr.device.type != "cpu" if on_device is None else on_device
    mean, m2, m3, top, zeros, hubs, p50, p90, p99 = (_on_device if device else _on_host)(s.indptr)
    std = float(np.sqrt(m2))
    skew = float(m3 / std**3) if std > 0 else 0.0
    return DegreeStats(
        num_nodes=n,
        num_src=s.num_cols,
        num_edges=s.num_edges,
        avg_degree=mean,
        max_degree=int(top),
        std=std,
        cv=std / mean if mean > 0 else 0.0,
        skewness=skew,
        num_zero_in_degree=int(zeros),
        p50=p50,
        p90=p90,
        p99=p99,
        num_hubs_over_1024=int(hubs),
    )

