"""``gsddmm`` of the core: its autograd Function and the DGL-free entry :func:`gsddmm`.

Backward is DGL's (``dgl/backend/pytorch/sparse.py``, ``GSDDMM``) in per-edge form: the gradient of
each operand per edge is itself an SDDMM of the output gradient (target ``e``) with the other
operand (``mul``/``dot``: grad * other; ``div``: grad / rhs and -grad * out / rhs, ``out``
recomputed), summed over the broadcast dimensions back to the operand's feature shape, then onto
the operand's rows: a segment sum over the out-CSR (target ``u``) or the in-CSR (``v``), nothing
for ``e``.  On the Triton path both steps run kernels (``kernels/sddmm.py``); on the native path
compiled loops or torch ops (``native.py``).  Under ``create_graph=True`` the backward runs the
native torch ops, which autograd records, so higher derivatives work on both paths.

Naming chain: ``_sddmm_kernel`` / ``_sddmm_dot_kernel`` / ``_segment_sum_kernel`` (kernels/sddmm.py)
-> :func:`~.launchers.sddmm_forward` / ``segment_sum`` and :func:`~.native.native_sddmm` /
``native_scatter`` -> :class:`GSDDMMFunction` -> :func:`gsddmm`.
"""
from __future__ import annotations

import torch

from .. import backend
from ..aggregation.scales import acc_dtype
from .checks import broadcast_feat_shape, check_gsddmm, uses
from .launchers import sddmm_forward, segment_sum
from .native import compiled_operand_grad, native_scatter, native_sddmm


