"""Does the redundancy rewrite pay off?  A linear cost model of one aggregation, amortised.

Per aggregation at feature width F (seconds):

    original   T0 = F * t_edge * E
    rewritten  T1 = F * t_edge * E' + F * t_pair * P + t_round * rounds

t_edge is one edge's gather-and-add per feature element in the SpMM, t_pair one pre-add row
(two gathers, an add, a write) per element, t_round the fixed cost of a pre-add round (launches,
allocation).  The transform is paid once per subgraph and amortised over the aggregations that
run on it: GraphACT counts **3L** for an L-layer GCN per training iteration on a subgraph,
per layer (1) the forward aggregation A X, (2) the backward aggregation A^T G of the feature
gradient (the transpose schedule of the same plan: same P pre-adds and E' edges), and (3) the
weight-gradient path, which re-aggregates A X because the accelerator does not keep it.  Under
torch autograd (3) is a saved activation, so ``aggregations_per_layer=2`` is the count for
training with this package; 3 is the default to match the paper.  It pays when

    aggregations_per_layer * L * (T0 - T1) > transform_seconds.

Default constants (seconds per element): CPU from the development machine (2 cores, DGL's native
SpMM under dgl_accel.functional.gspmm, F = 256, GraphSAINT walk subgraphs of amazon_cs / Cornell5 /
Slashdot, minimum of 25 interleaved repeats under heavy background load, so indicative): one
aggregation of 171k edges took 1.7 ms (t_edge ~ 4e-11) and 3 rounds of 3.9k pre-adds 0.86 ms
(t_pair ~ 8e-10 including round overheads).  DGL's CPU SpMM is so cheap per edge that the
rewritten graph's SpMM was not measurably faster than the original's despite 34% fewer edges, so
on CPUs the model rarely predicts a gain, in line with the thesis's warning.  CUDA constants come
from a bandwidth argument (an edge moves one F-row, a pre-add three; ~3 TB/s), not measured.
Pass ``constants=`` to use your own measurements.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GainEstimate", "CostConstants", "DEFAULT_CONSTANTS", "predicts_gain", "per_aggregation_seconds",
           "fit_constants"]


@dataclass(frozen=True)
class CostConstants:
    t_edge: float   # s per edge per feature element
    t_pair: float   # s per pre-add row per feature element
    t_round: float  # s per pre-add round


DEFAULT_CONSTANTS = {
    "cpu": CostConstants(t_edge=4.0e-11, t_pair=8.0e-10, t_round=3.0e-5),
    "cuda": CostConstants(t_edge=1.5e-12, t_pair=4.5e-12, t_round=1.0e-5),
}


@dataclass(frozen=True)
class GainEstimate:
    pays: bool
    aggregations: int                # aggregations the transform is amortised over
    original_seconds: float          # one aggregation on the original graph (model)
    rewritten_seconds: float         # one aggregation through the plan (model)
    transform_seconds: float
    net_seconds: float               # aggregations * (original - rewritten) - transform

    def __bool__(self) -> bool:
        return self.pays


def _stats(plan_or_stats) -> dict:
    if isinstance(plan_or_stats, dict):
        need = ("edges", "edges_rewritten", "pair_nodes", "rounds", "transform_seconds")
        missing = [k for k in need if k not in plan_or_stats]
        if missing:
            raise ValueError(f"expected a RedundancyPlan or a dict with keys {need} (missing {missing}). "
                             f"Fix: pass plan or plan.summary().")
        return plan_or_stats
    if hasattr(plan_or_stats, "summary"):
        return plan_or_stats.summary()
    raise ValueError(f"expected a RedundancyPlan or its summary() dict (got {type(plan_or_stats).__name__}).")


def per_aggregation_seconds(stats: dict, feat_dim: int, device: str = "cpu",
                            constants: CostConstants | None = None) -> tuple:
    """(original, rewritten) modelled seconds of one aggregation."""
    c = constants or DEFAULT_CONSTANTS["cuda" if str(device).startswith("cuda") else "cpu"]
    t0 = feat_dim * c.t_edge * stats["edges"]
    t1 = (feat_dim * c.t_edge * stats["edges_rewritten"] + feat_dim * c.t_pair * stats["pair_nodes"]
          + c.t_round * stats["rounds"] * (stats["pair_nodes"] > 0))
    return t0, t1


def predicts_gain(plan_or_stats: dict | object, feat_dim: int, num_layers: int, *,
                  aggregations_per_layer: int = 3, device: str = "cpu",
                  constants: CostConstants | None = None, include_transform: bool = True) -> GainEstimate:
    """Whether ``aggregations_per_layer * num_layers`` aggregations through the plan save more than
    the transform cost (``include_transform=False``: whether one aggregation is cheaper, i.e. the
    transform is already paid).  Truthy when it pays."""
    for name, v in (("feat_dim", feat_dim), ("num_layers", num_layers),
                    ("aggregations_per_layer", aggregations_per_layer)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"expected {name} to be an int >= 1 (got {v!r}).")
    s = _stats(plan_or_stats)
    t0, t1 = per_aggregation_seconds(s, feat_dim, device, constants)
    n = aggregations_per_layer * num_layers
    transform = float(s["transform_seconds"]) if include_transform else 0.0
    net = n * (t0 - t1) - transform
    return GainEstimate(pays=bool(net > 0 and s["pair_nodes"] > 0), aggregations=n, original_seconds=t0,
                        rewritten_seconds=t1, transform_seconds=transform, net_seconds=net)


def fit_constants(samples: list[dict]) -> CostConstants:
    """The constants that fit measured aggregations best (least squares, each constant at least 0).

    Each sample is a plan's ``summary()`` plus ``feat_dim`` and the measured seconds of one plain
    aggregation (``original_seconds``) and of one through the plan (``rewritten_seconds``): the
    model's two equations per sample, with one launch overhead per aggregation as a fourth unknown
    (fitted, not returned: both sides pay it).

    >>> c = CostConstants(t_edge=2e-12, t_pair=5e-12, t_round=1e-5)
    >>> stats = [dict(edges=e, edges_rewritten=e // 2, pair_nodes=e // 8, rounds=3, feat_dim=f)
    ...          for e in (10**5, 10**6, 4 * 10**6) for f in (64, 256)]
    >>> for s in stats:
    ...     s["original_seconds"], s["rewritten_seconds"] = per_aggregation_seconds(s, s["feat_dim"], constants=c)
    >>> fit = fit_constants(stats)
    >>> [round(v / w, 3) for v, w in ((fit.t_edge, c.t_edge), (fit.t_pair, c.t_pair), (fit.t_round, c.t_round))]
    [1.0, 1.0, 1.0]
    """
    rows, times = [], []
    for s in samples:
        f = s["feat_dim"]
        rows.append([f * s["edges"], 0.0, 0.0, 1.0])
        times.append(s["original_seconds"])
        used = float(s["pair_nodes"] > 0)
        rows.append([f * s["edges_rewritten"], f * s["pair_nodes"], s["rounds"] * used, 1.0])
        times.append(s["rewritten_seconds"])
    if len(samples) < 2:
        raise ValueError(f"expected at least 2 measured samples to fit 4 unknowns (got {len(samples)}). "
                         f"Fix: measure more subgraphs or widths.")
    a, b = np.asarray(rows, dtype=np.float64), np.asarray(times, dtype=np.float64)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    x, *_ = np.linalg.lstsq(a / scale, b, rcond=None)
    x = np.maximum(x / scale, 0.0)
    return CostConstants(t_edge=float(x[0]), t_pair=float(x[1]), t_round=float(x[2]))
