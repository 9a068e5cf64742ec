"""Aggregation: forward and forward+backward of copy_u-sum, u_mul_e-sum and the GCN-normalised sum,
ours beside the peers (:mod:`.peers`), on the shared graphs and R-MAT graphs.

Rates (:func:`flop`, :func:`compulsory_bytes`):
* GFLOP/s: one add per edge and feature (copy_u), a multiply and an add (u_mul_e, GCN: the
  normalisation is one factor per edge); forward+backward counts both passes.
* effective bandwidth: the compulsory bytes of one pass, ``indptr`` (8 B per row + 1) + ``indices``
  (id bytes per edge) + one read of each gathered feature row (F elements per edge) + the output
  write (F elements per row), over the time; ``bw_fraction`` divides it by the device-to-device copy
  bandwidth measured in the same run.
Group size: ours runs twice, with the autotuner's pick (on CUDA; the cost model elsewhere) and with
the linear model's pick (Xu et al.), both timed.
"""
from __future__ import annotations

import statistics
import time

import torch

from ..core.aggregation.function import aggregate
from ..core.aggregation.locality import choose_locality, locality_parts, row_tile_bytes, use_locality
from ..core.aggregation.views import TensorGraph
from ..core.grouping.size import choose_group_size
from . import peers
from .graphs import Graph
from .timing import gbps, gflops, median_seconds, synchronize

OPS = ("copy_u", "u_mul_e", "gcn")


def flop(op: str, num_edges: int, width: int) -> float:
    """Floating-point operations of one pass.

    >>> flop("copy_u", 10, 4), flop("u_mul_e", 10, 4), flop("gcn", 10, 4)
    (40, 80, 80)
    """
    return num_edges * width * (1 if op == "copy_u" else 2)


def compulsory_bytes(num_nodes: int, num_edges: int, width: int, elem: int, id_bytes: int) -> int:
    """Bytes one pass must move: indptr + indices + a gathered row per edge + the output write.

    >>> compulsory_bytes(2, 3, 4, 4, 4)   # 3*8 + 3*4 + 3*4*4 + 2*4*4
    116
    """
    return (num_nodes + 1) * 8 + num_edges * id_bytes + num_edges * width * elem + num_nodes * width * elem


def once_bytes(num_nodes: int, num_edges: int, width: int, elem: int, id_bytes: int) -> int:
    """The least one pass can move: indptr + indices + each feature row read once + the output write
    (what a plan that fetched every gathered row from HBM once would cost).

    >>> once_bytes(2, 3, 4, 4, 4)   # 3*8 + 3*4 + 2*4*4 + 2*4*4
    100
    """
    return (num_nodes + 1) * 8 + num_edges * id_bytes + 2 * num_nodes * width * elem


def _edge_values(g: Graph, op: str, dtype, gen_seed: int):
    """Per-edge values every provider multiplies by: 1 (copy_u), random w (u_mul_e), or the GCN
    factor d_out(u)^-1/2 d_in(v)^-1/2 (what PyG's gcn_norm precomputes)."""
    if op == "u_mul_e":
        gen = torch.Generator(device=g.src.device).manual_seed(gen_seed)
        return torch.rand(g.num_edges, generator=gen, device=g.src.device).add_(0.5).to(dtype)
    if op == "gcn":
        out_deg = torch.bincount(g.src, minlength=g.num_nodes).clamp(min=1).float().pow(-0.5)
        in_deg = torch.bincount(g.dst, minlength=g.num_nodes).clamp(min=1).float().pow(-0.5)
        return (out_deg[g.src] * in_deg[g.dst]).to(dtype)
    return torch.ones(g.num_edges, dtype=dtype, device=g.src.device)


def _ours(views, op: str, x, w, gout, gs: int):
    kind, norm, efeat = ("u_mul_e", "none", w[:, None]) if op == "u_mul_e" else ("copy_u", "both" if op == "gcn"
                                                                               else "none", None)
    xg = x.detach().requires_grad_(True)

    def fwd():
        with torch.no_grad():
            return aggregate(views, kind, "sum", x, efeat, norm=norm, group_size=gs)

    def fwd_bwd():
        out = aggregate(views, kind, "sum", xg, efeat, norm=norm, group_size=gs)
        out.backward(gout)
        return out
    return fwd, fwd_bwd


