"""The aggregation plan of one layer inside an execution-path session, and the row-restricted
aggregation of receptive-field layers.

:class:`LayerPlan` is what the session hands down: the core's GSpMMFunction runs its
``forward``/``backward_*`` steps, which aggregate only over the execution path SG_depth where that
pays (a compact block, one compiled pass over SG_depth's all-rows CSR, or the all-nodes subgraph)
and over the full graph otherwise.  Gradients equal full-graph training: what is skipped is
exactly zero.
"""
from __future__ import annotations

import dgl
import torch

from ...core import backend
from ...core.aggregation.native import scaled_rows
from ...core.aggregation.plan import Aggregation, AggregationPlan
from ...core.aggregation.scales import acc_dtype
from ...core.jit import runtime as jit_runtime
from ...core.jit.aggregation import rows_spmm, scatter_rows
from ...graph import dgl_kernels
from ...graph.views import DGLGraphViews
from .paths import Paths

# Dense layers restricted to a frontier's rows pay a gather and a scatter of those rows; a weight
# product saves (1 - fraction) of its work, which still wins at 70% of the rows.
MAX_ROW_FRACTION = 0.7


def path_kind(paths: Paths, depth: int, native_unweighted: bool) -> str:
    """How SG_depth is aggregated: on the "full" graph (most edges are on the path: as good, and
    exact), a "compact" block (native kernel, no edge weights, where its gather and scatter pay)
    or the all-nodes "subgraph"."""
    if not paths.worthwhile(depth):
        return "full"
    return "compact" if native_unweighted and paths.compact_pays(depth) else "subgraph"


def prepare_path(paths: Paths, depth: int, direction: str) -> str:
    """Build and cache the structure an unweighted native aggregation on SG_depth will use (the
    one-off cost of a first training step); returns its kind (see :func:`path_kind`)."""
    kind = path_kind(paths, depth, True)
    if kind == "compact":
        paths.compact(depth, direction)
    elif kind == "subgraph" and jit_runtime.enabled():
        paths.row_csr(depth, direction)
    elif kind == "subgraph":
        paths.subgraph(depth)
    return kind


def _compact_spmm(paths: Paths, depth, direction, x, row_scale, col_scale, scale_key):
    """The native aggregation on SG_depth's compact block: gather the input rows its edges read,
    aggregate over SG_depth's edges only with DGL's kernel, scatter.  Rows without edges are 0."""
    acc = acc_dtype(x.dtype)
    rows, cols, gidx, num_edges = paths.compact(depth, direction)
    col_s = None if col_scale is None else paths.gathered(
        (depth, direction, "col", scale_key), lambda: col_scale.index_select(0, cols).unsqueeze(1))
    row_s = None if row_scale is None else paths.gathered(
        (depth, direction, "row", scale_key), lambda: row_scale.index_select(0, rows).unsqueeze(1))
    xc = x.index_select(0, cols).to(acc)
    if col_s is not None:
        xc.mul_(col_s)
    out_c = dgl_kernels.spmm_sum(gidx, xc, None, rows.numel(), num_edges)
    out = torch.zeros((paths.graph.num_nodes(), x.shape[1]), dtype=x.dtype, device=x.device)
    if x.device.type == "cpu" and x.dtype == acc and jit_runtime.enabled() and rows.numel() >= jit_runtime.MIN_WORK:
        # scale and scatter the rows in one compiled pass
        scatter_rows(out.numpy(), rows.numpy(), out_c.numpy(), None if row_s is None else row_s.view(-1).numpy())
        return out
    if row_s is not None:
        out_c.mul_(row_s)
    out.index_copy_(0, rows, out_c.to(x.dtype))
    return out


def _compiled_rows_ok(x, *scales) -> bool:
    """Whether ``rows_spmm`` can aggregate ``x`` (CPU, float32/64, no autograd recording)."""
    return (jit_runtime.enabled() and x.device.type == "cpu" and x.dim() == 2
            and x.dtype in (torch.float32, torch.float64)
            and not (torch.is_grad_enabled() and x.requires_grad)
            and all(s is None or (s.dtype == x.dtype and s.is_contiguous()) for s in scales))


