"""Group size ``gs`` for neighbour-grouped aggregation: the linear model of Xu et al. and a cost model.

Linear model (Xu et al., "Accelerating backward aggregation in GCN training with execution path
preparing")::

    gs = round(0.65538 + 1.67431e-5*V - 2.24342e-6*E + 0.63641*avg_degree),  at least 1

fitted on statistics that count *undirected* edges (Cora: V=2708, E=5278, avg 1.95 -> 2).
:func:`linear_inputs` converts a DGL graph to that convention (a symmetric graph's 10,556
directed Cora edges are 5,278 undirected ones).

Cost model (:func:`cost_model_group_size`) starts from the linear answer and departs from it in
these documented, monotone, bounded steps (each one a reason line in the result):

1. **Row cap** (uses the degree distribution, which the formula ignores).  The grouped kernel walks
   a tile of groups in lock-step, so a group longer than the rows it covers only adds masked
   iterations, and a hub group longer than typical rows makes its whole tile wait.
   *Regular* degrees (cv <= 1, skewness <= 2, no row > 1024; the exponential distribution sits on
   that border): cap at ``next_pow2(p99)`` so groups may cover whole rows (few partial sums).
   *Skewed* degrees: cap at ``prev_pow2(min(p90, avg_degree))`` so hub rows are split into groups
   no longer than a typical row; this is GNNAdvisor's load balancing, and the main departure (the
   formula grows with V, e.g. 15 for Youtube, whatever the hubs look like).
2. **Amortisation floor** (uses the feature width F, which the formula ignores).  Each group pays a
   fixed cost (loading its row / start / length, storing or atomically adding its partial row);
   a group should move at least ``MIN_GROUP_ELEMS = 256`` feature elements, i.e.
   ``gs >= ceil(256 / f_tile)`` with ``f_tile = min(F, 128)``.  Wide features amortise with short
   groups, narrow ones need long groups.  The floor never exceeds the row cap: once a group covers
   the rows it serves, longer groups save no group overhead.  It also rescues the formula on very
   large graphs, where its negative E term drives it to 1.
3. **Power of two**: round to the nearest power of two (in log space), matching Triton's
   power-of-two tiles and keeping the number of compiled variants small.
4. **Working-set cap**: a group's gathered slice ``gs * f_tile * max(itemsize, 4)`` bytes (fp32
   accumulation for 16-bit types) must fit ``WORKING_SET_BYTES = 32 KiB``: half of a 64 KiB
   per-program on-chip budget, the other half holding the BLOCK_G x BLOCK_F accumulator and the
   index vectors.  Binds for fp64 with F >= 128 (gs <= 32).
5. **Bounds**: clamp to ``[GS_MIN, GS_MAX] = [1, 64]``.

Every step is non-decreasing in its input and non-increasing in F, so the result is
non-increasing in the feature width.  The model is deterministic and O(1) given DegreeStats.
"""
from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass

import torch

from .autotune import autotune_group_size, graph_signature
from .degree_stats import HUB_DEGREE, DegreeStats

__all__ = ["linear_group_size", "linear_formula", "linear_inputs", "is_symmetric",
           "cost_model_group_size", "choose_group_size", "GroupSizeChoice",
           "set_autotune_timer", "time_on_views", "POLICIES", "GS_MIN", "GS_MAX", "F_TILE_MAX", "MIN_GROUP_ELEMS",
           "WORKING_SET_BYTES"]

# Xu et al.'s coefficients.
_C0, _CV, _CE, _CD = 0.65538, 1.67431e-5, -2.24342e-6, 0.63641

GS_MIN, GS_MAX = 1, 64
F_TILE_MAX = 128  # the kernels' largest BLOCK_F
MIN_GROUP_ELEMS = 256  # feature elements a group must move to amortise its fixed cost
WORKING_SET_BYTES = 32 * 1024
SKEW_CV, SKEW_SKEWNESS = 1.0, 2.0  # the exponential distribution's cv and skewness


# ------------------------------------------------------------------------------ linear model
def _int(name: str, value, minimum: int, fix: str) -> int:
    try:
        v = operator.index(value)  # ints and numpy ints; rejects 2.5 and "3"
    except TypeError:
        raise TypeError(f"expected an integer {name} (got {value!r} of type "
                        f"{type(value).__name__}). Fix: pass int({name}).") from None
    if v < minimum:
        raise ValueError(f"expected {name} >= {minimum} (got {v}). Fix: {fix}.")
    return v


def _count(name: str, value) -> int:
    return _int(name, value, 0, f"pass a count of {'nodes' if 'vert' in name else 'edges'}")


