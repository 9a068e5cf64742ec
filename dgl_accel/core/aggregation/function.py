"""The aggregation op's autograd Function and its DGL-free entry :func:`aggregate`.

Backward w.r.t. ``ufeat`` runs the same kernels on the transposed view (directed graphs are
fine); backward w.r.t. ``efeat`` is an SDDMM over the edges.  ``deterministic``: two-phase combine
on the Triton path (per-group partials, then an ordered segmented reduce), bit-identical across
runs; otherwise atomics.  Defaults to ``torch.are_deterministic_algorithms_enabled()``.

Double backward (``create_graph=True``): the backward is then itself recorded.  The input gradient
is the op on the transposed plan (``plan.transpose()``, the full graph: exact for every plan), so
it is differentiable in the output gradient and the edge weights to any order; the edge-weight
gradient is the same SDDMM in torch ops.  Without ``create_graph`` the backward runs the plan's
own (restricted, scratch-buffer) steps as before.
"""
from __future__ import annotations

import torch

from .. import backend
from .checks import check_features, check_options
from .native import native_edge_grad
from .plan import FULL_GRAPH, Aggregation, AggregationPlan
from .scales import acc_dtype


class GSpMMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, agg: Aggregation, plan: AggregationPlan, ufeat, efeat):
        ctx.agg, ctx.plan = agg, plan
        # ufeat is read again only for the edge-weight gradient: not keeping it otherwise frees
        # an N x F tensor (often the previous layer's output) before the backward
        keep_u = efeat is not None and ctx.needs_input_grad[3]
        ctx.save_for_backward(ufeat if keep_u else None, efeat)
        return plan.forward(agg, ufeat, efeat)

    @staticmethod
    def backward(ctx, grad_out):
        ufeat, efeat = ctx.saved_tensors
        agg, plan = ctx.agg, ctx.plan
        backend.record(f"{agg.op}_{agg.reduce}_backward", agg.path, grad_out.device)
        if torch.is_grad_enabled():  # create_graph=True: a backward that is itself differentiable
            plan.backward_state(agg, None)  # the plan sees the backward, which runs on the full graph
            return GSpMMFunction.recorded_backward(ctx, agg, plan, ufeat, efeat, grad_out)
        state = plan.backward_state(agg, grad_out)
        grad_u = grad_e = used = None
        if ctx.needs_input_grad[2]:
            grad_u, used = plan.backward_input(agg, state, grad_out, efeat)
        if efeat is not None and ctx.needs_input_grad[3]:
            views, eids = plan.edge_grad_edges(agg, state, used)
            src_side, dst_side = (grad_out, ufeat) if plan.transposed else (ufeat, grad_out)
            grad_e = agg.edge_grad(views, src_side, dst_side, efeat.shape[1] > 1, efeat.dtype)
            if eids is not None:  # subgraph edges -> the full edge list; the others get exact zeros
                full = grad_e.new_zeros((efeat.shape[0], grad_e.shape[1]))
                full[eids] = grad_e
                grad_e = full
        return None, None, grad_u, grad_e

    @staticmethod
    def recorded_backward(ctx, agg, plan, ufeat, efeat, grad_out):
        """The backward under ``create_graph``: the op on the transposed full graph (linear in
        ``grad_out``, differentiable in it and ``efeat``) and the SDDMM in torch ops."""
        grad_u = grad_e = None
        if ctx.needs_input_grad[2]:
            grad_u = GSpMMFunction.apply(agg, plan.transpose(), grad_out, efeat)
        if efeat is not None and ctx.needs_input_grad[3]:
            src_side, dst_side = (grad_out, ufeat) if plan.transposed else (ufeat, grad_out)
            grad_e = native_edge_grad(agg.views, src_side, dst_side, agg.src_scale, agg.dst_scale,
                                      efeat.shape[1] > 1, efeat.dtype, recorded=True)
        return None, None, grad_u, grad_e


