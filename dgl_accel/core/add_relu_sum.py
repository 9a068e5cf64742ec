"""The rectified edge-sum ``out[v] = sum over in-edges e = (u -> v) of relu(x[u] + w[e])``: GINE's
neighbour aggregation (PyG's ``GINEConv`` message ``(x_j + edge_attr).relu()`` summed into the
targets), differentiable in ``x`` and ``w``.

The composed torch ops (:func:`add_relu_sum_reference`: gather the sources, add, relu, ``index_add_``
into the targets) make four [E, F] tensors forward and as many backward.  On the CPU with the
compiled loops (numba; graphs of at least ``jit.runtime.MIN_WORK`` edges) :class:`AddReluSum` runs
one pass forward and one backward (the relu's mask recomputed from ``x`` and ``w``, each source's
gradient summed over its out-edges, each edge's gradient written where ``w`` needs one): no [E, F]
tensor but ``w``'s own gradient.  On one thread the passes go over the edges in id order
(:func:`~.jit.add_relu_sum.add_relu_sum_edges`, ``..._grad_edges``), as PyG's ``index_add_``;
on several, over the in-CSR forward and the out-CSR backward, rows in parallel
(:func:`~.jit.add_relu_sum.add_relu_sum_rows`, ``..._grad_rows``).  float32, float64 and bf16 (read
as bits); the messages and sums in fp32 (fp64 if an operand is fp64), the result in the operands'
promoted dtype, rounded once (bf16 + bf16: within half an ulp of the exact sum, where the composed
ops round each message and each partial sum).  Other dtypes and devices, and a backward that is
itself recorded (``create_graph=True``), run the composed ops.

With ``weight`` (and ``bias``) the edge features first pass through that linear layer,
``F.linear(w, weight, bias)`` (GINE's ``lin``).  Where no gradient is asked for (inference), the
loops run and the product is fp32/fp64 (not autocast's bf16), it is formed per edge inside the pass
(:func:`~.jit.add_relu_sum.add_relu_sum_projected_rows`, in fp32 or fp64) and never stored: on a
20k-node, 200k-edge graph with 16 edge features and F = 128, the [E, F] product alone took 204 ms of
the layer's 375; otherwise ``F.linear`` runs first (autocast's product) and then the op above.

On a :class:`~.library.TracedGraph` (under ``torch.compile``) the call goes to the custom op
``torch.ops.dgl_accel.add_relu_sum`` (:mod:`.library.edges`; ``F.linear`` traced before it), whose
backward is :func:`add_relu_sum_grads`; in inference with a product in fp32/fp64 the op
``add_relu_sum_projected`` takes ``weight`` and ``bias`` and runs this function (the projected
pass where it runs eagerly).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import backend
from .aggregation.checks import describe
from .aggregation.views import GraphViews
from .jit import add_relu_sum as loops
from .jit import runtime as jit_runtime

__all__ = ["add_relu_sum", "add_relu_sum_grads", "add_relu_sum_reference", "check_add_relu_sum", "AddReluSum"]

LOOP_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def add_relu_sum_reference(views: GraphViews, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The composed ops, as PyG's ``GINEConv`` runs them: ``relu(x[src] + w)`` per edge, summed into
    the destinations with ``index_add_`` (in the promoted dtype of ``x`` and ``w``)."""
    src, dst = views.edges_by_id()
    msg = (x.index_select(0, src.long()) + w).relu()
    out = torch.zeros((views.num_dst, msg.shape[1]), dtype=msg.dtype, device=msg.device)
    return out.index_add_(0, dst.long(), msg)


def _array(t: torch.Tensor):
    """A contiguous CPU tensor as the loops read it: bf16 as its bits, else its numpy view."""
    t = t.detach().contiguous()
    return jit_runtime.bf16_bits(t) if t.dtype == torch.bfloat16 else t.numpy()


def _np(t: torch.Tensor):
    return t.numpy() if t.dtype == torch.int64 else t.long().numpy()


def _acc_dtype(*dtypes) -> torch.dtype:
    return torch.float64 if torch.float64 in dtypes else torch.float32


class AddReluSum(torch.autograd.Function):
    """:func:`add_relu_sum` on the compiled loops (CPU tensors of :data:`LOOP_DTYPES`): on one
    thread in edge-id order, else per CSR row in parallel."""

    @staticmethod
    def forward(ctx, views: GraphViews, x: torch.Tensor, w: torch.Tensor):
        dtype = torch.promote_types(x.dtype, w.dtype)
        # on one thread in edge-id order: w and its gradient read and written in their own order (the CSR
        # passes reach them by edge id, at random where the edge list is not sorted by target: 2-3x slower
        # at 200k edges, F = 128)
        if jit_runtime.one_thread():
            src, dst = views.edges_by_id()
            out = torch.zeros((views.num_dst, x.shape[1]), dtype=_acc_dtype(x.dtype, w.dtype))
            loops.add_relu_sum_edges(_np(src), _np(dst), _array(x), _array(w), out.numpy())
            out = out.to(dtype)
        else:
            rows = views.csr("in")
            out = torch.empty((views.num_dst, x.shape[1]), dtype=dtype)
            loops.add_relu_sum_rows(_np(rows.indptr), _np(rows.indices), _np(rows.eids), _array(x), _array(w),
                              _array(out))
        ctx.views = views
        ctx.save_for_backward(x, w)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        backend.record("add_relu_sum_backward", "native", grad.device)
        if torch.is_grad_enabled():  # create_graph=True: the composed ops' gradient, which autograd records
            return (None,) + _recorded_grads(ctx.views, x, w, grad, need_x, need_w)
        return (None,) + _loop_grads(ctx.views, x, w, grad, need_x, need_w)


