"""The core's per-edge ops as torch custom ops, registered by :mod:`.library` (its graph arguments,
``GRAPH``, and :func:`~.library.resolve`; see its docstring): what GINEConv and EdgeConv call,
traced by ``torch.compile`` whole.

* ``add_relu_sum`` (:func:`~.add_relu_sum.add_relu_sum` on ``x`` and ``w`` already projected):
  ``add_relu_sum_backward`` is :func:`~.add_relu_sum.add_relu_sum_grads` (the compiled loops'
  one pass where the forward runs them, nothing of size E x F kept but ``w``);
* ``add_relu_sum_projected`` (inference only, no autograd: ``weight`` and ``bias`` of a linear
  layer on ``w``, fp32/fp64 products; the eager function, hence its per-edge projected pass);
* ``gsddmm`` (:func:`~.sddmm.function.gsddmm` on operands in DGL's normalised form, one rank, the
  result before its squeeze): ``gsddmm_backward`` runs the eager Function's backward
  (:class:`~.sddmm.function.GSDDMMFunction`) on a stand-in ctx, saving the operands only where
  it reads them (mul, dot, div), their shapes otherwise;
* ``aggregate_extrema_edges`` (max/min of ``u_add_e``, ``u_mul_e``, ``copy_e`` messages; copy_u is
  :mod:`.library`'s ``aggregate_extrema``): the argument positions as a second output, and
  ``aggregate_extrema_edges_backward`` scatters the gradient there (the eager backward);
* ``in_degrees`` (int64, for a drop-in's divisor or mask; not differentiable).

Every gradient comes in the dtype of its input (the ops require one dtype per call, as the eager
ones do); a double backward through them is not taken.
"""
from __future__ import annotations

import math

import torch

from .. import backend
from ..add_relu_sum import add_relu_sum, add_relu_sum_grads
from ..extrema import aggregate_extrema, extrema_backward, extrema_backward_compiled
from ..jit import runtime as jit_runtime
from ..sddmm.checks import broadcast_feat_shape, uses
from ..sddmm.function import GSDDMMFunction, gsddmm
from .graphs import GRAPH, Ctx, fresh, resolve

__all__ = ["register"]


# ------------------------------------------------------------------------------------ the real ops
def _add_relu_sum(ei, ns, nd, h, k, x, w):
    views, _ = resolve(ei, ns, nd, h, k)
    with torch.no_grad():
        return add_relu_sum(views, x, w).contiguous()


def _add_relu_sum_projected(ei, ns, nd, h, k, x, w, weight, bias):
    views, _ = resolve(ei, ns, nd, h, k)
    with torch.no_grad():
        return add_relu_sum(views, x, w, weight, bias).contiguous()


def _add_relu_sum_backward(ei, ns, nd, h, k, x, w, grad, need_x, need_w):
    views, _ = resolve(ei, ns, nd, h, k)
    with torch.no_grad():
        grads = add_relu_sum_grads(views, x, w, grad, need_x, need_w)
    return tuple(g.contiguous() if g is not None else t.new_empty((0, t.shape[1])) for t, g in zip((x, w), grads))


def _gsddmm(ei, ns, nd, h, k, op, lhs, rhs, lhs_target, rhs_target):
    views, _ = resolve(ei, ns, nd, h, k)
    with torch.no_grad():
        return gsddmm(views, op, lhs, rhs, lhs_target, rhs_target).contiguous()


def _gsddmm_backward(ei, ns, nd, h, k, op, lhs, rhs, lhs_target, rhs_target, lshape, rshape, need_l, need_r, grad):
    """(grad_lhs, grad_rhs), each empty where not needed: GSDDMMFunction's backward."""
    views, _ = resolve(ei, ns, nd, h, k)
    path = backend.choose_path(*(t for t in (lhs, rhs, grad) if t is not None))
    shapes = tuple(tuple(s) if s else None for s in (lshape, rshape))
    ctx = Ctx(views=views, op=op, targets=(lhs_target, rhs_target), path=path, shapes=shapes,
               needs_input_grad=(False,) * 6 + (need_l, need_r))
    ctx.save_for_backward(lhs, rhs)
    with torch.no_grad():
        grads = GSDDMMFunction.backward(ctx, grad)[6:]
    taken = {t.untyped_storage().data_ptr() for t in (lhs, rhs, grad) if t is not None}
    return tuple(fresh(g.reshape(s).contiguous(), taken) if need and g is not None else grad.new_zeros(
        tuple(s) if need else (0,)) for g, s, need in zip(grads, (lshape, rshape), (need_l, need_r)))