def _check_linear_args(num_vertices, num_edges, avg_degree) -> tuple[int, int, float]:
    v, e = _count("num_vertices", num_vertices), _count("num_edges", num_edges)
    if avg_degree is None:
        if v == 0 and e > 0:
            raise ValueError(f"expected num_vertices > 0 when num_edges > 0 (got num_vertices=0, "
                             f"num_edges={e}). Fix: pass the graph's node count.")
        avg_degree = e / v if v else 0.0
    avg = float(avg_degree)
    if not math.isfinite(avg) or avg < 0:
        raise ValueError(f"expected a finite avg_degree >= 0 (got {avg_degree!r}). "
                         f"Fix: pass num_edges / num_vertices, or leave it None.")
    if v == 0 and avg > 0:
        raise ValueError(f"expected num_vertices > 0 with avg_degree {avg} (got num_vertices=0). "
                         f"Fix: pass the graph's node count.")
    return v, e, avg


def _linear_raw(v: int, e: int, avg: float) -> float:
    return _C0 + _CV * v + _CE * e + _CD * avg


def linear_group_size(num_vertices: int, num_edges: int, avg_degree: float | None = None) -> int:
    """Xu et al.'s ``round(0.65538 + 1.67431e-5*V - 2.24342e-6*E + 0.63641*avg)``, at least 1.

    ``avg_degree`` defaults to ``E / V``.  Counts follow the paper: undirected edges (see
    :func:`linear_inputs`).  The empty graph (V = E = 0) gets 1.
    """
    v, e, avg = _check_linear_args(num_vertices, num_edges, avg_degree)
    # round() is banker's rounding; the paper's values never sit on .5, but be explicit: half up.
    return max(1, math.floor(_linear_raw(v, e, avg) + 0.5))


def linear_formula(num_vertices: int, num_edges: int, avg_degree: float | None = None) -> str:
    """The formula with the numbers plugged in, e.g. for :func:`dgl_accel.grouping.explain`."""
    v, e, avg = _check_linear_args(num_vertices, num_edges, avg_degree)
    raw = _linear_raw(v, e, avg)
    return (f"gs = round({_C0} + {_CV:g}*{v} - {-_CE:g}*{e} + {_CD}*{avg:.4g}) "
            f"= round({raw:.3f}) -> {linear_group_size(v, e, avg)}")


def _symmetry(views) -> tuple[bool, int]:
    """(every edge u->v has a matching v->u as a multiset, undirected edge count)."""
    src, dst = views.edges_by_id()
    src, dst, n = src.long(), dst.long(), views.num_src
    # Sort-based multiset test: the sorted keys of (u, v) and of (v, u) agree iff symmetric.
    # n*n < 2**63 for any n < 3e9 nodes, so the int64 key cannot overflow.
    fwd, _ = torch.sort(src * n + dst)
    bwd, _ = torch.sort(dst * n + src)
    loops = int((src == dst).sum())
    e = int(src.numel())
    return bool(torch.equal(fwd, bwd)), (e - loops) // 2 + loops


def is_symmetric(views) -> bool:
    """Whether the (non-bipartite) graph has v->u for every u->v (cached per graph)."""
    return False if views.bipartite else views.cached("grouping.symmetry", lambda: _symmetry(views))[0]


def _linear_inputs(views) -> tuple[int, int, float, str]:
    if views.bipartite:  # src and dst are different node sets: no notion of an undirected edge
        v, e = views.num_dst, views.num_edges
        note = "block: V = dst nodes, E = directed edges"
    else:
        v = views.num_src
        sym, undirected = views.cached("grouping.symmetry", lambda: _symmetry(views))
        if sym:
            e = undirected
            note = f"symmetric graph: E = {undirected} undirected edges ({views.num_edges} directed)"
        else:
            e = views.num_edges
            note = "not symmetric: E = directed edges"
    return v, e, (e / v if v else 0.0), note


def linear_inputs(views) -> tuple[int, int, float]:
    """``(V, E, avg_degree)`` of a graph (:class:`~dgl_accel.core.aggregation.views.GraphViews`)
    in the paper's convention.

    Symmetric graphs count undirected edges (self-loops once) and ``avg = E / V``; other graphs
    count directed edges; bipartite graphs (blocks) use their dst nodes and directed edges.
    """
    return _linear_inputs(views)[:3]


# ------------------------------------------------------------------------------ cost model
def _next_pow2(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1.0))))


def _prev_pow2(x: float) -> int:
    return 1 << max(0, math.floor(math.log2(max(x, 1.0))))


def _nearest_pow2(x: int) -> int:
    return 1 << max(0, math.floor(math.log2(max(x, 1)) + 0.5))


def _is_skewed(s: DegreeStats) -> bool:
    return s.cv > SKEW_CV or s.skewness > SKEW_SKEWNESS or s.num_hubs_over_1024 > 0


