"""The aggregation with the destination's own row: ``out[v] = (s x[v] + sum_{u->v} x[u]) / d[v] + b``.

What ``SAGEConv(aggregator="gcn")`` (``s = 1``, ``d`` = in-degree + 1, its bias) and ``GINConv``
with a sum (``s = 1 + eps``, no ``d``) compute around a plain copy_u sum, in DGL's order of
operations, so the numbers are DGL's: the neighbour sum, plus the scaled own row, divided, plus
the bias.  Composed from separate ops, that is four fresh ``[N, F]`` tensors forward and three
backward; each fresh tensor of a few MB arrives as new pages whose faults cost as much as the pass
over it (see :mod:`dgl_accel.core.scratch`).  Here, on the native CPU path, the sum's output takes
the rest in place, and the backward's divided gradient lives in a scratch buffer: one fresh tensor
each way.  Measured on Slashdot (82k nodes, 1.09M edges, F = 64, one thread): see docs/dropins.md.

bf16 features (autocast's) take the native path where the compiled loops read them as bits (the
core's own views; DGL's views keep the composed ops on DGL's kernel): the
sums, the own row, the division and the bias in fp32, rounded once to the dtype the composed ops
give (:func:`composed_dtype`), so within half a bf16 ulp of the exact result where the composed
ops round three times.  Other paths (CUDA, the Triton backend, fp16, bf16 without the compiled
loops) and a backward that is itself recorded (``create_graph=True``) run the composed ops on
:func:`~.function.aggregate`: the same results up to that rounding, differentiable to any order.
"""
from __future__ import annotations

import torch

from .. import backend, scratch
from .function import aggregate, run_aggregation
from .plan import TRANSPOSED
from .views import GraphViews

__all__ = ["copy_u_sum_self", "check_copy_u_sum_self", "copy_u_sum_self_reference"]

NATIVE_DTYPES = (torch.float32, torch.float64)
Scale = float | torch.Tensor  # the own row's factor: a number, or a tensor that may train (GIN's learned eps)