def _extrema_edges(ei, ns, nd, h, k, op, reduce, fill, want_arg, x, w):
    views, _ = resolve(ei, ns, nd, h, k)
    with torch.no_grad():
        out, arg = aggregate_extrema(views, op, reduce, x, w, fill=fill, return_arg=True) if want_arg else (
            aggregate_extrema(views, op, reduce, x, w, fill=fill), None)
    if arg is None:
        arg = torch.empty((0,) + tuple(out.shape[1:]), dtype=torch.int64, device=out.device)
    return out.contiguous(), arg.contiguous()


def _extrema_edges_backward(ei, ns, nd, h, k, op, arg, grad, x, w, x_shape, w_shape, need_x, need_w):
    """(grad_x, grad_w), each empty where not needed: the eager backward's scatter at ``arg`` on the
    operands flattened as the eager Function takes them (copy_e: the edge features first)."""
    views, _ = resolve(ei, ns, nd, h, k)
    rows = views.csr("in")
    copy_e = op == "copy_e"
    width = math.prod((w_shape if copy_e else x_shape)[1:])
    first = (w_shape[0] if copy_e else x_shape[0], width)
    second = None if copy_e else (w_shape[0], 1 if math.prod(w_shape[1:]) == 1 else width)
    keep = op == "u_mul_e"  # the other operand scales the gradient
    x2, w2 = (x.reshape(first), w.reshape(second)) if keep else (None, None)
    g, a = grad.reshape(rows.num_rows, width), arg.reshape(rows.num_rows, width)
    compiled = grad.device.type == "cpu" and jit_runtime.worth(rows.num_edges)
    run = extrema_backward_compiled if compiled else extrema_backward
    gx, gw = run(rows, op, a, x2, w2, g, first, second, *((need_w, False) if copy_e else (need_x, need_w)))
    if copy_e:
        gx, gw = None, gx
    return tuple(t.to(grad.dtype).reshape(s).contiguous() if need else grad.new_empty((0,))
                 for t, s, need in ((gx, x_shape, need_x), (gw, w_shape, need_w)))


def _in_degrees(ei, ns, nd, h, k):
    views, _ = resolve(ei, ns, nd, h, k)
    return views.in_degrees().to(torch.int64, copy=True)