def split_l2(num_nodes: int, width: int, dtype, device) -> int | None:
    """The L2 size the split's rows plan for: the device's on a GPU (None); elsewhere, where there is
    no GPU cache to plan for, one whose hot set is a sixteenth of the rows, so that a split is built
    and run (the report's interpreter run checks it works end to end)."""
    if device.type == "cuda":
        return None
    return 2 * row_tile_bytes(width, dtype) * max(1, num_nodes // 16)


def _split(views, op: str, x, w, gout, gs: int):
    """Ours with the locality split forced on (:mod:`~dgl_accel.core.aggregation.locality`)."""
    l2 = split_l2(views.num_src, x.shape[1], x.dtype, x.device)

    def forced(fn):
        def run():
            with use_locality("on", l2_bytes=l2):
                return fn()
        return run
    return tuple(forced(fn) for fn in _ours(views, op, x, w, gout, gs))


def _providers(g: Graph, views, op: str, x, gout, values, group_sizes):
    """(name, gs, (fwd, fwd_bwd) or the exception) per provider."""
    w = values if op == "u_mul_e" else None
    out = []
    for label, gs in group_sizes:
        out.append((f"dgl_accel ({label})", gs, lambda gs=gs: _ours(views, op, x, w, gout, gs)))
    with use_locality("on", l2_bytes=split_l2(views.num_src, x.shape[1], x.dtype, x.device)):
        if choose_locality(views, "in", x.shape[1], x.dtype).split:  # else: the same launches as the first row
            gs = group_sizes[0][1]
            out.append(("dgl_accel (locality split)", gs, lambda: _split(views, op, x, w, gout, gs)))
    pair = peers.CsrPair(g.src, g.dst, g.num_nodes, values)
    out.append(("torch.sparse.mm (CSR)", None, lambda: peers.torch_sparse(pair, x, gout)))
    out.append(("PyG spmm", None, lambda: peers.pyg_spmm(pair, x, gout)))
    if peers.message_bytes(g.num_edges, x.shape[1], x.dtype) < 0.5 * peers.memory_left(x.device):
        out.append(("PyG MessagePassing", None,
                    lambda: peers.pyg_message_passing(g.src, g.dst, g.num_nodes, x, None if op == "copy_u" else values,
                                                      gout)))
    else:
        out.append(("PyG MessagePassing", None, MemoryError("per-edge messages would not fit in half the free memory")))
    out.append(("DGL", None, lambda: peers.dgl_gspmm(g.src, g.dst, g.num_nodes, x, None if op == "copy_u"
                                                     else values[:, None], gout)))
    return out


def group_sizes(views, width: int, dtype, device) -> list[tuple[str, int]]:
    """[(label, gs)]: the autotuner's pick (the cost model's off CUDA) and the linear model's."""
    choice = choose_group_size(views, width, dtype, device=device, policy="auto")
    auto_label = "autotuned" if choice.tuned_gs is not None else "cost model"
    return [(f"{auto_label} gs={choice.gs}", choice.gs), (f"linear gs={choice.linear_gs}", choice.linear_gs)]


def bench_case(results, g: Graph, op: str, width: int, dtype, device, copy_bw: float, timing: dict, progress,
               with_linear: bool = True):
    views = g.cache.get("views")
    if views is None:
        id32 = g.num_nodes < 2**31 and g.num_edges < 2**31
        views = g.cache["views"] = TensorGraph(g.src.to(torch.int32) if id32 else g.src,
                                               g.dst.to(torch.int32) if id32 else g.dst, num_nodes=g.num_nodes)
    gen = torch.Generator(device=device).manual_seed(width)
    x = torch.randn(g.num_nodes, width, generator=gen, device=device).to(dtype)
    gout = torch.randn(g.num_nodes, width, generator=gen, device=device).to(dtype)
    values = _edge_values(g, op, dtype, width)
    elem, id_bytes = x.element_size(), views.csr("in").indices.element_size()
    nbytes = compulsory_bytes(g.num_nodes, g.num_edges, width, elem, id_bytes)
    fl = flop(op, g.num_edges, width)
    lines = dict(fetch_line_ms=nbytes / copy_bw * 1e3,
                 once_line_ms=once_bytes(g.num_nodes, g.num_edges, width, elem, id_bytes) / copy_bw * 1e3)
    picks = group_sizes(views, width, dtype, device)
    if not with_linear:
        picks = picks[:1]
    for name, gs, make in _providers(g, views, op, x, gout, values, picks):
        row = dict(graph=g.name, graph_kind=g.kind, nodes=g.num_nodes, edges=g.num_edges, op=op, width=width,
                   dtype=str(dtype).replace("torch.", ""), provider=name, gs=gs, flop=fl, bytes=nbytes, **lines)
        if name.startswith("dgl_accel (") and "locality" not in name:  # what "auto" chose (it may time both)
            row["locality"] = str(choose_locality(views, "in", width, dtype, gs=gs))
        try:
            if isinstance(make, Exception):
                raise make
            fwd, fwd_bwd = make()
            t_f = median_seconds(fwd, device, **timing)
            t_fb = median_seconds(fwd_bwd, device, **timing)
            row.update(ok=True, fwd_ms=t_f * 1e3, fwd_bwd_ms=t_fb * 1e3, gflops_fwd=gflops(fl, t_f),
                       gflops_fwd_bwd=gflops(2 * fl, t_fb), gbps_fwd=gbps(nbytes, t_f),
                       gbps_fwd_bwd=gbps(2 * nbytes, t_fb), bw_fraction_fwd=nbytes / t_f / copy_bw,
                       bw_fraction_fwd_bwd=2 * nbytes / t_fb / copy_bw)
        except Exception as exc:  # a missing or failing peer is a row, not the end of the report
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        results.add("aggregation", **row)
    if device.type == "cuda":
        torch.cuda.empty_cache()


def plan_build_case(g: Graph, width: int, dtype, device, timing: dict, l2_bytes: int | None = None) -> dict:
    """What building the locality split costs against the aggregation it serves: the plan of both
    views (forward and backward) of a graph seen for the first time (its CSRs and groups built, as a
    training run's first step builds them), timed against one plain copy_u-sum forward.
    ``l2_bytes``: the hot set's L2 (None: :func:`split_l2`'s)."""
    id32 = g.num_nodes < 2**31 and g.num_edges < 2**31
    src, dst = (g.src.to(torch.int32), g.dst.to(torch.int32)) if id32 else (g.src, g.dst)
    x = torch.randn(g.num_nodes, width, device=device).to(dtype)
    l2_bytes = split_l2(g.num_nodes, width, dtype, device) if l2_bytes is None else l2_bytes
    views = TensorGraph(src, dst, num_nodes=g.num_nodes)
    gs = choose_group_size(views, width, dtype, device=device, policy="cost").gs

    def forward():
        with torch.no_grad(), use_locality("off"):
            return aggregate(views, "copy_u", "sum", x, group_size=gs)
    t_fwd = median_seconds(forward, device, **timing)
    plans = []
    for _ in range(timing.get("warmup", 2) + timing.get("repeats", 5)):
        fresh = TensorGraph(src, dst, num_nodes=g.num_nodes)  # a new graph each time: nothing cached
        for direction in ("in", "out"):
            fresh.groups(direction, gs)
        synchronize(device)
        t0 = time.perf_counter()
        with use_locality("on", l2_bytes=l2_bytes):
            for direction in ("in", "out"):
                locality_parts(fresh, direction, x, gs)
        synchronize(device)
        plans.append(time.perf_counter() - t0)
    timed = plans[timing.get("warmup", 2):]
    t_plan = statistics.median(timed)
    with use_locality("on", l2_bytes=l2_bytes):
        choice = choose_locality(views, "in", width, dtype)
    return dict(graph=g.name, nodes=g.num_nodes, edges=g.num_edges, width=width, dtype=str(dtype).replace("torch.", ""),
                gs=gs, hot_rows=choice.hot_rows, hot_share=choice.hot_share, split=choice.split,
                plan_ms=t_plan * 1e3, plan_min_ms=min(timed) * 1e3, plan_max_ms=max(timed) * 1e3, fwd_ms=t_fwd * 1e3,
                plan_over_fwd=t_plan / t_fwd, ok=choice.split)


def run(results, graphs, plan, device, copy_bw: float, timing: dict, progress, deadline=None,
        linear_widths=None) -> None:
    """``plan``: [(graph name, ops, widths, dtypes)]; graphs by name.  Cases that would start after
    ``deadline`` (a :class:`~.timing.Deadline`) are counted, not run.  The linear model's group size
    is timed at ``linear_widths`` only (None: every width): on the H200 it picked gs=1 on R-MAT 19-23,
    8-13x slower than the autotuned pick, and those timings were most of the first run's minutes."""
    skipped = 0
    for name, ops, widths, dtypes in plan:
        g = graphs[name]
        progress(f"  aggregation on {g.name} ({g.num_nodes:,} nodes, {g.num_edges:,} edges)")
        if not (deadline is not None and deadline.passed()):
            results.add("aggregation_plan", **plan_build_case(g, max(widths), dtypes[0], device, timing))
        for op in ops:
            for width in widths:
                for dtype in dtypes:
                    if deadline is not None and deadline.passed():
                        skipped += 1
                        continue
                    bench_case(results, g, op, width, dtype, device, copy_bw, timing, progress,
                               with_linear=linear_widths is None or width in linear_widths)
    if skipped:
        progress(f"  aggregation: {skipped} cases skipped (budget spent)")
        results.add("skipped", part="aggregation", cases=skipped, reason="budget spent")