def path_aggregate(agg: Aggregation, paths: Paths, depth: int, direction: str, x, w, row_scale, col_scale):
    """Aggregate on execution path SG_depth; returns (result, the views whose edges it used, or None
    where it used no DGL graph's edges)."""
    native_unweighted = agg.path != "triton" and w is None
    kind = path_kind(paths, depth, native_unweighted)
    if kind == "full":
        return agg.spmm(direction, x, w, col_scale, row_scale), agg.views
    if kind == "compact":
        return _compact_spmm(paths, depth, direction, x, row_scale, col_scale, agg.scale_key), None
    if native_unweighted and _compiled_rows_ok(x, row_scale, col_scale):  # kind "subgraph"
        # compiled pass over SG_depth's CSR: every output row written once (no zero fill, no
        # scatter); 0.23 vs 0.52 ms on Amazon-CS's backward right after a large product here
        indptr, cols = paths.row_csr(depth, direction)
        out = torch.empty((indptr.numel() - 1, x.shape[1]), dtype=x.dtype)
        rows_spmm(indptr.numpy(), cols.numpy(), x.contiguous().numpy(),
                          None if col_scale is None else col_scale.numpy(),
                          None if row_scale is None else row_scale.numpy(), out.numpy())
        return out, None
    sg = DGLGraphViews(paths.subgraph(depth))
    w_sg = None if w is None else w[sg.graph.edata[dgl.EID].long()]
    return agg.spmm(direction, x, w_sg, col_scale, row_scale, views=sg), sg


class LayerPlan(AggregationPlan):
    """One aggregation of a training step inside an execution-path session: its index in the step
    and, once the number of aggregations is known, the rows its output and input must hold."""

    __slots__ = ("session", "layer")

    def __init__(self, session, layer: int):
        self.session, self.layer = session, layer

    @property
    def forward_depth(self) -> int | None:
        return self.session.forward_depth(self.layer)

    def rows(self, depth: int) -> torch.Tensor | None:
        """Node ids whose rows must be computed at ``depth``, or None when restricting to them would
        not pay (the frontier holds most of the nodes): then compute every row."""
        rows = self.session.paths.rows(depth)
        return rows if rows.numel() <= MAX_ROW_FRACTION * self.session.paths.graph.num_nodes() else None

    def backward_rows(self, offset: int, grad: torch.Tensor) -> torch.Tensor | None:
        """Rows where the gradient reaching a dense product of this layer can be nonzero: N^d with
        d = (aggregations after this layer's) + ``offset`` (see ``dgl_accel.core.dense``); None (all
        rows) where that would not pay or where ``grad`` is not 0 outside them (Session.restricts)."""
        depth = max(0, self.session.calls - self.layer) + offset
        rows = self.rows(depth)
        if rows is None or not self.session.restricts(grad, depth, f"the dense product of layer {self.layer}"):
            return None
        return rows

    def rows_written(self, tensor: torch.Tensor, offset: int) -> None:
        """A dense product's restricted backward wrote ``tensor``, 0 outside its rows (see
        :meth:`backward_rows`): the step it feeds need not scan it again."""
        self.session.confine(tensor, max(0, self.session.calls - self.layer) + offset)

    # ------------------------------------------------------------------ AggregationPlan
    def forward(self, agg, x, w):
        depth = self.forward_depth
        if depth is None:
            return agg.spmm("in", x, w, agg.src_scale, agg.dst_scale)
        # Receptive-field forward: rows in N^depth (all the loss can reach) are exact; others are 0
        # (or, where the path holds most edges, computed anyway).
        return path_aggregate(agg, self.session.paths, depth, "in", x, w, agg.dst_scale, agg.src_scale)[0]

    def backward_state(self, agg, grad):
        """The frontier depth of this backward, or None where it runs in full: SG_depth holds most
        edges, or the output gradient is not 0 outside N^depth (Session.restricts)."""
        depth = self.session.backward_depth(self.layer)
        if grad is None or not self.session.paths.worthwhile(depth):
            return None
        return depth if self.session.restricts(grad, depth, f"aggregation {self.layer}") else None

    def backward_input(self, agg, depth, grad, w):
        if depth is None:
            return agg.spmm("out", grad, w, agg.dst_scale, agg.src_scale), None
        # grad is exactly 0 outside N^depth, so only the in-edges of N^depth (SG_depth) contribute;
        # the result is 0 outside their sources, which lie in N^(depth+1)
        grad_u, used = path_aggregate(agg, self.session.paths, depth, "out", grad, w, agg.src_scale, agg.dst_scale)
        if used is not agg.views:  # restricted to SG_depth (not the full graph)
            self.session.confine(grad_u, depth + 1)
        return grad_u, used

    def edge_grad_edges(self, agg, depth, used):
        paths = self.session.paths
        if depth is None:
            return agg.views, None
        if used is None or used is agg.views:
            if not paths.worthwhile(depth):
                return agg.views, None
            used = DGLGraphViews(paths.subgraph(depth))
        return used, used.graph.edata[dgl.EID].long()