def cost_model_group_size(stats: DegreeStats, feat_dim: int, dtype: torch.dtype = torch.float32,
                          *, linear_gs: int | None = None) -> tuple[int, list[str]]:
    """Group size from the degree distribution and feature width; see the module docstring.

    ``linear_gs`` is the linear model's answer in the paper's convention (as from
    :func:`linear_inputs`); when None it is computed from ``stats`` (directed in-edge counts).
    Returns ``(gs, reasons)``, one reason per step.
    """
    f = _int("feat_dim", feat_dim, 1, "pass the feature width, e.g. feat.shape[1]")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"expected a torch.dtype (got {dtype!r}). Fix: pass e.g. torch.float32.")
    if stats.num_nodes == 0 or stats.num_edges == 0:
        return GS_MIN, [f"no edges to group ({stats.num_nodes} dst nodes, {stats.num_edges} "
                        f"edges): gs = {GS_MIN}"]
    if linear_gs is None:
        linear_gs = linear_group_size(stats.num_nodes, stats.num_edges, stats.avg_degree)
    gs = max(1, int(linear_gs))
    reasons = [f"start: linear model gs = {gs}"]

    # 1. Row cap from the degree distribution.
    shape = (f"cv {stats.cv:.2f}, skewness {stats.skewness:.2f}, "
             f"{stats.num_hubs_over_1024} rows > {HUB_DEGREE}")
    if _is_skewed(stats):
        typical = min(stats.p90, stats.avg_degree)
        cap = _prev_pow2(typical)
        why = (f"skewed degrees ({shape}): split hub rows into groups no longer than a typical "
               f"row, cap = prev_pow2(min(p90 {stats.p90:g}, avg {stats.avg_degree:.3g})) = {cap}")
    else:
        cap = _next_pow2(stats.p99)
        why = (f"regular degrees ({shape}): groups may cover whole rows, "
               f"cap = next_pow2(p99 {stats.p99:g}) = {cap}")
    new = min(gs, cap)
    reasons.append(f"row cap: {why}; {gs} -> {new}")
    gs = new

    # 2. Amortisation floor from the feature tile, never above the row cap.
    f_tile = min(f, F_TILE_MAX)
    floor = min(math.ceil(MIN_GROUP_ELEMS / f_tile), cap)
    new = max(gs, floor)
    reasons.append(f"amortisation floor: feature tile min(F {f}, {F_TILE_MAX}) = {f_tile}, a group "
                   f"should move >= {MIN_GROUP_ELEMS} elements, floor = min(ceil({MIN_GROUP_ELEMS}"
                   f"/{f_tile}), row cap {cap}) = {floor}; {gs} -> {new}")
    gs = new

    # 3. Power of two.
    new = _nearest_pow2(gs)
    reasons.append(f"power of two: nearest power of two of {gs} -> {new}")
    gs = new

    # 4. Working set of one group's gathered slice.
    elem = max(torch.empty(0, dtype=dtype).element_size(), 4)  # accumulation is >= fp32
    ws_cap = _prev_pow2(WORKING_SET_BYTES / (f_tile * elem))
    new = min(gs, ws_cap)
    reasons.append(f"working set: gs*{f_tile}*{elem} B <= {WORKING_SET_BYTES // 1024} KiB "
                   f"({dtype}) -> cap {ws_cap}; {gs} -> {new}")
    gs = new

    # 5. Bounds.
    new = min(max(gs, GS_MIN), GS_MAX)
    reasons.append(f"bounds: clamp to [{GS_MIN}, {GS_MAX}]; {gs} -> {new}")
    return new, reasons


# ------------------------------------------------------------------------------ choice
POLICIES = ("auto", "linear", "cost")
def time_on_views(views, feat_dim: int, dtype: torch.dtype, gs: int) -> float:
    """The default timer: the views time their own grouped forward (``GraphViews.time_grouped_forward``,
    the aggregation core's kernel), so this layer, below aggregation, never imports it."""
    return views.time_grouped_forward(feat_dim, dtype, gs)


_TIMER = [time_on_views]  # fn(views, feat_dim, dtype, gs) -> seconds, for policy "auto" on CUDA


def set_autotune_timer(fn) -> None:
    """Replace the timer of policy "auto" on CUDA by ``fn(views, feat_dim, dtype, gs) -> seconds``
    (tests, custom kernels); None switches autotuning off, :data:`DEFAULT_TIMER` restores it."""
    if fn is not None and not callable(fn):
        raise TypeError(f"expected a callable or None (got {fn!r}). "
                        f"Fix: pass fn(views, feat_dim, dtype, gs) -> seconds.")
    _TIMER[0] = fn


DEFAULT_TIMER = time_on_views


