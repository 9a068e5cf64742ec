"""The head-wise aggregation's autograd Function and its DGL-free entry :func:`aggregate_headwise`.

Backward (recomputes, stores only the inputs): the gradient w.r.t. the node features is the same op
on the reverse CSR view with the output gradient as features and the same weights (``out`` CSR
for the forward's ``in``); the gradient w.r.t. the weights is ``grad_w[e, k]`` = the dot of the
output gradient's row and the features' row over head k's positions, a ``gsddmm`` dot
(``core.sddmm``: its kernel on the Triton path, its compiled loop or torch ops on the native
one), summed over the feature groups.  ``copy_e``: ``grad_x[e] = grad_out[dst(e)]``, a gather.
Both steps are autograd Functions or torch ops themselves, so ``create_graph=True`` works.
``mean`` is the sum times 1/in-degree (degrees clamped at 1, as DGL; rows without in-edges get 0).
"""
from __future__ import annotations

import math

import torch

from .. import backend
from ..aggregation.checks import check_float_rows, describe
from ..aggregation.scales import acc_dtype
from ..aggregation.views import GraphViews
from ..sddmm.function import GSDDMMFunction
from .paths import run_rows
from .shapes import head_split

__all__ = ["HEADWISE_OPS", "HEADWISE_REDUCES", "HeadwiseFunction", "check_headwise", "aggregate_headwise"]

HEADWISE_OPS = ("u_mul_e", "copy_e")
HEADWISE_REDUCES = ("sum", "mean")
_REVERSE = {"in": "out", "out": "in"}
_SOURCE, _EDGE = "source node", "edge, in edge-id order"  # what a feature row is, in errors


def check_headwise(views, op: str, reduce: str, ufeat, efeat):
    """Every argument of :func:`aggregate_headwise`, before any kernel runs; the head split of
    ``u_mul_e`` (None for ``copy_e``)."""
    if not isinstance(views, GraphViews):
        raise ValueError(f"expected views to be a dgl_accel.core.aggregation.views.GraphViews (got {describe(views)}). "
                         f"Fix: TensorGraph(src, dst, num_nodes) or, on a DGL graph, "
                         f"dgl_accel.functional.gspmm_headwise.")
    if op not in HEADWISE_OPS:
        raise ValueError(f"expected op 'u_mul_e' or 'copy_e' (got {op!r}). Fix: copy_u runs on "
                         f"dgl_accel.core.aggregation; DGL's mul is u_mul_e (div: mul by 1 / w), copy_rhs is copy_e.")
    if reduce not in HEADWISE_REDUCES:
        raise ValueError(f"expected reduce 'sum' or 'mean' (got {reduce!r}). "
                         f"Fix: max and min run on dgl_accel.core.extrema.")
    check_float_rows("efeat", efeat, views.num_edges, _EDGE, views.device)
    if op == "copy_e":
        if ufeat is not None:
            raise ValueError(f"expected ufeat=None for op='copy_e' (got {describe(ufeat)}). "
                             f"Fix: pass the edge features as efeat.")
        return None
    check_float_rows("ufeat", ufeat, views.num_src, _SOURCE, views.device)
    if efeat.dtype != ufeat.dtype:
        raise ValueError(f"expected efeat of ufeat's dtype {ufeat.dtype} (got {efeat.dtype}). "
                         f"Fix: efeat.to(ufeat.dtype).")
    split = head_split(tuple(ufeat.shape[1:]), tuple(efeat.shape[1:]))
    if split is None:
        raise ValueError(f"expected edge weights whose shape broadcasts against the node features' without "
                         f"enlarging them, their non-1 dims one block (got ufeat {list(ufeat.shape)}, efeat "
                         f"{list(efeat.shape)}). Fix: [E, H, 1] weights for [N, H, D] features, [E, 1] for one "
                         f"weight per edge; DGL's gspmm runs the other broadcasts.")
    return split