class RowsSpMMFunction(torch.autograd.Function):
    """``copy_u``/sum aggregation (with the degree scales) computed only for the rows of frontier
    N^depth: returns [|N^depth|, F], row i = node ``paths.rows(depth)[i]``.  Backward writes the
    full input gradient through the reverse of the same edges (the only ones that touch those rows);
    under ``create_graph=True`` it does so in differentiable torch ops (double backward)."""

    @staticmethod
    def forward(ctx, paths, depth, src_scale, row_scale, x):
        rows, gidx, rgidx, nnz = paths.row_block(depth)
        xs = scaled_rows(x, src_scale) if src_scale is not None else x.contiguous()
        out = dgl_kernels.spmm_sum(gidx, xs, None, rows.numel(), nnz)
        if row_scale is not None:
            out.mul_(row_scale)
        ctx.gidx, ctx.rgidx, ctx.nnz, ctx.num_src = gidx, rgidx, nnz, x.shape[0]
        ctx.src_scale, ctx.row_scale = src_scale, row_scale
        return out

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[4]:
            return None, None, None, None, None
        if torch.is_grad_enabled():  # create_graph=True: the transpose in differentiable torch ops
            src, dst, _ = ctx.gidx.edges(0)  # source node -> position in the rows of N^depth
            g = grad * ctx.row_scale if ctx.row_scale is not None else grad
            gx = grad.new_zeros((ctx.num_src, grad.shape[1])).index_add(0, src.long(), g.index_select(0, dst.long()))
            return None, None, None, None, gx if ctx.src_scale is None else gx * ctx.src_scale[:, None]
        g = grad * ctx.row_scale if ctx.row_scale is not None else grad.contiguous()
        gx = dgl_kernels.spmm_sum(ctx.rgidx, g, None, ctx.num_src, ctx.nnz)
        if ctx.src_scale is not None:
            gx.mul_(ctx.src_scale[:, None])
        return None, None, None, None, gx


# Above this share of the nodes the row path's full-size output (zeros, then the rows copied in)
# costs more than the rows it skips (Slashdot, 40% training nodes, N^1 = 83% of the nodes: epoch
# 1.80x with it vs 2.10x without; Amazon-CS at 10%, N^1 = 78%: 1.60x vs 1.52x).
ROWS_MAX_FRACTION = 0.8


def rows_path_applies(feat: torch.Tensor) -> bool:
    """Whether :func:`rows_aggregate` can run on ``feat``: [N, F] float32/64 CPU features on the
    native path (the row block is a DGL CPU index)."""
    return (feat.dim() == 2 and feat.device.type == "cpu" and feat.dtype in (torch.float32, torch.float64)
            and backend.choose_path(feat) != "triton")


def rows_aggregate(views: DGLGraphViews, feat: torch.Tensor, norm: str, plan: LayerPlan, depth: int):
    """Receptive-field aggregation for layers that keep working on the active rows only, on
    features where :func:`rows_path_applies`: ``(rows, out)`` with ``out[i]`` = the normalised
    ``copy_u``/sum aggregation of node ``rows[i]`` (``rows`` = N^depth), or None where nearly every
    row is active (nothing to save)."""
    paths = plan.session.paths
    rows = paths.rows(depth)
    if rows.numel() > ROWS_MAX_FRACTION * views.num_dst:
        return None  # (nearly) every row is active: nothing to save, and the block would copy the graph
    backend.record("copy_u_sum", "native", feat.device)
    src_scale, dst_scale = views.scales(norm, "sum", feat.dtype)
    row_scale = None if dst_scale is None else paths.gathered(
        (depth, "rows", f"{norm}.{feat.dtype}"), lambda: dst_scale.index_select(0, rows).unsqueeze(1))
    return rows, RowsSpMMFunction.apply(paths, depth, src_scale, row_scale, feat)
