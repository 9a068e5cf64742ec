"""Generalized SpMM on neighbour groups: ``gspmm(g, op, reduce, ufeat, efeat=None, norm=...)``.

Naming chain: ``_gspmm_grouped_fwd_kernel`` / ``_segment_reduce_kernel`` /
``_sddmm_grad_efeat_kernel`` (kernels/gspmm_grouped.py) -> :func:`gspmm_forward` and
:func:`edge_grad_forward` (launchers) -> :class:`GSpMMFunction` (autograd) -> :func:`gspmm` (op).

* ``op``: ``copy_u`` (message x[u]) or ``u_mul_e`` (x[u] * w[e]; w of shape [E], [E,1] or [E,F]).
* ``reduce``: ``sum`` or ``mean`` run on our paths; ``max``/``min`` fall through to DGL's gspmm
  (the grouped design combines partial sums linearly; an arg-max backward needs a different one).
* ``norm``: GCN normalisation fused into the aggregation, with ``dgl.nn.GraphConv``'s conventions:
  ``left``/``both`` scale each message by out_deg(u)^-1 / ^-1/2, ``right``/``both`` scale each row
  by in_deg(v)^-1 / ^-1/2, degrees clamped to at least 1.  ``mean`` is ``sum`` with 1/in_deg(v).
* Backward w.r.t. ``ufeat`` runs the same grouped kernel on the cached transposed structure
  (directed graphs are fine); backward w.r.t. ``efeat`` is an SDDMM over the edges.
* ``deterministic``: two-phase combine (per-group partials, then an ordered segmented reduce),
  bit-identical across runs; otherwise atomics.  Defaults to
  ``torch.are_deterministic_algorithms_enabled()``.
"""
from __future__ import annotations

from typing import Optional

import dgl
import torch

from ..core import backend
from ..core.groups import Groups
from ..graph.groups import groups_for
from ..exec_paths import LayerPlan, begin_layer
from ..core import cpu_jit, scratch
from ..core.csr import Structure
from ..graph.structure import cached, check_graph, edges_by_id, in_csr, out_csr
from ..core.launch import triton_kernel
from ..redundancy.hook import plan_for as _redundancy_plan_for

OPS = ("copy_u", "u_mul_e")
REDUCES = ("sum", "mean", "max", "min")
NORMS = ("none", "both", "left", "right")
_FLOAT = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