def _weight_grad(views, direction: str, path: str, x: torch.Tensor, grad: torch.Tensor, heads: int,
                 head_len: int) -> torch.Tensor:
    """grad_w[e, k] = sum over groups and head k's positions of grad[row(e)] * x[col(e)] (a gsddmm
    dot over the head's positions), [E, K] in x's dtype."""
    num_edges = views.num_edges
    if x.shape[1] == 0 or num_edges == 0:
        return x.new_zeros((num_edges, heads))
    lk = x.shape[1] // head_len
    targets = ("u", "v") if direction == "in" else ("v", "u")  # x is read at the column, grad at the row
    dots = GSDDMMFunction.apply(views, "dot", *targets, path, (lk, 1), x.reshape(x.shape[0], lk, head_len),
                                grad.to(x.dtype).reshape(grad.shape[0], lk, head_len))
    dots = dots.reshape(num_edges, lk // heads, heads)
    if lk == heads:
        return dots.reshape(num_edges, heads)
    return dots.sum(1, dtype=acc_dtype(x.dtype)).to(x.dtype)


class HeadwiseFunction(torch.autograd.Function):
    """One pass over the ``direction`` CSR view of ``views`` on ``path``: out [rows, F] from ``x``
    [N, F] (edge features for copy_e) and ``w`` [E, K] or None; differentiable in ``x`` and ``w``."""

    @staticmethod
    def forward(ctx, views, direction: str, op: str, name: str, path: str, head_len: int, x, w):
        out = run_rows(path, views.csr(direction), op, x, w, head_len)
        ctx.views, ctx.direction, ctx.op, ctx.name, ctx.path, ctx.head_len = views, direction, op, name, path, head_len
        need_w = ctx.needs_input_grad[7]
        ctx.save_for_backward(x if need_w else None, w)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        views, direction, path = ctx.views, ctx.direction, ctx.path
        backend.record(f"{ctx.name}_backward", path, grad.device)
        need_x, need_w = ctx.needs_input_grad[6], ctx.needs_input_grad[7]
        grad_x = grad_w = None
        grad = grad.contiguous()
        if need_x and ctx.op == "copy_e":
            src, dst = views.edges_by_id()
            grad_x = grad.index_select(0, (dst if direction == "in" else src).long())
        elif need_x:
            grad_x = HeadwiseFunction.apply(views, _REVERSE[direction], "u_mul_e", ctx.name, path, ctx.head_len,
                                            grad, w)
        if need_w:
            grad_w = _weight_grad(views, direction, path, x, grad, w.shape[1], ctx.head_len)
        return None, None, None, None, None, None, grad_x, grad_w


def aggregate_headwise(views: GraphViews, op: str, reduce: str, ufeat: torch.Tensor | None,
                       efeat: torch.Tensor) -> torch.Tensor:
    """Sum (``reduce="sum"``) or mean over each destination's in-edges of ``ufeat[u] * efeat[e]``
    (``op="u_mul_e"``, edge weights broadcast DGL's way: ``[E, H, 1]`` on ``[N, H, D]``, ``[E, H]`` on
    ``[N, D, H]``...) or of ``efeat[e]`` (``op="copy_e"``, ``ufeat=None``); differentiable in both.
    Returns [num_dst, *feature shape] (u_mul_e: the node features' shape after DGL's padding) in the
    input dtype; rows without in-edges hold 0.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 1, 2]), num_nodes=3)
    >>> x = torch.arange(12.0).reshape(3, 2, 2)            # [N, H=2, D=2]
    >>> w = torch.tensor([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])[:, :, None]  # [E, H, 1]
    >>> aggregate_headwise(g, "u_mul_e", "sum", x, w)[1].tolist()
    [[4.0, 6.0], [6.0, 7.0]]
    >>> aggregate_headwise(g, "copy_e", "mean", None, torch.tensor([[1.0], [3.0], [5.0]])).flatten().tolist()
    [0.0, 2.0, 5.0]
    """
    split = check_headwise(views, op, reduce, ufeat, efeat)
    if op == "copy_e":
        feat = tuple(efeat.shape[1:])
        x, w, head_len = efeat.reshape(views.num_edges, math.prod(feat)), None, 1
    else:
        feat = split.feat_shape
        x = ufeat.reshape(views.num_src, math.prod(feat))
        w, head_len = efeat.reshape(views.num_edges, split.heads), split.head_len
    path = backend.choose_path(*(t for t in (x, w) if t is not None))
    backend.record(f"{op}_{reduce}", path, x.device)
    out = HeadwiseFunction.apply(views, "in", op, f"{op}_{reduce}", path, head_len, x, w)
    if reduce == "mean":
        inv = views.scales("none", "mean", x.dtype)[1]  # 1 / max(in-degree, 1), cached per graph
        out = (out.to(inv.dtype) * inv[:, None]).to(x.dtype)
    return out.reshape((views.num_dst,) + feat)