def _run(path: str, views, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> torch.Tensor:
    """The per-edge op on normalised operands (one rank) on ``path``."""
    if path == "native":
        return native_sddmm(views, op, lhs, rhs, lhs_target, rhs_target)
    feat_shape = broadcast_feat_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    return sddmm_forward(views, op, lhs, rhs, lhs_target, rhs_target, feat_shape)


def reduce_broadcast(grad: torch.Tensor, shape: tuple) -> torch.Tensor:
    """Sum ``grad`` [rows, *] over the feature dims where ``shape`` (same rank) has size 1."""
    dims = [i for i in range(1, grad.dim()) if shape[i] == 1 and grad.shape[i] != 1]
    if not dims:
        return grad
    return grad.sum(dims, keepdim=True, dtype=acc_dtype(grad.dtype)).to(grad.dtype)


def _to_rows(path: str, views, per_edge: torch.Tensor, shape: tuple, target: str) -> torch.Tensor:
    per_edge = reduce_broadcast(per_edge, shape)
    if target == "e":
        return per_edge
    if path == "native":
        return native_scatter(views, per_edge, target)
    return segment_sum(views, per_edge, target)


class GSDDMMFunction(torch.autograd.Function):
    """``op`` per edge of the normalised operands ``lhs``/``rhs`` (None where unused) on ``path``."""

    @staticmethod
    def forward(ctx, views, op: str, lhs_target: str, rhs_target: str, path: str, feat_shape: tuple, lhs, rhs):
        if path == "triton":
            out = sddmm_forward(views, op, lhs, rhs, lhs_target, rhs_target, feat_shape)
        else:
            out = native_sddmm(views, op, lhs, rhs, lhs_target, rhs_target)
        ctx.views, ctx.op, ctx.targets, ctx.path = views, op, (lhs_target, rhs_target), path
        need_l, need_r = ctx.needs_input_grad[6], ctx.needs_input_grad[7]
        binary = op in ("mul", "dot", "div")
        keep_l = binary and need_r  # grad_rhs reads lhs (div: through out = lhs / rhs)
        keep_r = binary and (need_l or op == "div" and need_r)
        ctx.shapes = tuple(None if t is None else tuple(t.shape) for t in (lhs, rhs))
        ctx.save_for_backward(lhs if keep_l else None, rhs if keep_r else None)
        return out

    @staticmethod
    def backward(ctx, grad):
        lhs, rhs = ctx.saved_tensors
        views, op, path = ctx.views, ctx.op, ctx.path
        lt, rt = ctx.targets
        backend.record(f"gsddmm_{op}_backward", path, grad.device)
        if torch.is_grad_enabled():  # create_graph=True: torch ops, which autograd records
            path = "native"
        need_l, need_r = ctx.needs_input_grad[6], ctx.needs_input_grad[7]
        use_l, use_r = uses(op)
        grad_l = grad_r = None
        if path == "native" and not torch.is_grad_enabled():
            grad = grad.contiguous()  # once for both operands (a loss's sum hands an expanded one)
        if need_l and use_l and path == "native":  # the compiled loop: no per-edge tensor
            grad_l = compiled_operand_grad(views, op, 0, grad, lhs, rhs, ctx.targets, ctx.shapes)
        if need_l and use_l and grad_l is None:
            if op in ("add", "sub", "copy_lhs"):
                per_edge = grad
            else:  # mul, dot: grad * rhs; div: grad / rhs
                per_edge = _run(path, views, "div" if op == "div" else "mul", grad.to(rhs.dtype), rhs, "e", rt)
            grad_l = _to_rows(path, views, per_edge, ctx.shapes[0], lt)
        if need_r and use_r and path == "native":
            grad_r = compiled_operand_grad(views, op, 1, grad, lhs, rhs, ctx.targets, ctx.shapes)
        if need_r and use_r and grad_r is None:
            if op in ("add", "copy_rhs"):
                per_edge = grad
            elif op == "sub":
                per_edge = -grad
            elif op == "div":  # d(x / y)/dy = -(x / y) / y
                out = _run(path, views, "div", lhs, rhs, lt, rt)
                acc = acc_dtype(out.dtype)
                per_edge = _run(path, views, "div", (grad.to(acc) * out.to(acc)).neg().to(out.dtype), rhs, "e", rt)
            else:
                per_edge = _run(path, views, "mul", grad.to(lhs.dtype), lhs, "e", lt)
            grad_r = _to_rows(path, views, per_edge, ctx.shapes[1], rt)
        return None, None, None, None, None, None, grad_l, grad_r


def gsddmm(views, op: str, lhs, rhs, lhs_target: str = "u", rhs_target: str = "v") -> torch.Tensor:
    """DGL's ``gsddmm`` on a :class:`~dgl_accel.core.aggregation.views.GraphViews`: for every edge
    (edge-id order) ``op(lhs[row], rhs[row])`` with ``row`` its source (target ``u``), destination
    (``v``) or the edge (``e``).  ``op``: add, sub, mul, div, dot (sums the last dim, keeping it as
    size 1), copy_lhs, copy_rhs (the other operand may be None).  DGL's broadcasting and shape rules
    (see ``checks.py``): the result has DGL's shape and the operands' dtype (fp16/bf16 computed in
    fp32).  Differentiable in both operands.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)
    >>> gsddmm(g, "add", torch.tensor([1.0, 2.0, 4.0]), torch.tensor([10.0, 20.0, 40.0])).tolist()
    [21.0, 42.0, 24.0]
    >>> gsddmm(g, "dot", torch.ones(3, 2, 4), torch.ones(3, 2, 4)).shape  # [E, H, 1]
    torch.Size([3, 2, 1])
    """
    operands = check_gsddmm(views, op, lhs, rhs, lhs_target, rhs_target)
    if getattr(views, "traced", False):  # a graph as tensors (core.library): the custom op, for torch.compile
        out = views.gsddmm(op, operands.lhs, operands.rhs, lhs_target, rhs_target)
        return out.squeeze(-1) if operands.squeeze else out
    tensors = [t for t in (operands.lhs, operands.rhs) if t is not None]
    path = backend.choose_path(*tensors)
    backend.record(f"gsddmm_{op}", path, tensors[0].device)
    out = GSDDMMFunction.apply(views, op, lhs_target, rhs_target, path, operands.feat_shape,
                               operands.lhs, operands.rhs)
    return out.squeeze(-1) if operands.squeeze else out