def add_relu_sum_grads(views: GraphViews, x: torch.Tensor, w: torch.Tensor, grad: torch.Tensor, need_x: bool,
                       need_w: bool):
    """(grad_x, grad_w) of :func:`add_relu_sum` given the output's gradient (None where not needed,
    as the custom op's backward asks): the compiled loops' one pass where the forward runs them,
    else (and where the backward is itself recorded, ``create_graph=True``) the composed ops'."""
    if torch.is_grad_enabled() or not _runs_loops(views, x, w):
        return _recorded_grads(views, x, w, grad, need_x, need_w)
    backend.record("add_relu_sum_backward", "native", grad.device)
    return _loop_grads(views, x, w, grad, need_x, need_w)


def _runs_loops(views, x, w) -> bool:
    """Whether :func:`add_relu_sum` runs the compiled loops (:class:`AddReluSum`) on these operands."""
    return (x.device.type == "cpu" and x.dtype in LOOP_DTYPES and w.dtype in LOOP_DTYPES
            and jit_runtime.worth(views.num_edges))


def _loop_grads(views, x, w, grad, need_x: bool, need_w: bool):
    """(grad_x, grad_w) in one compiled pass: in edge order on one thread, else per out-CSR row."""
    grad_w = torch.empty(w.shape if need_w else (0, w.shape[1]), dtype=w.dtype)
    if jit_runtime.one_thread():  # edge order, as the forward
        src, dst = views.edges_by_id()
        acc_x = torch.zeros(x.shape if need_x else (0, x.shape[1]), dtype=_acc_dtype(x.dtype, w.dtype, grad.dtype))
        loops.add_relu_sum_grad_edges(_np(src), _np(dst), _array(x), _array(w), _array(grad), acc_x.numpy(),
                                      _array(grad_w))
        grad_x = acc_x.to(x.dtype)
    else:
        cols = views.csr("out")
        grad_x = torch.empty(x.shape if need_x else (0, x.shape[1]), dtype=x.dtype)
        loops.add_relu_sum_grad_rows(_np(cols.indptr), _np(cols.indices), _np(cols.eids), _array(x), _array(w),
                                     _array(grad), _array(grad_x), _array(grad_w))
    return (grad_x if need_x else None), (grad_w if need_w else None)


def _recorded_grads(views, x, w, grad, need_x: bool, need_w: bool):
    """(grad_x, grad_w) in torch ops (differentiable in ``grad``): the relu's mask per edge, the
    masked destination gradient per edge, summed onto the sources."""
    src, dst = (t.long() for t in views.edges_by_id())
    mask = (x.detach().index_select(0, src) + w.detach()) > 0
    per_edge = grad.index_select(0, dst) * mask
    grad_x = torch.zeros(x.shape, dtype=per_edge.dtype, device=x.device).index_add(0, src, per_edge).to(x.dtype) \
        if need_x else None
    return grad_x, (per_edge.to(w.dtype) if need_w else None)


def check_add_relu_sum(views, x, w, width: int | None = None) -> None:
    """A clear ValueError for arguments :func:`add_relu_sum` cannot take (``width``: the features
    of x a projected ``w`` gives; None: ``w``'s own width)."""
    if not isinstance(views, GraphViews):
        raise ValueError(f"expected views to be a dgl_accel.core.aggregation.views.GraphViews (got "
                         f"{describe(views)}). Fix: TensorGraph(src, dst, num_nodes).")
    for name, t, rows, what in (("x", x, views.num_src, "source node"), ("w", w, views.num_edges, "edge")):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or not t.is_floating_point():
            raise ValueError(f"expected {name} as a 2-D float tensor (got {describe(t)}). "
                             f"Fix: one row per {what}, flattened to [rows, F].")
        if t.shape[0] != rows:
            raise ValueError(f"expected {name} with one row per {what} ({rows}; got {t.shape[0]}). "
                             f"Fix: pass {name} of this graph, in {'edge-id' if name == 'w' else 'node-id'} order.")
        if t.device != views.device:
            raise ValueError(f"expected {name} on the graph's device {views.device} (got {t.device}). "
                             f"Fix: {name}.to({str(views.device)!r}).")
    if (w.shape[1] if width is None else width) != x.shape[1]:
        got = w.shape[1] if width is None else f"{width} from weight"
        raise ValueError(f"expected w with x's {x.shape[1]} features (got {got}). "
                         f"Fix: project the edge features to the node features' width first.")