# ------------------------------------------------------------------------------------ registration
def register(define) -> None:
    """Define the ops with :mod:`.library`'s ``define(name, schema, impl, fake)``."""
    relu_sum = define("add_relu_sum", f"({GRAPH}, Tensor x, Tensor w) -> Tensor", _add_relu_sum,
                      lambda ei, ns, nd, h, k, x, w: x.new_empty((nd, x.shape[1]),
                                                                  dtype=torch.promote_types(x.dtype, w.dtype)))
    relu_sum_grad = define(
        "add_relu_sum_backward", f"({GRAPH}, Tensor x, Tensor w, Tensor grad, bool need_x, bool need_w) -> "
        "(Tensor, Tensor)", _add_relu_sum_backward,
        lambda ei, ns, nd, h, k, x, w, grad, need_x, need_w: tuple(
            t.new_empty(t.shape if need else (0, t.shape[1])) for t, need in ((x, need_x), (w, need_w))))

    def relu_sum_setup(ctx, inputs, output):
        ctx.graph = inputs[:5]
        ctx.save_for_backward(inputs[5], inputs[6])

    def relu_sum_backward(ctx, grad):
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[5], ctx.needs_input_grad[6]
        grad_x, grad_w = relu_sum_grad(*ctx.graph, x, w, grad, need_x, need_w) if need_x or need_w else (None, None)
        return (None,) * 5 + ((grad_x if need_x else None), (grad_w if need_w else None))

    relu_sum.register_autograd(relu_sum_backward, setup_context=relu_sum_setup)

    define("add_relu_sum_projected", f"({GRAPH}, Tensor x, Tensor w, Tensor weight, Tensor? bias) -> Tensor",
           _add_relu_sum_projected, lambda ei, ns, nd, h, k, x, w, weight, bias: x.new_empty(
               (nd, weight.shape[0]), dtype=torch.promote_types(x.dtype, weight.dtype)))

    def gsddmm_fake(ei, ns, nd, h, k, op, lhs, rhs, lhs_target, rhs_target):
        use_l, use_r = uses(op)
        like = lhs if use_l else rhs
        feat = broadcast_feat_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:])) if use_l and use_r else \
            tuple(like.shape[1:])
        return like.new_empty((ei.shape[1],) + feat)

    sddmm = define("gsddmm", f"({GRAPH}, str op, Tensor? lhs, Tensor? rhs, str lhs_target, str rhs_target) -> Tensor",
                   _gsddmm, gsddmm_fake)
    sddmm_grad = define(
        "gsddmm_backward", f"({GRAPH}, str op, Tensor? lhs, Tensor? rhs, str lhs_target, str rhs_target, "
        "SymInt[] lshape, SymInt[] rshape, bool need_l, bool need_r, Tensor grad) -> (Tensor, Tensor)",
        _gsddmm_backward, lambda ei, ns, nd, h, k, op, lhs, rhs, lt, rt, lshape, rshape, need_l, need_r, grad: tuple(
            grad.new_empty(tuple(s) if need else (0,)) for s, need in ((lshape, need_l), (rshape, need_r))))

    def sddmm_setup(ctx, inputs, output):
        ctx.graph, ctx.op, ctx.targets = inputs[:5], inputs[5], inputs[8:10]
        lhs, rhs = inputs[6:8]
        ctx.shapes = [list(t.shape) if t is not None else [] for t in (lhs, rhs)]
        need_l, need_r = (t is not None and t.requires_grad for t in (lhs, rhs))
        binary = ctx.op in ("mul", "dot", "div")  # what the eager Function keeps
        keep_l, keep_r = binary and need_r, binary and (need_l or ctx.op == "div" and need_r)
        ctx.save_for_backward(lhs if keep_l else None, rhs if keep_r else None)

    def sddmm_backward(ctx, grad):
        lhs, rhs = ctx.saved_tensors
        need_l, need_r = ctx.needs_input_grad[6], ctx.needs_input_grad[7]
        grads = sddmm_grad(*ctx.graph, ctx.op, lhs, rhs, *ctx.targets, *ctx.shapes, need_l, need_r, grad) \
            if need_l or need_r else (None, None)
        return (None,) * 6 + tuple(g if need else None for g, need in zip(grads, (need_l, need_r))) + (None, None)

    sddmm.register_autograd(sddmm_backward, setup_context=sddmm_setup)

    def extrema_fake(ei, ns, nd, h, k, op, reduce, fill, want_arg, x, w):
        feat = tuple((w if op == "copy_e" else x).shape[1:])
        out = w.new_empty((nd,) + feat)
        return out, w.new_empty(((nd if want_arg else 0),) + feat, dtype=torch.int64)

    extrema = define("aggregate_extrema_edges", f"({GRAPH}, str op, str reduce, float fill, bool want_arg, Tensor? x, "
                     "Tensor w) -> (Tensor, Tensor)", _extrema_edges, extrema_fake)
    extrema_grad = define(
        "aggregate_extrema_edges_backward", f"({GRAPH}, str op, Tensor arg, Tensor grad, Tensor? x, Tensor? w, "
        "SymInt[] x_shape, SymInt[] w_shape, bool need_x, bool need_w) -> (Tensor, Tensor)", _extrema_edges_backward,
        lambda ei, ns, nd, h, k, op, arg, grad, x, w, x_shape, w_shape, need_x, need_w: tuple(
            grad.new_empty(tuple(s) if need else (0,)) for s, need in ((x_shape, need_x), (w_shape, need_w))))

    def extrema_setup(ctx, inputs, output):
        ctx.graph, ctx.op = inputs[:5], inputs[5]
        x, w = inputs[9:11]
        ctx.shapes = [list(t.shape) if t is not None else [] for t in (x, w)]
        keep = ctx.op == "u_mul_e"
        ctx.save_for_backward(output[1], x if keep else None, w if keep else None)

    def extrema_backward_(ctx, grad, _grad_arg):
        arg, x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[9], ctx.needs_input_grad[10]
        grads = extrema_grad(*ctx.graph, ctx.op, arg, grad, x, w, *ctx.shapes, need_x, need_w) \
            if need_x or need_w else (None, None)
        return (None,) * 9 + tuple(g if need else None for g, need in zip(grads, (need_x, need_w)))

    extrema.register_autograd(extrema_backward_, setup_context=extrema_setup)
    define("in_degrees", f"({GRAPH}) -> Tensor", _in_degrees,
           lambda ei, ns, nd, h, k: ei.new_empty((nd,), dtype=torch.int64))
