"""Aggregation plans: which edges and rows one aggregation runs on.

The op core runs whatever plan it is handed and never asks who is active.  :data:`FULL_GRAPH`
aggregates over the whole graph; policies above the core (``dgl_accel.policies.exec_paths``)
subclass :class:`AggregationPlan` to restrict the forward or backward pass to an execution path.
:data:`TRANSPOSED` is the full graph's transpose: the input gradient as an op of its own, which is
what a differentiable (double) backward applies.
"""
from __future__ import annotations

import torch

from .launchers import edge_grad_forward, gspmm_forward
from .locality import locality_parts
from .native import native_edge_grad, native_spmm
from .scales import acc_dtype


class Aggregation:
    """One call of the op, as the plan sees it: the graph, the path (``"triton"`` or ``"native"``),
    group size, determinism and the degree scales, with the two primitives every plan builds on.
    ``op``/``reduce`` name the call (``copy_u``/``u_mul_e``, ``sum``/``mean``) for the stats.
    ``keep_acc``: results in the accumulation dtype (bf16 rows summed in fp32 come back in fp32, not
    rounded to bf16), for a caller whose next step widens them anyway."""

    __slots__ = ("views", "path", "gs", "deterministic", "src_scale", "dst_scale", "scale_key", "op", "reduce",
                 "keep_acc")

    def __init__(self, views, path: str, gs: int | None, deterministic: bool, src_scale, dst_scale,
                 scale_key: str, op: str = "copy_u", reduce: str = "sum"):
        self.views, self.path, self.gs, self.deterministic = views, path, gs, deterministic
        self.src_scale, self.dst_scale, self.scale_key = src_scale, dst_scale, scale_key
        self.op, self.reduce = op, reduce
        self.keep_acc = False

    def spmm(self, direction: str, x, w, col_scale, row_scale, views=None) -> torch.Tensor:
        """One aggregation over ``views`` (default: the call's graph) in ``direction`` (``"in"``:
        rows are destinations; ``"out"``: its transpose) on the call's path."""
        views = self.views if views is None else views
        if self.path == "triton":
            gs = self.gs if self.gs is not None else views.group_size(x.shape[1], x.dtype)
            out = gspmm_forward(locality_parts(views, direction, x, gs), x, w, col_scale, row_scale,
                                self.deterministic)
            return out.to(acc_dtype(x.dtype)) if self.keep_acc else out
        return native_spmm(views, direction, x, w, col_scale, row_scale, keep_acc=self.keep_acc)

    def edge_grad(self, views, ufeat, grad_out, per_feat: bool, dtype) -> torch.Tensor:
        """Gradient of ``u_mul_e`` w.r.t. the edge weights of ``views``' edges (edge-id order)."""
        if self.path == "triton":
            src, dst = views.edges_by_id()
            return edge_grad_forward(src, dst, ufeat, grad_out, self.src_scale, self.dst_scale, per_feat, dtype)
        return native_edge_grad(views, ufeat, grad_out, self.src_scale, self.dst_scale, per_feat, dtype)


class AggregationPlan:
    """The full-graph plan; subclasses override any step.

    ``backward_state`` runs once per backward with the output gradient (None where the backward
    runs in full regardless, e.g. under ``create_graph``), before the other two backward steps,
    and its result is handed to them.  ``backward_input`` returns the input
    gradient and the views whose edges it used (None: the call's graph); ``edge_grad_edges``
    returns the views to differentiate the edge weights on and, when they are a subgraph, the
    full-graph ids of their edges.

    ``transposed``: the plan runs the op on the transpose (its input lives on the destinations);
    ``transpose()``: the plan whose forward is this plan's input gradient, on the full graph (exact
    for every plan: what a restricted plan skips is exactly zero), for double backward.
    """

    transposed = False

    def transpose(self) -> AggregationPlan:
        return TRANSPOSED

    def forward(self, agg: Aggregation, x, w) -> torch.Tensor:
        return agg.spmm("in", x, w, agg.src_scale, agg.dst_scale)

    def backward_state(self, agg: Aggregation, grad):
        return None

    def backward_input(self, agg: Aggregation, state, grad, w):
        # d out[v] / d x[u] = dst_scale[v] * w[e] * src_scale[u]: the transposed product, with the
        # two scale vectors swapping roles.
        return agg.spmm("out", grad, w, agg.dst_scale, agg.src_scale), None

    def edge_grad_edges(self, agg: Aggregation, state, used):
        return (agg.views if used is None else used), None


class TransposedPlan(AggregationPlan):
    """The full graph's transpose: out[u] = src_scale[u] * sum over out-edges (v, e) of
    dst_scale[v] * y[v] (* w[e]); its input gradient is the forward op again."""

    transposed = True

    def transpose(self) -> AggregationPlan:
        return FULL_GRAPH

    def forward(self, agg: Aggregation, x, w) -> torch.Tensor:
        return agg.spmm("out", x, w, agg.dst_scale, agg.src_scale)

    def backward_input(self, agg: Aggregation, state, grad, w):
        return agg.spmm("in", grad, w, agg.src_scale, agg.dst_scale), None


FULL_GRAPH = AggregationPlan()
TRANSPOSED = TransposedPlan()