def add_relu_sum(views: GraphViews, x: torch.Tensor, w: torch.Tensor, weight: torch.Tensor | None = None,
                 bias: torch.Tensor | None = None) -> torch.Tensor:
    """``out[v] = sum over in-edges e = (u -> v) of relu(x[u] + w[e])`` for every destination of
    ``views``: ``x`` [num_src, F], ``w`` [num_edges, F] in edge-id order; out [num_dst, F] in the
    promoted dtype of ``x`` and ``w`` (0 where no edge comes in).  With ``weight`` [F, D] (and
    ``bias`` [F]): ``w`` [num_edges, D] edge features, the messages ``relu(x[u] + F.linear(w[e],
    weight, bias))``.  Differentiable in every tensor.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 1, 2]), num_nodes=3)
    >>> x, w = torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([[1.0], [-5.0], [0.5]])
    >>> add_relu_sum(g, x, w).flatten().tolist()  # node 1: relu(1 + 1) + relu(2 - 5)
    [0.0, 2.0, 3.5]
    """
    traced = getattr(views, "traced", False)  # a graph as tensors (core.library): the custom op, for torch.compile
    if weight is not None:
        check_projection(w, weight, bias)
        if traced and not _needs_grad(x, w, weight, bias) and _product_dtype(w, weight, bias) in FULL:
            return views.add_relu_sum(x, w, weight, bias)  # its real op decides as here, below
        if not traced and _fuses_projection(views, x, w, weight, bias):
            return _projected(views, x, w, weight, bias)
        w = F.linear(w, weight, bias)
    if traced:
        return views.add_relu_sum(x, w)
    check_add_relu_sum(views, x, w)
    backend.record("add_relu_sum", "native", x.device)
    if not _runs_loops(views, x, w):
        return add_relu_sum_reference(views, x, w)
    return AddReluSum.apply(views, x, w)


def check_projection(w, weight, bias) -> None:
    """A clear ValueError for a ``weight`` / ``bias`` :func:`add_relu_sum` cannot take."""
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not isinstance(w, torch.Tensor) \
            or w.dim() != 2 or weight.shape[1] != w.shape[1]:
        raise ValueError(f"expected weight [F, D] for edge features [E, D] (got weight {describe(weight)}, "
                         f"w {describe(w)}). Fix: pass the linear layer's weight, D its input width.")
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (weight.shape[0],)):
        raise ValueError(f"expected bias of shape [{weight.shape[0]}] (got {describe(bias)}). Fix: the linear "
                         f"layer's bias, or None.")


def _fuses_projection(views, x, w, weight, bias) -> bool:
    """Whether the projected pass runs: CPU loops, loop dtypes, a product in fp32/fp64 (under
    autocast the product runs in bf16 as autocast's, then the op: 170 ms against the pass's 255 at
    200k edges, 16 -> 128 features, one thread), no gradient asked for."""
    tensors = [t for t in (x, w, weight, bias) if t is not None]
    if _needs_grad(*tensors):
        return False
    return (x.device.type == "cpu" and all(t.device == x.device and t.dtype in LOOP_DTYPES for t in tensors)
            and _product_dtype(w, weight, bias) in FULL and jit_runtime.worth(views.num_edges))


FULL = (torch.float32, torch.float64)


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _product_dtype(w, weight, bias) -> torch.dtype:
    """``F.linear(w, weight, bias)``'s dtype (autocast's where it is on), without computing it."""
    return F.linear(w[:0], weight, bias).dtype


def _projected(views, x, w, weight, bias) -> torch.Tensor:
    """The projected pass: the output in the dtype the composed ops give (the product's, promoted
    with x's), summed in fp32 (fp64 if an operand is fp64) and rounded once."""
    check_add_relu_sum(views, x, w, width=weight.shape[0])
    backend.record("add_relu_sum_projected", "native", x.device)
    product = F.linear(w[:0], weight, bias)  # the product's dtype, without computing it
    out = torch.empty((views.num_dst, x.shape[1]), dtype=torch.promote_types(x.dtype, product.dtype))
    acc = torch.float64 if torch.float64 in (x.dtype, w.dtype, weight.dtype, out.dtype) else torch.float32
    b = torch.zeros(x.shape[1], dtype=acc) if bias is None else bias.detach().to(acc).contiguous()
    rows = views.csr("in")
    loops.add_relu_sum_projected_rows(_np(rows.indptr), _np(rows.indices), _np(rows.eids), _array(x), _array(w),
                                weight.detach().t().to(acc).contiguous().numpy(), b.numpy(), _array(out))
    return out
