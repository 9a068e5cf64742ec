"""Max/min aggregation (gspmm's reduce ``max``/``min``) with DGL's arg-based backward, DGL-free.

``out[v, f]`` = the max (min) over v's in-edges e = (u -> v) of the message ``m_e[f]``:

* ``copy_u``  x[u, f]           * ``u_mul_e``  x[u, f] * w[e, f or 0]
* ``copy_e``  w[e, f]           * ``u_add_e``  x[u, f] + w[e, f or 0]

Messages are computed in fp32 (fp64 for fp64 inputs) and the result is stored in the input dtype.
Rows without in-edges hold ``fill`` (0, as DGL's ``update_all`` gives; DGL's ``gspmm`` itself leaves
-inf for max and +inf for min).  Ties go to the FIRST in-CSR position that carries the extremum, on
both paths.  The forward keeps ``arg`` [num_dst, F] (int64 in-CSR position, -1 for empty rows) and
nothing of size E x F (where no input needs a gradient and ``return_arg`` is off, the native paths
compute the values alone: GIN's max over input features, 1.05-1.09x DGL's step on Amazon-CS); the
backward reads the argument's source and edge from it and scatters ``grad_out`` there, as DGL's
GSpMM backward does (rows without in-edges pass no gradient on: DGL sends theirs to node/edge 0, its
default arg, which is no derivative of anything).

Naming chain: ``_extrema_fwd_kernel`` (kernels/extrema.py) -> :func:`extrema_forward` (launcher) and
the native path: :func:`extrema_compiled` (numba, one pass per row, ``core/jit/extrema.py``) where
numba is there and the graph has at least ``jit.runtime.MIN_WORK`` edges, else :func:`extrema_native`
(vectorised torch: scatter_reduce amax, then the first position that reaches it) ->
:class:`ExtremaFunction` (backward: :func:`extrema_backward`, torch ops on the saved arg) ->
:func:`aggregate_extrema`.  :func:`extrema_reference` is the pure-torch loop the tests compare with.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from . import backend
from .aggregation.checks import check_float_rows, describe
from .aggregation.scales import acc_dtype
from .aggregation.views import GraphViews
from .csr import Structure
from .jit import extrema as loops
from .jit import runtime as jit_runtime
from .launch import kernel_module, triton_kernel
from .sampling.arrays import np64

__all__ = ["EXTREMA_OPS", "EXTREMA_REDUCES", "aggregate_extrema", "check_extrema", "extrema_forward",
           "extrema_native", "extrema_compiled", "extrema_backward", "extrema_reference", "ExtremaFunction"]

EXTREMA_OPS = ("copy_u", "u_mul_e", "u_add_e", "copy_e")
EXTREMA_REDUCES = ("max", "min")
_KERNEL_OP = {"copy_u": "copy", "copy_e": "copy", "u_mul_e": "mul", "u_add_e": "add"}
_LOOP_OP = {"copy": 0, "mul": 1, "add": 2}  # the compiled loop's op codes


# ---------------------------------------------------------------------------------------------- checks
def check_extrema(views, op: str, reduce: str, ufeat, efeat, fill) -> None:
    """Every argument of :func:`aggregate_extrema`, before any kernel runs."""
    if not isinstance(views, GraphViews):
        raise ValueError(f"expected views to be a dgl_accel.core.aggregation.views.GraphViews (got {describe(views)}). "
                         f"Fix: TensorGraph(src, dst, num_nodes) or, on a DGL graph, dgl_accel.functional.gspmm.")
    if op not in EXTREMA_OPS:
        raise ValueError(f"expected op to be one of {', '.join(EXTREMA_OPS)} (got {op!r}). "
                         f"Fix: DGL's copy_lhs is copy_u, copy_rhs is copy_e, mul is u_mul_e, add is u_add_e.")
    if reduce not in EXTREMA_REDUCES:
        raise ValueError(f"expected reduce 'max' or 'min' (got {reduce!r}). "
                         f"Fix: sum and mean run on dgl_accel.core.aggregation.")
    if not isinstance(fill, numbers.Real) or isinstance(fill, bool):
        raise ValueError(f"expected fill to be a real number, the value of rows without in-edges "
                         f"(got {describe(fill)}). "
                         f"Fix: fill=0.0 as update_all gives, or float('-inf') for max as DGL's gspmm gives.")
    device = views.device
    if op == "copy_e":
        if ufeat is not None:
            raise ValueError(f"expected ufeat=None for op='copy_e' (got {describe(ufeat)}). "
                             f"Fix: pass the edge features as efeat.")
        check_float_rows("efeat", efeat, views.num_edges, "edge, in edge-id order", device)
        return
    check_float_rows("ufeat", ufeat, views.num_src, "source node", device)
    if op == "copy_u":
        if efeat is not None:
            raise ValueError(f"expected efeat=None for op='copy_u' (got {describe(efeat)}). "
                             f"Fix: op='u_mul_e' or 'u_add_e' with edge features.")
        return
    check_float_rows("efeat", efeat, views.num_edges, "edge, in edge-id order", device)
    if efeat.dtype != ufeat.dtype:
        raise ValueError(f"expected efeat of ufeat's dtype {ufeat.dtype} (got {efeat.dtype}). "
                         f"Fix: efeat.to(ufeat.dtype).")
    feat = tuple(ufeat.shape[1:])
    if math.prod(efeat.shape[1:]) != 1 and tuple(efeat.shape[1:]) != feat:
        raise ValueError(f"expected efeat of shape [E], [E, 1] or [E, {', '.join(map(str, feat))}] with "
                         f"E = {views.num_edges} (got {list(efeat.shape)}). Fix: one weight per edge, or one per "
                         f"feature of ufeat.")


# ---------------------------------------------------------------------------------------------- paths
def extrema_forward(rows: Structure, op: str, negate: bool, x: torch.Tensor, w: torch.Tensor | None,
                    fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``_extrema_fwd_kernel``: (out [R, F] in x's dtype, arg [R, F] int64).  ``x`` [N, F]
    (edge features for copy_e), ``w`` [E, 1] or [E, F] or None; ``negate`` computes min as -max(-m)."""
    x = x.contiguous()
    num_rows, num_feat = rows.num_rows, x.shape[1]
    out = torch.empty((num_rows, num_feat), dtype=x.dtype, device=x.device)
    arg = torch.empty((num_rows, num_feat), dtype=torch.int64, device=x.device)
    if num_rows and num_feat:
        mod = kernel_module("extrema")
        block_e, block_f = mod.feature_tile(num_feat)
        w = x if w is None else w.contiguous()  # copy ops never read w
        cols = rows.eids if op == "copy_e" else rows.indices
        kernel = triton_kernel("extrema", "_extrema_fwd_kernel", x.device)
        kernel[(num_rows, -(-num_feat // block_f))](
            rows.indptr, cols, rows.eids, x, w, out, arg, num_feat, w.shape[1], int(negate), float(fill),
            OP=mod.OPS[_KERNEL_OP[op]], BLOCK_E=block_e, BLOCK_F=block_f, num_warps=mod.NUM_WARPS)
    return out, arg


def _entry_rows(rows: Structure) -> torch.Tensor:
    degrees = rows.indptr[1:] - rows.indptr[:-1]
    return torch.repeat_interleave(torch.arange(rows.num_rows, device=rows.indptr.device), degrees)


def _messages(rows: Structure, op: str, x: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
    """Every entry's message [E, F] in CSR order, in the accumulation dtype."""
    acc = acc_dtype(x.dtype)
    cols = rows.eids if op == "copy_e" else rows.indices
    m = x.index_select(0, cols.long()).to(acc)
    if op in ("u_mul_e", "u_add_e"):
        wk = w.index_select(0, rows.eids.long()).to(acc)
        m = m * wk if op == "u_mul_e" else m + wk
    return m


def extrema_native(rows: Structure, op: str, negate: bool, x: torch.Tensor, w: torch.Tensor | None,
                   fill: float, want_arg: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`extrema_forward` in vectorised torch: scatter_reduce amax of the messages per row, then
    scatter_reduce amin of the CSR positions that reach it (the first one: ties in CSR order).
    ``want_arg=False``: the values alone (arg None), one scatter instead of two."""
    num_rows, num_feat, num_edges = rows.num_rows, x.shape[1], rows.num_edges
    acc = acc_dtype(x.dtype)
    if not (num_rows and num_feat and num_edges):
        arg = torch.full((num_rows, num_feat), -1, dtype=torch.int64, device=x.device)
        return torch.full((num_rows, num_feat), float(fill), dtype=x.dtype, device=x.device), arg
    m = _messages(rows, op, x, w)
    if negate:
        m = m.neg_()
    entry_rows = _entry_rows(rows)
    index = entry_rows[:, None].expand(-1, num_feat)
    best = torch.full((num_rows, num_feat), float("-inf"), dtype=acc, device=x.device)
    best.scatter_reduce_(0, index, m, "amax")
    if not want_arg:
        filled = _fill_empty(rows, best.neg_() if negate else best, fill)
        return filled.to(x.dtype), None
    positions = torch.arange(num_edges, device=x.device)[:, None].expand(-1, num_feat)
    candidates = torch.where(m == best.index_select(0, entry_rows), positions, num_edges)
    arg = torch.full((num_rows, num_feat), num_edges, dtype=torch.int64, device=x.device)
    arg.scatter_reduce_(0, index, candidates, "amin")
    arg = torch.where(arg < num_edges, arg, -1)  # empty rows (and NaN-only ones)
    best = best.neg_() if negate else best
    out = torch.where(arg >= 0, best, torch.tensor(float(fill), dtype=acc, device=x.device))
    return out.to(x.dtype), arg


def _loop_array(t: torch.Tensor | None, acc: torch.dtype) -> np.ndarray:
    """A tensor as the compiled loops read it: bf16 as its bits (read in place, widened per value),
    other dtypes in ``acc``; None as a [1, 1] dummy the loop never reads."""
    if t is None:
        return np.zeros((1, 1), dtype=np.float32 if acc == torch.float32 else np.float64)
    t = t.detach()
    if t.dtype == torch.bfloat16 and acc == torch.float32:
        return jit_runtime.bf16_bits(t.contiguous())
    return t.to(acc).contiguous().numpy()


def extrema_compiled(rows: Structure, op: str, negate: bool, x: torch.Tensor, w: torch.Tensor | None,
                     fill: float, want_arg: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`extrema_native` as one compiled pass per row (CPU tensors; bf16 read and written as
    its bits, fp16 in fp32).  ``arg`` is int32 where every CSR position fits."""
    acc = acc_dtype(x.dtype)
    xa = _loop_array(x, acc)
    wa = _loop_array(w, acc)
    cols = rows.eids if op == "copy_e" else rows.indices
    arrays = (np64(rows.indptr), np64(cols), np64(rows.eids), xa, wa, _LOOP_OP[_KERNEL_OP[op]], bool(negate),
              float(fill))
    if not want_arg:
        return _from_loop(loops.extrema_values(*arrays), x.dtype), None
    out, arg = loops.extrema_rows(*arrays)
    return _from_loop(out, x.dtype), torch.from_numpy(arg)


def _from_loop(out: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A loop's result as a tensor of ``dtype`` (bf16 bits viewed, not copied)."""
    if out.dtype == np.uint16:
        return torch.from_numpy(out.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(out).to(dtype)


def _fill_empty(rows: Structure, best: torch.Tensor, fill: float) -> torch.Tensor:
    """``best`` with ``fill`` where the arg pass would find no position: rows without entries
    (scatter_reduce left -inf there) and NaN results (no message equals them)."""
    empty = (rows.indptr[1:] == rows.indptr[:-1])[:, None] | best.isnan()
    return torch.where(empty, torch.tensor(float(fill), dtype=best.dtype, device=best.device), best)


def _weight_at(w: torch.Tensor, eid: torch.Tensor) -> torch.Tensor:
    """w[eid[r, f], f] (one weight per feature) or w[eid[r, f], 0] (one per edge), [R, F]."""
    if w.shape[1] == 1:
        return w[:, 0].index_select(0, eid.reshape(-1)).reshape(eid.shape)
    return w.gather(0, eid)


def extrema_backward(rows: Structure, op: str, arg: torch.Tensor, x: torch.Tensor | None, w: torch.Tensor | None,
                     grad: torch.Tensor, x_shape, w_shape, need_x: bool, need_w: bool):
    """(grad_x, grad_w) of the aggregation from its ``arg``: each (r, f) sends grad[r, f] (times the
    other operand for u_mul_e) to its argument's source row and edge.  Torch ops, differentiable
    (create_graph=True works); accumulation in fp32 (fp64 for fp64), results in the inputs' dtypes."""
    acc = acc_dtype(grad.dtype)
    valid = arg >= 0
    g = torch.where(valid, grad.to(acc), torch.zeros((), dtype=acc, device=grad.device))
    k = arg.clamp(min=0)
    grad_x = grad_w = None
    empty = rows.num_edges == 0
    cols = (rows.eids if op == "copy_e" else rows.indices).long()
    src = None if empty else cols[k]
    if need_x:
        grad_x = torch.zeros(x_shape, dtype=acc, device=grad.device)
        if not empty:
            contrib = g * _weight_at(w.to(acc), rows.eids.long()[k]) if op == "u_mul_e" else g
            grad_x.scatter_add_(0, src, contrib)
    if need_w:
        grad_w = torch.zeros(w_shape, dtype=acc, device=grad.device)
        if not empty:
            eid = rows.eids.long()[k]
            contrib = g * x.to(acc).gather(0, src) if op == "u_mul_e" else g
            if w_shape[1] == 1:
                grad_w = grad_w.reshape(-1).index_add(0, eid.reshape(-1), contrib.reshape(-1)).reshape(w_shape)
            else:
                grad_w.scatter_add_(0, eid, contrib)
    return grad_x, grad_w


def extrema_backward_compiled(rows: Structure, op: str, arg: torch.Tensor, x, w, grad: torch.Tensor, x_shape,
                              w_shape, need_x: bool, need_w: bool):
    """:func:`extrema_backward` as one compiled serial pass over the results (CPU, not differentiable;
    bf16 gradients and operands read as their bits), accumulating in fp32 (fp64 for fp64)."""
    acc = acc_dtype(grad.dtype)
    grad_x = torch.zeros(x_shape if need_x else (0, 1), dtype=acc)
    grad_w = torch.zeros(w_shape if need_w else (0, 1), dtype=acc)
    cols = rows.eids if op == "copy_e" else rows.indices
    loops.extrema_scatter(np64(cols), np64(rows.eids), arg.numpy(), _loop_array(grad, acc), _loop_array(x, acc),
                          _loop_array(w, acc), _LOOP_OP[_KERNEL_OP[op]], w_shape is not None and w_shape[1] != 1,
                          grad_x.numpy(), grad_w.numpy())
    return (grad_x if need_x else None), (grad_w if need_w else None)


class ExtremaFunction(torch.autograd.Function):
    """(out, arg) of the max/min aggregation on ``path``; differentiable in ``x`` and ``w``."""

    @staticmethod
    def forward(ctx, rows: Structure, op: str, negate: bool, fill: float, path: str, want_arg: bool, x, w):
        """``want_arg``: keep the positions; False only where no gradient will be asked for (the
        native paths then compute the values alone; arg comes back empty)."""
        if path == "triton":
            out, arg = extrema_forward(rows, op, negate, x, w, fill)
        else:
            compiled = jit_runtime.worth(rows.num_edges) and x.device.type == "cpu"
            out, arg = (extrema_compiled if compiled else extrema_native)(rows, op, negate, x, w, fill, want_arg)
            arg = torch.empty((0, out.shape[1]), dtype=torch.int64, device=out.device) if arg is None else arg
        ctx.mark_non_differentiable(arg)
        ctx.set_materialize_grads(False)  # arg's gradient stays None: no [R, F] int64 zeros each backward
        ctx.rows, ctx.op, ctx.name = rows, op, f"{op}_{'min' if negate else 'max'}"
        ctx.x_meta = (tuple(x.shape), x.dtype)
        ctx.w_meta = None if w is None else (tuple(w.shape), w.dtype)
        keep = op == "u_mul_e"  # the other operand scales the gradient; no other op needs an input
        ctx.save_for_backward(arg, x if keep else None, w if keep else None)
        return out, arg

    @staticmethod
    def backward(ctx, grad, _grad_arg):
        arg, x, w = ctx.saved_tensors
        if grad is None:  # out reached no loss (only arg was used)
            return None, None, None, None, None, None, None, None
        need_x, need_w = ctx.needs_input_grad[6], ctx.needs_input_grad[7]
        backend.record(f"{ctx.name}_backward", "native", grad.device)  # torch ops or the compiled loop
        compiled = (not torch.is_grad_enabled() and grad.device.type == "cpu"  # create_graph: torch ops
                    and jit_runtime.worth(ctx.rows.num_edges))
        grad_x, grad_w = (extrema_backward_compiled if compiled else extrema_backward)(
            ctx.rows, ctx.op, arg, x, w, grad, ctx.x_meta[0], None if ctx.w_meta is None else ctx.w_meta[0],
            need_x, need_w)
        grad_x = None if grad_x is None else grad_x.to(ctx.x_meta[1])
        grad_w = None if grad_w is None else grad_w.to(ctx.w_meta[1])
        return None, None, None, None, None, None, grad_x, grad_w


def _operands(views: GraphViews, op: str, ufeat, efeat):
    """(x [N, F], w [E, 1|F] or None, feature shape) of the op's operands."""
    if op == "copy_e":
        feat = tuple(efeat.shape[1:])
        return efeat.reshape(views.num_edges, math.prod(feat)), None, feat
    feat = tuple(ufeat.shape[1:])
    x = ufeat.reshape(views.num_src, math.prod(feat))
    if efeat is None:
        return x, None, feat
    width = 1 if math.prod(efeat.shape[1:]) == 1 else math.prod(feat)
    return x, efeat.reshape(views.num_edges, width), feat


def aggregate_extrema(views: GraphViews, op: str, reduce: str, ufeat: torch.Tensor | None,
                      efeat: torch.Tensor | None = None, *, fill: float = 0.0, return_arg: bool = False):
    """Max (``reduce="max"``) or min of each destination's in-edge messages; differentiable in
    ``ufeat`` and ``efeat``.

    ``ufeat`` [num_src, *] (None for ``copy_e``); ``efeat`` [E] or [E, 1] (one weight per edge) or
    [E, *ufeat.shape[1:]] for ``u_mul_e``/``u_add_e``, [E, *] for ``copy_e``, in edge-id order, of
    ufeat's dtype.  Returns ``out`` [num_dst, *] in the input dtype (rows without in-edges hold
    ``fill``), and with ``return_arg=True`` also ``arg`` of ``out``'s shape: the in-CSR position
    (``views.csr("in")``) of each result's message, the first one on ties, -1 for empty rows.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 1, 2]), num_nodes=3)
    >>> out, arg = aggregate_extrema(g, "copy_u", "max", torch.tensor([[5.0], [7.0], [1.0]]), return_arg=True)
    >>> out.flatten().tolist(), arg.flatten().tolist()  # node 0 has no in-edges
    ([0.0, 7.0, 1.0], [-1, 1, 2])
    """
    if getattr(views, "traced", False):  # a graph as tensors (core.library): the custom op, for torch.compile
        return views.aggregate_extrema(op, reduce, ufeat, efeat, fill, return_arg)
    check_extrema(views, op, reduce, ufeat, efeat, fill)
    rows = views.csr("in")
    x, w, feat = _operands(views, op, ufeat, efeat)
    path = backend.choose_path(*(t for t in (x, w) if t is not None))
    backend.record(f"{op}_{reduce}", path, x.device)
    want_arg = return_arg or (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w)))
    out, arg = ExtremaFunction.apply(rows, op, reduce == "min", float(fill), path, want_arg, x, w)
    shape = (rows.num_rows,) + feat
    return (out.reshape(shape), arg.long().reshape(shape)) if return_arg else out.reshape(shape)


def extrema_reference(rows: Structure, op: str, reduce: str, ufeat, efeat=None, fill: float = 0.0):
    """(out, arg) by a Python loop over the rows of ``rows`` (clear, not fast): the messages of a
    row in CSR order, their max/min per feature, the first position that carries it."""
    src = efeat if op == "copy_e" else ufeat
    feat = tuple(src.shape[1:])
    x = src.reshape(src.shape[0], math.prod(feat))
    w = None
    if op in ("u_mul_e", "u_add_e"):
        w = efeat.reshape(efeat.shape[0], math.prod(efeat.shape[1:]))
    acc = acc_dtype(x.dtype)
    out = torch.full((rows.num_rows, x.shape[1]), float(fill), dtype=acc)
    arg = torch.full((rows.num_rows, x.shape[1]), -1, dtype=torch.int64)
    indptr = rows.indptr.tolist()
    for r in range(rows.num_rows):
        lo, hi = indptr[r], indptr[r + 1]
        if lo == hi:
            continue
        cols = (rows.eids if op == "copy_e" else rows.indices)[lo:hi].long()
        m = x[cols].to(acc)
        if w is not None:
            we = w[rows.eids[lo:hi].long()].to(acc)
            m = m * we if op == "u_mul_e" else m + we
        best = m.max(0).values if reduce == "max" else m.min(0).values
        out[r] = best
        arg[r] = lo + (m == best).int().argmax(0)  # argmax of 0/1: the first position equal to best
    return out.to(x.dtype).reshape((rows.num_rows,) + feat), arg.reshape((rows.num_rows,) + feat)