def flatten_features(ufeat: torch.Tensor, efeat: torch.Tensor | None):
    """(x [N, width], w [E, 1] / [E, width] or None, trailing shape) for features of any rank."""
    trailing = tuple(ufeat.shape[1:])
    width = 1
    for d in trailing:
        width *= d
    x = ufeat if ufeat.dim() == 2 else ufeat.reshape(ufeat.shape[0], width)  # -1 is ambiguous with 0 rows
    w = None
    if efeat is not None:  # [E, 1]: one weight per edge; [E, width]: one per edge and feature
        scalar = efeat.dim() == 1 or tuple(efeat.shape[1:]) == (1,)
        w = efeat.reshape(efeat.shape[0], 1 if scalar else width)
    return x, w, trailing


def run_aggregation(views, op: str, reduce: str, ufeat: torch.Tensor, efeat: torch.Tensor | None, norm: str,
                    group_size: int | None, deterministic: bool | None,
                    plan: AggregationPlan | None, keep_acc: bool = False) -> torch.Tensor:
    """The op on checked arguments (sum/mean): path choice, stats, scales, autograd."""
    agg, x, w, trailing = make_aggregation(views, op, reduce, ufeat, efeat, norm, group_size, deterministic)
    agg.keep_acc = keep_acc
    backend.record(f"{op}_{reduce}", agg.path, ufeat.device)
    out = GSpMMFunction.apply(agg, FULL_GRAPH if plan is None else plan, x, w)
    return out if ufeat.dim() == 2 else out.reshape((out.shape[0],) + trailing)


def make_aggregation(views, op: str, reduce: str, ufeat: torch.Tensor, efeat: torch.Tensor | None, norm: str,
                     group_size: int | None, deterministic: bool | None):
    """(the call as an :class:`~.plan.Aggregation`: path, scales; x [N, width]; w; trailing shape)."""
    path = backend.choose_path(ufeat) if efeat is None else backend.choose_path(ufeat, efeat)
    x, w, trailing = flatten_features(ufeat, efeat)
    if deterministic is None:
        deterministic = torch.are_deterministic_algorithms_enabled()
    src_scale, dst_scale = views.scales(norm, reduce, ufeat.dtype)  # full-graph degrees, always
    agg = Aggregation(views, path, group_size, bool(deterministic), src_scale, dst_scale,
                      f"{norm}.{reduce}.{acc_dtype(ufeat.dtype)}", op, reduce)
    return agg, x, w, trailing


def aggregate(views, op: str, reduce: str, ufeat: torch.Tensor, efeat: torch.Tensor | None = None, *,
              norm: str = "none", group_size: int | None = None, deterministic: bool | None = None,
              plan: AggregationPlan | None = None, keep_acc: bool = False) -> torch.Tensor:
    """Aggregate messages into destination nodes of ``views`` (a :class:`~.views.GraphViews`, e.g.
    :class:`~.views.TensorGraph`); differentiable in ``ufeat`` and ``efeat``.

    ``op``: ``copy_u`` (x[u]) or ``u_mul_e`` (x[u] * w[e]); ``reduce``: ``sum`` or ``mean``;
    ``norm``: GCN normalisation (``both``, ``left``, ``right``) as ``dgl.nn.GraphConv`` defines it.
    ``keep_acc``: the result in the accumulation dtype (bf16 features: fp32 sums, not rounded to
    bf16), for a caller that widens it next (PyG's fp32 bias under autocast).

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)
    >>> aggregate(g, "copy_u", "sum", torch.tensor([[1.0], [2.0], [4.0]])).flatten().tolist()
    [0.0, 5.0, 2.0]
    """
    if getattr(views, "traced", False):  # a graph as tensors (core.library): the custom op, for torch.compile
        return views.aggregate(op, reduce, ufeat, efeat, keep_acc)
    check_options(op, reduce, norm, group_size)
    if reduce in ("max", "min"):
        raise ValueError(f"expected reduce 'sum' or 'mean' in the core (got {reduce!r}). Fix: call "
                         f"dgl_accel.functional.gspmm on a DGL graph, which hands max/min to DGL.")
    check_features(op, ufeat, efeat, views.num_src, views.num_edges, views.device)
    return run_aggregation(views, op, reduce, ufeat, efeat, norm, group_size, deterministic, plan, keep_acc)