def copy_u_sum_self_reference(num_dst: int, neighbour_sum, x: torch.Tensor, self_scale: Scale = 1.0,
                              divisor: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """The composed ops in DGL's order, ``neighbour_sum(x)`` giving the copy_u sum: the reference
    of the fused path and its fallback."""
    rst = neighbour_sum(x) + _scaled(x[:num_dst], self_scale)
    if divisor is not None:
        rst = rst / divisor.unsqueeze(-1)
    return rst if bias is None else rst + bias


def _scaled(own: torch.Tensor, scale: Scale) -> torch.Tensor:
    """s * own, as DGL's expression computes it (own itself for the float 1, exactly)."""
    return own if isinstance(scale, float) and scale == 1.0 else scale * own


def composed_dtype(x: torch.Tensor, scale: Scale, bias: torch.Tensor | None) -> torch.dtype:
    """The dtype the composed ops give: torch's promotion of the sum (x's dtype), the scaled own row
    (a one-element tensor s of shape [1] promotes it) and the bias."""
    dtype = x.dtype
    if isinstance(scale, torch.Tensor):
        dtype = torch.promote_types(dtype, torch.result_type(scale, torch.empty((1, 1), dtype=x.dtype)))
    return dtype if bias is None else torch.promote_types(dtype, bias.dtype)


class _CopyUSumSelf(torch.autograd.Function):
    @staticmethod
    def forward(ctx, views, x, scale: Scale, divisor, bias, into=None):
        learned = isinstance(scale, torch.Tensor)
        ctx.views, ctx.has_bias, ctx.float_scale = views, bias is not None, None if learned else scale
        ctx.save_for_backward(divisor, x if learned else None, scale if learned else None)
        # fresh [num_dst, F] (bf16 x: fp32 sums), or the caller's scratch buffer ``into``
        out = views.native_spmm("in", x, None) if into is None else views.native_spmm("in", x, None, out=into)
        s = float(scale) if learned else scale
        if x.dtype == out.dtype:
            out.add_(_scaled(x[: views.num_dst], s))
        else:  # bf16: the own row joins the fp32 sums, one rounding at the end
            out.add_(x[: views.num_dst], alpha=s)
        if divisor is not None:
            out.div_(divisor.unsqueeze(-1))
        if bias is not None:
            out.add_(bias)
        return out.to(composed_dtype(x, scale, bias))

    @staticmethod
    def backward(ctx, grad):
        divisor, x, scale_t = ctx.saved_tensors
        views, nd = ctx.views, ctx.views.num_dst
        scale = scale_t if ctx.float_scale is None else ctx.float_scale
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[4] else None
        recorded = torch.is_grad_enabled()  # create_graph=True: composed, recorded ops
        if recorded:
            gd = grad if divisor is None else grad / divisor.unsqueeze(-1)
        else:  # divided once, into a buffer that never leaves this call
            gd = grad.contiguous()
            if divisor is not None:
                buf = scratch.tensor("copy_u_sum_self.grad", gd.shape, gd.dtype)
                gd = torch.div(gd, divisor.unsqueeze(-1), out=buf)
        # the gradient of s * own (autograd's product rule: the sum of grad * own to s's shape)
        grad_scale = (gd * x[:nd]).sum_to_size(scale_t.shape) if ctx.needs_input_grad[2] else None
        grad_x = None
        if ctx.needs_input_grad[1] and recorded:
            grad_x = run_aggregation(views, "copy_u", "sum", gd, None, "none", None, None, TRANSPOSED)
            grad_x = torch.cat([grad_x[:nd] + _scaled(gd, scale), grad_x[nd:]])
        elif ctx.needs_input_grad[1]:
            grad_x = views.native_spmm("out", gd, None)  # fresh [num_src, F] (bf16 gd: fp32 sums)
            s = float(scale) if ctx.float_scale is None else scale
            if grad_x.dtype == gd.dtype:
                grad_x[:nd].add_(_scaled(gd, s))
            else:
                grad_x[:nd].add_(gd, alpha=s)
        return None, grad_x, grad_scale, None, grad_bias, None


def copy_u_sum_self(views, x: torch.Tensor, *, self_scale: Scale = 1.0, divisor: torch.Tensor | None = None,
                    bias: torch.Tensor | None = None, into: str | None = None) -> torch.Tensor:
    """``(self_scale * x[v] + sum over in-edges u -> v of x[u]) / divisor[v] + bias`` for every
    destination ``v`` of ``views`` (a :class:`~.views.GraphViews` whose destinations are its first
    sources: a homogeneous graph or a block).  ``x``: [num_src, F]; ``self_scale``: a number or a
    one-element tensor (differentiable, e.g. GIN's ``1 + eps`` with a learned eps); ``divisor``:
    [num_dst] or None; ``bias``: [F] or None.  Differentiable in ``x``, a tensor ``self_scale`` and
    ``bias`` (``divisor`` is a constant).  ``into``: where no gradient is recorded, the name of a
    per-thread scratch buffer (:mod:`dgl_accel.core.scratch`) the compiled loops may write the
    result into instead of fresh pages; the caller reads it before its next call with that name
    and never hands it out.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)
    >>> x = torch.tensor([[1.0], [2.0], [3.0]])  # node 1: (1 + 3 + 2) / 3
    >>> copy_u_sum_self(g, x, divisor=torch.tensor([1.0, 3.0, 2.0])).flatten().tolist()
    [1.0, 2.0, 2.5]
    """
    check_copy_u_sum_self(views, x, divisor, bias, self_scale)
    if getattr(views, "traced", False):  # a graph as tensors (core.library): the custom op, for torch.compile
        return views.copy_u_sum_self(x, self_scale, divisor, bias)
    if divisor is not None:
        divisor = divisor.to(x.dtype)
    scale = self_scale if isinstance(self_scale, torch.Tensor) else float(self_scale)
    native = (x.device.type == "cpu" and backend.choose_path(x) == "native"
              and (x.dtype in NATIVE_DTYPES or _loops_read_bf16(views, x)))
    if not native:
        return copy_u_sum_self_reference(views.num_dst, lambda t: aggregate(views, "copy_u", "sum", t), x,
                                         scale, divisor, bias)
    backend.record("copy_u_sum_self", "native", x.device)
    buffer = None
    if (into is not None and not torch.is_grad_enabled() and x.dtype in (torch.float32, torch.float64)
            and composed_dtype(x, scale, bias) == x.dtype and type(views).native_spmm is GraphViews.native_spmm):
        buffer = scratch.tensor(into, (views.num_dst, x.shape[1]), x.dtype)
    return _CopyUSumSelf.apply(views, x.contiguous(), scale, divisor, bias, buffer)


def _loops_read_bf16(views, x: torch.Tensor) -> bool:
    """bf16 features the compiled loops read as bits (fp32 sums): the core's own views.  Views
    with their own library's kernel (DGL's, which reads bf16 itself) keep the composed ops, which
    run that kernel: SAGEConv gcn under autocast on Amazon-CS, 10.8 ms a step composed on DGL's
    kernel against 12.5 ms fused on the loops."""
    return (x.dtype == torch.bfloat16 and type(views).native_spmm is GraphViews.native_spmm
            and views.native_accepts(x.dtype, False))


def check_copy_u_sum_self(views, x, divisor, bias, self_scale: Scale = 1.0) -> None:
    """A clear ValueError for arguments :func:`copy_u_sum_self` cannot take."""
    if isinstance(self_scale, torch.Tensor) and (self_scale.numel() != 1 or self_scale.dim() > 1):
        raise ValueError(f"expected self_scale as a number or a one-element tensor (got shape "
                         f"{list(self_scale.shape)}). Fix: pass e.g. 1 + eps with eps of shape [1].")
    if not isinstance(self_scale, (int, float, torch.Tensor)):
        raise ValueError(f"expected self_scale as a number or a one-element tensor (got "
                         f"{type(self_scale).__name__}).")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
        got = type(x).__name__ if not isinstance(x, torch.Tensor) else f"{x.dim()}-D {x.dtype}"
        raise ValueError(f"expected x as a 2-D float tensor [num_src, F] (got {got}). "
                         f"Fix: flatten the trailing dimensions first.")
    if x.shape[0] != views.num_src or views.num_dst > views.num_src:
        raise ValueError(f"expected a row of x per source ({views.num_src}), on a graph whose "
                         f"{views.num_dst} destinations are its first sources (got {x.shape[0]} rows). "
                         f"Fix: pass the source features of this graph or block.")
    if divisor is not None and tuple(divisor.shape) != (views.num_dst,):
        raise ValueError(f"expected divisor of shape [{views.num_dst}] (one per destination; got "
                         f"{list(divisor.shape)}). Fix: pass e.g. in-degrees + 1 as a 1-D tensor.")
    if bias is not None and tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"expected bias of shape [{x.shape[1]}] (got {list(bias.shape)}). "
                         f"Fix: pass one bias per feature column.")
    for name, t in (("divisor", divisor), ("bias", bias), ("self_scale", self_scale)):
        if isinstance(t, torch.Tensor) and t.device != x.device:
            raise ValueError(f"expected {name} on x's device {x.device} (got {t.device}). Fix: move it with .to().")