@dataclass(frozen=True)
class GroupSizeChoice:
    """The chosen group size and everything that went into it; ``str()`` explains it."""

    gs: int
    policy: str  # "auto", "linear", "cost" or "forced"
    linear_gs: int
    cost_gs: int
    tuned_gs: int | None
    stats: DegreeStats
    reasons: tuple[str, ...]
    feat_dim: int = 0
    dtype: torch.dtype = torch.float32
    linear_formula: str = ""
    linear_note: str = ""
    source: str = ""  # which model the final gs came from
    # the locality split of each view (forward, backward), where explain() asked; not part of the gs choice
    locality: tuple = dataclasses.field(default=(), compare=False)

    def __str__(self) -> str:
        s = self.stats
        lines = [
            f"group size gs = {self.gs} (policy {self.policy!r}: {self.source})",
            f"graph: {s.num_nodes} dst nodes, {s.num_src} src nodes, {s.num_edges} edges; in-degree "
            f"avg {s.avg_degree:.3g}, max {s.max_degree}, p50/p90/p99 {s.p50:g}/{s.p90:g}/{s.p99:g}, "
            f"cv {s.cv:.2f}, skewness {s.skewness:.2f}, {s.num_hubs_over_1024} rows > {HUB_DEGREE}, "
            f"{s.num_zero_in_degree} with no in-edges",
            f"linear model (Xu et al.; {self.linear_note}): {self.linear_formula}",
            f"cost model (feat_dim {self.feat_dim}, {self.dtype}): gs = {self.cost_gs}",
            *(f"  - {r}" for r in self.reasons),
        ]
        if self.tuned_gs is not None:
            lines.append(f"autotune: fastest measured gs = {self.tuned_gs}")
        lines.extend(str(choice) for choice in self.locality)
        return "\n".join(lines)


def _check_policy(policy):
    if isinstance(policy, bool) or not isinstance(policy, (str, int)):
        raise TypeError(f"expected policy in {POLICIES} or an int >= 1 (got {policy!r}). "
                        f"Fix: pass policy='auto'.")
    if isinstance(policy, str) and policy not in POLICIES:
        raise ValueError(f"expected policy in {POLICIES} or an int >= 1 (got {policy!r}). "
                         f"Fix: pass policy='auto', or a forced group size like policy=8.")
    if isinstance(policy, int) and policy < 1:
        raise ValueError(f"expected a forced group size >= 1 (got policy={policy}). "
                         f"Fix: pass an int >= 1, or policy='auto'.")


def _tune_candidates(cost_gs: int, linear_gs: int) -> list[int]:
    # Powers of two within 4x of the cost model's answer, plus the linear answer: 5-6 timings
    # instead of sweeping all of [1, 64].
    around = {cost_gs >> 2, cost_gs >> 1, cost_gs, cost_gs << 1, cost_gs << 2, linear_gs}
    return sorted({min(max(c, GS_MIN), GS_MAX) for c in around})


def choose_group_size(views, feat_dim: int, dtype: torch.dtype = torch.float32, device=None,
                      policy="auto") -> GroupSizeChoice:
    """Choose ``gs`` for aggregating ``feat_dim``-wide ``dtype`` features over a graph
    (:class:`~dgl_accel.core.aggregation.views.GraphViews`).

    policy: "linear" (Xu et al.), "cost" (cost model), "auto" (cost model; on CUDA the autotuner,
    which times the grouped kernel once per graph shape, see :func:`set_autotune_timer`, except on
    blocks and relation graphs: a sampler makes a new block every minibatch, so they keep the cost
    model and are never timed), or an int (forced gs).
    ``device`` defaults to the graph's device.
    """
    _check_policy(policy)
    stats = views.degree_stats()
    v, e, avg, note = _linear_inputs(views)
    lin = linear_group_size(v, e, avg)
    cost, reasons = cost_model_group_size(stats, feat_dim, dtype, linear_gs=lin)
    device = torch.device(device) if device is not None else views.device
    tuned = None
    if isinstance(policy, int):
        gs, src, policy = policy, f"forced gs = {policy}", "forced"
    elif policy == "linear":
        gs, src = lin, "linear model"
    elif policy == "cost" or device.type != "cuda" or _TIMER[0] is None:
        gs, src = cost, "cost model"
    elif views.bipartite:
        gs, src = cost, "cost model (a block: not timed, each minibatch's block is a new shape)"
    else:
        timer = _TIMER[0]
        key = (graph_signature(views), int(feat_dim), dtype, str(device))
        tuned = autotune_group_size(key, _tune_candidates(cost, lin), lambda k: timer(views, feat_dim, dtype, k))
        gs, src = tuned, "autotuned on the device"
    return GroupSizeChoice(gs=gs, policy=policy, linear_gs=lin, cost_gs=cost, tuned_gs=tuned,
                           stats=stats, reasons=tuple(reasons), feat_dim=int(feat_dim),
                           dtype=dtype, linear_formula=linear_formula(v, e, avg),
                           linear_note=note, source=src)