# ----------------------------------------------------------------------------- launchers
def _feature_tile(num_feats: int) -> int:
    from ..kernels.gspmm_grouped import FEATURE_TILES

    return next((t for t in FEATURE_TILES if t >= num_feats), FEATURE_TILES[-1])


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def gspmm_forward(structure: Structure, groups: Groups, ufeat: torch.Tensor, efeat: Optional[torch.Tensor],
                  src_scale: Optional[torch.Tensor], dst_scale: Optional[torch.Tensor],
                  deterministic: bool) -> torch.Tensor:
    """Launch the grouped kernel(s): out[r] = dst_scale[r] * sum_k src_scale[u_k] * x[u_k] (* w[e_k])
    over row r's CSR entries k.  ``efeat`` is [E, 1] or [E, F], indexed by edge id."""
    from ..kernels.gspmm_grouped import BLOCK_G, num_warps_for

    if ufeat.stride(-1) != 1:
        ufeat = ufeat.contiguous()  # rows may be strided; the feature tile needs unit column stride
    rows, num_feats, device = structure.num_rows, ufeat.shape[1], ufeat.device
    acc = _acc_dtype(ufeat.dtype)
    if rows == 0 or num_feats == 0 or groups.num_groups == 0:
        return torch.zeros((rows, num_feats), dtype=ufeat.dtype, device=device)
    block_f = _feature_tile(num_feats)
    warps = num_warps_for(BLOCK_G, block_f)
    grid = (-(-groups.num_groups // BLOCK_G), -(-num_feats // block_f))
    dummy = ufeat  # never dereferenced when its flag is off
    has_e = efeat is not None
    efeat = efeat.contiguous() if has_e else dummy
    per_feat = has_e and efeat.shape[1] > 1
    src_s = src_scale if src_scale is not None else dummy
    dst_s = dst_scale if dst_scale is not None else dummy
    kernel = triton_kernel("gspmm_grouped", "_gspmm_grouped_fwd_kernel", device)
    common = dict(BLOCK_G=BLOCK_G, BLOCK_F=block_f, HAS_EFEAT=has_e, EFEAT_PER_FEAT=per_feat,
                  HAS_SRC_SCALE=src_scale is not None, ACC_FP64=acc == torch.float64, num_warps=warps)
    args = (groups.row, groups.start, groups.length, structure.indices, structure.eids, ufeat, efeat,
            src_s, dst_s)
    if not deterministic:
        buf = torch.zeros((rows, num_feats), dtype=acc, device=device)
        kernel[grid](*args, buf, groups.num_groups, num_feats, ufeat.stride(0),
                     efeat.stride(0) if has_e else 0, buf.stride(0),
                     HAS_DST_SCALE=dst_scale is not None, ATOMIC=True, **common)
        return buf.to(ufeat.dtype)
    partial = torch.empty((groups.num_groups, num_feats), dtype=acc, device=device)
    kernel[grid](*args, partial, groups.num_groups, num_feats, ufeat.stride(0),
                 efeat.stride(0) if has_e else 0, partial.stride(0),
                 HAS_DST_SCALE=False, ATOMIC=False, **common)
    out = torch.empty((rows, num_feats), dtype=ufeat.dtype, device=device)
    reduce = triton_kernel("gspmm_grouped", "_segment_reduce_kernel", device)
    reduce[(rows, -(-num_feats // block_f))](
        groups.row_ptr, partial, dst_s, out, num_feats, partial.stride(0), out.stride(0),
        BLOCK_F=block_f, HAS_DST_SCALE=dst_scale is not None, ACC_FP64=acc == torch.float64,
        num_warps=num_warps_for(1, block_f))
    return out


def edge_grad_forward(src: torch.Tensor, dst: torch.Tensor, ufeat: torch.Tensor, grad_out: torch.Tensor,
                      src_scale, dst_scale, per_feat: bool, out_dtype: torch.dtype) -> torch.Tensor:
    """Launch the SDDMM kernel: gradient of u_mul_e w.r.t. w, edges in edge-id order."""
    ufeat, grad_out = ufeat.contiguous(), grad_out.contiguous()
    num_edges, num_feats = src.numel(), ufeat.shape[1]
    out = torch.empty((num_edges, num_feats if per_feat else 1), dtype=out_dtype, device=ufeat.device)
    if num_edges == 0:
        return out
    block_e, block_f = 32, 64
    dummy = ufeat
    kernel = triton_kernel("gspmm_grouped", "_sddmm_grad_efeat_kernel", ufeat.device)
    grid = (-(-num_edges // block_e), -(-num_feats // block_f) if per_feat else 1)
    kernel[grid](src, dst, ufeat, grad_out,
                 src_scale if src_scale is not None else dummy, dst_scale if dst_scale is not None else dummy,
                 out, num_edges, num_feats, ufeat.stride(0), grad_out.stride(0), out.stride(0),
                 BLOCK_E=block_e, BLOCK_F=block_f, PER_FEAT=per_feat, HAS_SRC_SCALE=src_scale is not None,
                 HAS_DST_SCALE=dst_scale is not None, ACC_FP64=_acc_dtype(ufeat.dtype) == torch.float64)
    return out


# ----------------------------------------------------------------------------- native CPU path
# DGL's own compiled CPU SpMM/SDDMM (multi-threaded, per-row CSR kernels) is the fastest CPU
# primitive on this stack: torch.sparse.mm on CSR measured 1.5-2.5x slower than it for F >= 64
# (bench/bench_aggregation.py).  So the native path calls DGL's kernels directly, without DGL's
# Python/autograd layers, and adds what we fuse: cached degree scales, the transposed index cached
# per graph, fp32 math for half types.
def _graph_index(graph, direction: str):
    if direction == "in":
        return graph._graph
    return cached(graph, "gspmm.reverse_index", lambda g: g._graph.reverse())


try:  # DGL's C entry point: skips _gspmm's per-call shape inference and Python conversions
    from dgl._sparse_ops import _CAPI_DGLKernelSpMM, to_dgl_nd, to_dgl_nd_for_write
except ImportError:  # another DGL version: go through its public-ish wrapper
    _CAPI_DGLKernelSpMM = None


def _dgl_spmm_sum(gidx, x: torch.Tensor, w: Optional[torch.Tensor], num_rows: int, num_edges: int):
    """sum over in-edges of x[u] (* w[e]) with DGL's CPU kernel; x, w contiguous, same dtype."""
    if _CAPI_DGLKernelSpMM is None:
        from dgl._sparse_ops import _gspmm

        return _gspmm(gidx, "copy_lhs" if w is None else "mul", "sum", x, w)[0]
    out = torch.zeros((num_rows, x.shape[1]), dtype=x.dtype, device=x.device)
    if num_edges:
        null = to_dgl_nd(None)
        _CAPI_DGLKernelSpMM(gidx, "copy_lhs" if w is None else "mul", "sum", to_dgl_nd(x),
                            null if w is None else to_dgl_nd(w), to_dgl_nd_for_write(out), null, null)
    return out


def _scaled_rows(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x * scale[:, None]`` written into a buffer reused across calls of this thread: the scaled
    input lives only until the kernel has read it, and a fresh N x F allocation per aggregation
    (forward and backward, every layer) showed up in epoch times.  Never returned to callers."""
    if x.device.type != "cpu" or (torch.is_grad_enabled() and (x.requires_grad or scale.requires_grad)):
        return x * scale[:, None]  # (double backward records this product)
    return torch.mul(x, scale[:, None], out=scratch.tensor("gspmm.scaled", x.shape, x.dtype))


def native_spmm(graph, direction: str, ufeat, efeat, src_scale, dst_scale) -> torch.Tensor:
    """out = dst_scale * (A (src_scale * x)) with A the in-adjacency (``"in"``) or its transpose
    (``"out"``), weighted by ``efeat`` ([E, 1] or [E, F], edge-id order) when given."""
    acc = _acc_dtype(ufeat.dtype)
    x = ufeat.to(acc)
    x = _scaled_rows(x, src_scale) if src_scale is not None else x.contiguous()
    num_src, num_dst, num_edges, _ = _graph_facts(graph)
    w = None if efeat is None else efeat.to(acc).contiguous()
    out = _dgl_spmm_sum(_graph_index(graph, direction), x, w, num_dst if direction == "in" else num_src, num_edges)
    if dst_scale is not None:
        out.mul_(dst_scale[:, None])
    return out.to(ufeat.dtype)


def native_edge_grad(graph, ufeat, grad_out, src_scale, dst_scale, per_feat, out_dtype):
    """SDDMM: s_u s_v <x[u], grad[v]> per edge (or the elementwise product), edge-id order."""
    from dgl._sparse_ops import _gsddmm

    acc = _acc_dtype(ufeat.dtype)
    x, g = ufeat.to(acc), grad_out.to(acc)
    x = x * src_scale[:, None] if src_scale is not None else x.contiguous()
    g = g * dst_scale[:, None] if dst_scale is not None else g.contiguous()
    out = _gsddmm(graph._graph, "mul" if per_feat else "dot", x, g, "u", "v")
    return out.reshape(out.shape[0], x.shape[1] if per_feat else 1).to(out_dtype)


# ----------------------------------------------------------------------------- autograd
def _scales(graph, norm: str, reduce: str, dtype: torch.dtype):
    """(per-source, per-destination) factors as float32 (float64 for fp64 inputs), cached per graph."""
    if norm == "none" and reduce == "sum":
        return None, None  # the common case: no lookup at all
    acc = _acc_dtype(dtype)
    return cached(graph, f"gspmm.scales.{norm}.{reduce}.{acc}",
                  lambda g: degree_scales(g.out_degrees, g.in_degrees, norm, reduce, acc))


def degree_scales(out_degrees, in_degrees, norm: str, reduce: str, acc: torch.dtype):
    """(per-source, per-destination) factors of the normalised aggregation: the GCN norm
    (``both``: deg^-1/2 each side; ``left``/``right``: 1/deg on one side) and mean's 1/in-degree.
    ``out_degrees``/``in_degrees`` are called only when needed; degrees clamp at 1 (DGL's rule)."""
    src = dst = None
    if norm in ("left", "both"):
        deg = out_degrees().to(acc).clamp(min=1)
        src = deg.pow(-0.5) if norm == "both" else 1.0 / deg
    if norm in ("right", "both") or reduce == "mean":
        deg = in_degrees().to(acc).clamp(min=1)
        dst = torch.ones_like(deg)
        if norm in ("right", "both"):
            dst = deg.pow(-0.5) if norm == "both" else 1.0 / deg
        if reduce == "mean":
            dst = dst / deg
    return src, dst


def _compact_spmm(paths, depth, direction, x, row_scale, col_scale, scale_key):
    """``native_spmm`` on the execution path SG_depth: gather the input rows its edges read, and
    let DGL's kernel aggregate them over SG_depth's edges only.  Rows without edges come out 0."""
    acc = _acc_dtype(x.dtype)
    rows, cols, gidx, num_edges = paths.compact(depth, direction)
    col_s = None if col_scale is None else paths.gathered(
        (depth, direction, "col", scale_key), lambda: col_scale.index_select(0, cols).unsqueeze(1))
    row_s = None if row_scale is None else paths.gathered(
        (depth, direction, "row", scale_key), lambda: row_scale.index_select(0, rows).unsqueeze(1))
    xc = x.index_select(0, cols).to(acc)
    if col_s is not None:
        xc.mul_(col_s)
    out_c = _dgl_spmm_sum(gidx, xc, None, rows.numel(), num_edges)
    out = torch.zeros((paths.graph.num_nodes(), x.shape[1]), dtype=x.dtype, device=x.device)
    if x.device.type == "cpu" and x.dtype == acc and cpu_jit.enabled() and rows.numel() >= cpu_jit.MIN_WORK:
        # scale and scatter the rows in one compiled pass
        cpu_jit.scatter_rows(out.numpy(), rows.numpy(), out_c.numpy(), None if row_s is None else row_s.view(-1).numpy())
        return out
    if row_s is not None:
        out_c.mul_(row_s)
    out.index_copy_(0, rows, out_c.to(x.dtype))
    return out


def _aggregate(graph, direction: str, x, w, src_scale, dst_scale, path, gs, deterministic):
    """One aggregation over ``graph`` (``"in"``) or its transpose (``"out"``) on the chosen path."""
    if path == "triton":
        structure = in_csr(graph) if direction == "in" else out_csr(graph)
        gs = gs if gs is not None else _group_size(graph, x.shape[1], x.dtype, None)
        return gspmm_forward(structure, groups_for(graph, direction, gs), x, w, src_scale, dst_scale,
                             deterministic)
    return native_spmm(graph, direction, x, w, src_scale, dst_scale)


def _edge_grad(graph, path, ufeat, grad_out, src_scale, dst_scale, per_feat, dtype):
    if path == "triton":
        src, dst = edges_by_id(graph)
        return edge_grad_forward(src, dst, ufeat, grad_out, src_scale, dst_scale, per_feat, dtype)
    return native_edge_grad(graph, ufeat, grad_out, src_scale, dst_scale, per_feat, dtype)


def _path_kind(paths, depth: int, native_unweighted: bool) -> str:
    """How SG_depth is aggregated: on the "full" graph (most edges are on the path: as good, and
    exact), a "compact" block (native kernel, no edge weights, where its gather and scatter pay)
    or the all-nodes "subgraph"."""
    if not paths.worthwhile(depth):
        return "full"
    return "compact" if native_unweighted and paths.compact_pays(depth) else "subgraph"


def prepare_path(paths, depth: int, direction: str) -> str:
    """Build and cache the structure an unweighted native aggregation on SG_depth will use (the
    one-off cost of a first training step); returns its kind (see :func:`_path_kind`)."""
    kind = _path_kind(paths, depth, True)
    if kind == "compact":
        paths.compact(depth, direction)
    elif kind == "subgraph" and cpu_jit.enabled():
        paths.row_csr(depth, direction)
    elif kind == "subgraph":
        paths.subgraph(depth)
    return kind


def _compiled_rows_ok(x, *scales) -> bool:
    """Whether ``cpu_jit.rows_spmm`` can aggregate ``x`` (CPU, float32/64, no autograd recording)."""
    return (cpu_jit.enabled() and x.device.type == "cpu" and x.dim() == 2 and x.dtype in (torch.float32, torch.float64)
            and not (torch.is_grad_enabled() and x.requires_grad)
            and all(s is None or (s.dtype == x.dtype and s.is_contiguous()) for s in scales))


def _path_aggregate(ctx, depth, direction, x, w, row_scale, col_scale):
    """Aggregate on execution path SG_depth; returns (result, the graph whose edges it used)."""
    paths = ctx.session.paths
    native_unweighted = ctx.path != "triton" and w is None
    kind = _path_kind(paths, depth, native_unweighted)
    if kind == "full":
        return _aggregate(ctx.graph, direction, x, w, col_scale, row_scale, ctx.path, ctx.gs, ctx.deterministic), \
            ctx.graph
    if kind == "compact":
        return _compact_spmm(paths, depth, direction, x, row_scale, col_scale, ctx.scale_key), None
    if native_unweighted and _compiled_rows_ok(x, row_scale, col_scale):  # kind "subgraph"
        # compiled pass over SG_depth's CSR: every output row written once (no zero fill, no
        # scatter); 0.23 vs 0.52 ms on Amazon-CS's backward right after a large product here
        indptr, cols = paths.row_csr(depth, direction)
        out = torch.empty((indptr.numel() - 1, x.shape[1]), dtype=x.dtype)
        cpu_jit.rows_spmm(indptr.numpy(), cols.numpy(), x.contiguous().numpy(),
                          None if col_scale is None else col_scale.numpy(),
                          None if row_scale is None else row_scale.numpy(), out.numpy())
        return out, None
    sg = paths.subgraph(depth)
    w_sg = None if w is None else w[sg.edata[dgl.EID].long()]
    return _aggregate(sg, direction, x, w_sg, col_scale, row_scale, ctx.path, ctx.gs, ctx.deterministic), sg


class GSpMMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, reduce, norm, path, gs, deterministic, session, layer, ufeat, efeat):
        src_scale, dst_scale = _scales(graph, norm, reduce, ufeat.dtype)  # full-graph degrees, always
        ctx.graph, ctx.path, ctx.scales, ctx.gs = graph, path, (src_scale, dst_scale), gs
        ctx.deterministic, ctx.session, ctx.layer = deterministic, session, layer
        ctx.scale_key = f"{norm}.{reduce}.{_acc_dtype(ufeat.dtype)}"
        ctx.save_for_backward(ufeat, efeat)
        depth = session.forward_depth(layer) if layer is not None else None
        if depth is None:
            return _aggregate(graph, "in", ufeat, efeat, src_scale, dst_scale, path, gs, deterministic)
        # Receptive-field forward: rows in N^depth (all the loss can reach) are exact; others are 0
        # (or, where the path holds most edges, computed anyway).
        return _path_aggregate(ctx, depth, "in", ufeat, efeat, dst_scale, src_scale)[0]

    @staticmethod
    def backward(ctx, grad_out):
        ufeat, efeat = ctx.saved_tensors
        src_scale, dst_scale = ctx.scales
        depth = ctx.session.backward_depth(ctx.layer) if ctx.layer is not None else None
        grad_u = grad_e = None
        edges_of = ctx.graph  # the graph whose edges carry nonzero weight gradients
        if ctx.needs_input_grad[8]:
            # d out[v] / d x[u] = dst_scale[v] * w[e] * src_scale[u]: the transposed product, with the
            # two scale vectors swapping roles.  grad_out is exactly 0 outside N^depth, so only the
            # in-edges of N^depth (SG_depth) contribute.
            if depth is None:
                grad_u = _aggregate(ctx.graph, "out", grad_out, efeat, dst_scale, src_scale, ctx.path, ctx.gs,
                                    ctx.deterministic)
            else:
                grad_u, used = _path_aggregate(ctx, depth, "out", grad_out, efeat, src_scale, dst_scale)
                edges_of = used if used is not None else ctx.graph
        if efeat is not None and ctx.needs_input_grad[9]:
            if depth is not None and edges_of is ctx.graph and ctx.session.paths.worthwhile(depth):
                edges_of = ctx.session.paths.subgraph(depth)
            per_feat = efeat.shape[1] > 1
            grad_e = _edge_grad(edges_of, ctx.path, ufeat, grad_out, src_scale, dst_scale, per_feat, efeat.dtype)
            if edges_of is not ctx.graph:  # SG edges -> full edge list; the others get exact zeros
                full = grad_e.new_zeros((efeat.shape[0], grad_e.shape[1]))
                full[edges_of.edata[dgl.EID].long()] = grad_e
                grad_e = full
        return None, None, None, None, None, None, None, None, grad_u, grad_e


# ----------------------------------------------------------------------------- public op
def _choice(name: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"expected {name} to be one of {', '.join(allowed)} (got {value!r}).")
    return value


def _graph_facts(graph):
    """(num_src, num_dst, num_edges, device) after checking the graph once per graph version: DGL's Python
    accessors cost microseconds each, which matters for small graphs called every layer."""
    def build(g):
        check_graph(g)
        return g.num_src_nodes(), g.num_dst_nodes(), g.num_edges(), g.device

    return cached(graph, "gspmm.facts", build)


def _validate(graph, op, reduce, ufeat, efeat, norm, group_size):
    if op not in OPS:
        _choice("op", op, OPS)
    if reduce not in REDUCES:
        _choice("reduce", reduce, REDUCES)
    if norm not in NORMS:
        _choice("norm", norm, NORMS)
    if not isinstance(graph, dgl.DGLGraph):
        raise ValueError(f"expected a dgl.DGLGraph or block (got {type(graph).__name__}).")
    num_src, _, num_edges, device = _graph_facts(graph)
    if not isinstance(ufeat, torch.Tensor) or ufeat.dim() < 1:
        raise ValueError("expected ufeat to be a tensor with one row per source node "
                         f"(got {type(ufeat).__name__}{' of dim 0' if isinstance(ufeat, torch.Tensor) else ''}).")
    if ufeat.dtype not in _FLOAT:
        raise ValueError(f"expected floating-point ufeat (float32, float16, bfloat16, float64) "
                         f"(got {ufeat.dtype}). Fix: ufeat.float().")
    if ufeat.shape[0] != num_src:
        raise ValueError(f"expected ufeat with {num_src} rows, one per source node "
                         f"(got {ufeat.shape[0]}). Fix: for a block pass block.srcdata features.")
    if ufeat.device != device:
        raise ValueError(f"expected graph and features on one device (got graph on {device}, "
                         f"ufeat on {ufeat.device}). Fix: g = g.to(ufeat.device).")
    if (op == "u_mul_e") != (efeat is not None):
        raise ValueError(f"expected efeat {'' if op == 'u_mul_e' else 'to be None '}for op={op!r} "
                         f"(got {'None' if efeat is None else 'a tensor'}). "
                         f"Fix: use op='u_mul_e' with edge weights, op='copy_u' without.")
    if efeat is not None:
        if not isinstance(efeat, torch.Tensor) or efeat.dtype not in _FLOAT:
            raise ValueError(f"expected floating-point edge weights (got "
                             f"{efeat.dtype if isinstance(efeat, torch.Tensor) else type(efeat).__name__}).")
        if efeat.device != device:
            raise ValueError(f"expected graph and edge weights on one device (got graph on {device}, "
                             f"efeat on {efeat.device}). Fix: efeat.to(g.device).")
        ok_shapes = [(num_edges,), (num_edges, 1), (num_edges,) + tuple(ufeat.shape[1:])]
        if tuple(efeat.shape) not in ok_shapes:
            raise ValueError(f"expected efeat of shape [E], [E, 1] or [E, {', '.join(map(str, ufeat.shape[1:]))}] "
                             f"with E = {graph.num_edges()} (got {list(efeat.shape)}).")
    if group_size is not None and (not isinstance(group_size, int) or isinstance(group_size, bool)
                                   or group_size < 1):
        raise ValueError(f"expected group_size to be None or an int >= 1 (got {group_size!r}).")
    if reduce in ("max", "min") and norm != "none":
        raise ValueError(f"expected norm='none' with reduce={reduce!r} (got norm={norm!r}): "
                         f"degree normalisation is defined for sum/mean aggregation.")


def _dgl_fallthrough(graph, op, reduce, ufeat, efeat):
    """max/min: DGL's gspmm, with zero rows for zero in-degree as ``update_all`` gives."""
    from ..patching import ORIGINAL_GSPMM  # never the routed one: that would loop back here

    if efeat is not None and efeat.dim() == 1:
        efeat = efeat.reshape(-1, *([1] * (ufeat.dim() - 1)))
    out = ORIGINAL_GSPMM(graph, "copy_lhs" if op == "copy_u" else "mul", reduce, ufeat, efeat)
    empty = graph.in_degrees() == 0
    if bool(empty.any()):
        out = torch.where(empty.reshape((-1,) + (1,) * (out.dim() - 1)), torch.zeros_like(out), out)
    return out


def _group_size(graph, num_feats: int, dtype, forced: Optional[int]) -> int:
    """Forced gs, or the one chosen from this graph's degree statistics (see dgl_accel.explain)."""
    if forced is not None:
        return forced
    from ..grouping import choose_group_size

    return choose_group_size(graph, num_feats, dtype, device=graph.device).gs


def gspmm(graph, op: str, reduce: str, ufeat: torch.Tensor, efeat: Optional[torch.Tensor] = None, *,
          norm: str = "none", group_size: Optional[int] = None,
          deterministic: Optional[bool] = None, layer_plan: Optional[LayerPlan] = None) -> torch.Tensor:
    """Aggregate messages into destination nodes; differentiable in ``ufeat`` and ``efeat``.

    ``ufeat``: [num_src_nodes, *]; ``efeat`` (``u_mul_e`` only): [E], [E, 1] or [E, *ufeat.shape[1:]].
    Returns [num_dst_nodes, *ufeat.shape[1:]].  ``group_size`` forces gs (default: chosen from the
    graph's degree statistics, see ``dgl_accel.explain``).  ``layer_plan`` is for layers that
    registered with ``dgl_accel.exec_paths.begin_layer`` themselves.
    """
    _validate(graph, op, reduce, ufeat, efeat, norm, group_size)
    if op == "copy_u" and reduce != "max" and reduce != "min":
        # GraphACT redundancy reduction (dgl_accel.redundancy): a plan attached to this graph (or
        # auto-built under use_redundancy) and allowed by the mode computes the same sum/mean via
        # its pair nodes.  Costs one dict check when no plans are in use.
        rplan = _redundancy_plan_for(graph, ufeat)
        if rplan is not None:
            return rplan.aggregate(ufeat, reduce=reduce, norm=norm)
    stat_name = f"{op}_{reduce}"
    if reduce in ("max", "min"):
        backend.record_fallthrough(stat_name, "max/min reduce runs DGL's gspmm")
        return _dgl_fallthrough(graph, op, reduce, ufeat, efeat)
    path = backend.choose_path(ufeat) if efeat is None else backend.choose_path(ufeat, efeat)
    backend.record(stat_name, path, ufeat.device)
    trailing = tuple(ufeat.shape[1:])
    width = 1
    for d in trailing:
        width *= d
    x = ufeat if ufeat.dim() == 2 else ufeat.reshape(ufeat.shape[0], width)  # -1 is ambiguous with 0 rows
    w = None
    if efeat is not None:  # [E, 1]: one weight per edge; [E, width]: one per edge and feature
        scalar = efeat.dim() == 1 or tuple(efeat.shape[1:]) == (1,)
        w = efeat.reshape(efeat.shape[0], 1 if scalar else width)
    if deterministic is None:
        deterministic = torch.are_deterministic_algorithms_enabled()
    # Inside dgl_accel.execution_paths(...): this aggregation's place in the training step.  A layer
    # that already registered itself (to restrict its own dense work) passes its plan.
    plan = layer_plan if layer_plan is not None else begin_layer(graph)
    session, layer = (plan.session, plan.layer) if plan is not None else (None, None)
    out = GSpMMFunction.apply(graph, reduce, norm, path, group_size, bool(deterministic), session, layer, x, w)
    return out if ufeat.dim() == 2 else out.reshape((out.shape[0],) + trailing)


class RowsSpMMFunction(torch.autograd.Function):
    """``copy_u``/sum aggregation (with the degree scales) computed only for the rows of frontier
    N^depth: returns [|N^depth|, F], row i = node ``paths.rows(depth)[i]``.  Backward writes the
    full input gradient through the reverse of the same edges (the only ones that touch those rows)."""

    @staticmethod
    def forward(ctx, paths, depth, src_scale, row_scale, x):
        rows, gidx, rgidx, nnz = paths.row_block(depth)
        xs = _scaled_rows(x, src_scale) if src_scale is not None else x.contiguous()
        out = _dgl_spmm_sum(gidx, xs, None, rows.numel(), nnz)
        if row_scale is not None:
            out.mul_(row_scale)
        ctx.rgidx, ctx.nnz, ctx.num_src = rgidx, nnz, x.shape[0]
        ctx.src_scale, ctx.row_scale = src_scale, row_scale
        return out

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[4]:
            return None, None, None, None, None
        g = grad * ctx.row_scale if ctx.row_scale is not None else grad.contiguous()
        gx = _dgl_spmm_sum(ctx.rgidx, g, None, ctx.num_src, ctx.nnz)
        if ctx.src_scale is not None:
            gx.mul_(ctx.src_scale[:, None])
        return None, None, None, None, gx


# Above this share of the nodes the row path's full-size output (zeros, then the rows copied in)
# costs more than the rows it skips (Slashdot, 40% training nodes, N^1 = 83% of the nodes: epoch
# 1.80x with it vs 2.10x without; Amazon-CS at 10%, N^1 = 78%: 1.60x vs 1.52x).
_ROWS_MAX_FRACTION = 0.8


def gspmm_rows(graph, feat: torch.Tensor, norm: str, plan: LayerPlan, depth: int):
    """Receptive-field aggregation for layers that keep working on the active rows only:
    ``(rows, out)`` with ``out[i]`` = the normalised ``copy_u``/sum aggregation of node ``rows[i]``
    (``rows`` = N^depth), or None where this path does not apply (GPU tensors, half precision,
    feature shapes other than [N, F], a redundancy plan in use): then call :func:`gspmm`."""
    if (feat.dim() != 2 or feat.device.type != "cpu" or feat.dtype not in (torch.float32, torch.float64)
            or backend.choose_path(feat) == "triton" or _redundancy_plan_for(graph, feat) is not None):
        return None
    paths = plan.session.paths
    rows = paths.rows(depth)
    if rows.numel() > _ROWS_MAX_FRACTION * graph.num_dst_nodes():
        return None  # (nearly) every row is active: nothing to save, and the block would copy the graph
    backend.record("copy_u_sum", "native", feat.device)
    src_scale, dst_scale = _scales(graph, norm, "sum", feat.dtype)
    row_scale = None if dst_scale is None else paths.gathered(
        (depth, "rows", f"{norm}.{feat.dtype}"), lambda: dst_scale.index_select(0, rows).unsqueeze(1))
    return rows, RowsSpMMFunction.apply(paths, depth, src_scale, row_scale, feat)


def copy_u_sum(graph, feat: torch.Tensor) -> torch.Tensor:
    """``dgl.ops.copy_u_sum`` on dgl-accel's paths."""
    return gspmm(graph, "copy_u", "sum", feat)


# ----------------------------------------------------------------------------- GPU autotuning
def _time_grouped_forward(graph, feat_dim: int, dtype: torch.dtype, gs: int, repeats: int = 3) -> float:
    """Seconds for one grouped copy_u-sum forward with group size ``gs`` on ``graph``'s CUDA device:
    the timer the group-size autotuner calls once per candidate and (graph, width, dtype)."""
    x = torch.randn(graph.num_src_nodes(), feat_dim, device=graph.device).to(dtype)
    structure, groups = in_csr(graph), groups_for(graph, "in", gs)
    gspmm_forward(structure, groups, x, None, None, None, False)  # compile outside the timer
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        gspmm_forward(structure, groups, x, None, None, None, False)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / repeats


def _register_autotuner() -> None:
    from ..grouping import set_autotune_timer

    set_autotune_timer(lambda g, feat_dim, dtype, gs: _time_grouped_forward(g, feat_dim, dtype, gs))


_register_autotuner()
