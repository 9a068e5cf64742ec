"""Dense products of the drop-in layers: ``act(x @ W + b)`` as one op, forward and backward.

Naming chain as for the sparse ops: :func:`linear` (launcher: oneDNN or torch) ->
:class:`DenseFunction` (autograd) -> :func:`dense` (the op, under ``torch.autocast`` run in its dtype as
``nn.Linear`` is: :mod:`dgl_accel.core.autocast`) -> ``GraphConv._product``.

* CPU, float32, inputs of at least :data:`ONEDNN_MIN_ENTRIES` entries, on a CPU that is not Intel's:
  the product runs on oneDNN's inner-product primitive (``torch.ops.mkldnn._linear_pointwise``, what
  ``torch.compile`` emits for CPU linear layers), with bias and ReLU fused into it.  torch's ``mm``
  calls MKL, which takes its AVX-512 kernels only on Intel CPUs; on AMD ones, one thread:
  [13752, 128] x [128, 64] 2.5 vs 3.2 ms, [2708, 1433] x [1433, 16] 1.9 vs 2.8 ms, with the same
  float32 error against a float64 reference.  On Intel CPUs MKL's ``addmm`` is as fast or faster
  (0.87-1.05x oneDNN's time over the drop-ins' shapes), so the product stays there.  Smaller inputs
  stay on ``addmm`` everywhere (oneDNN's layout conversions cost more there: [2708, 128] 0.49 vs
  0.46 ms).  ``DGL_ACCEL_ONEDNN=0`` turns oneDNN off, ``=1`` on whatever the CPU.
* The weight gradient ``x^T g`` runs on torch's ``mm`` in ``nn.Linear``'s form, ``(g^T x)^T``
  (:func:`weight_grads`); oneDNN's backward-weights primitive (in row chunks) measured slower at
  every size (one thread: 8.6 vs 2.9 ms at [13752, 128] x [13752, 64]; 22.9 vs 20.7 ms at 82168 rows).
* Inside ``dgl_accel.execution_paths`` the backward uses only the rows where the output gradient
  can be nonzero (a frontier N^d, known at backward time), ReLU mask and bias gradient included.
* Double backward (``create_graph=True``): the backward is then recorded, so it runs in torch's
  differentiable ops on every row (no scratch buffers, no ``out=``, no oneDNN); the same values.
"""
from __future__ import annotations

import os

import torch

from . import scratch
from .autocast import lower_precision
from .machine import intel_cpu

_onednn_ok: bool | None = None
ONEDNN_MIN_ENTRIES = 1 << 20  # x's entries from which oneDNN's forward beat addmm (module docstring)


def _onednn_works() -> bool:
    """oneDNN's fused linear exists in this torch build and agrees with ``addmm`` on a small case
    (checked once per process)."""
    global _onednn_ok
    if _onednn_ok is None:
        try:
            op = torch.ops.mkldnn._linear_pointwise
            gen = torch.Generator().manual_seed(0)
            x, w, b = (torch.randn(s, generator=gen) for s in ((37, 19), (19, 5), (5,)))
            got = op(x, w.t().contiguous(), b, "relu", [], "")
            _onednn_ok = bool(torch.allclose(got, torch.addmm(b, x, w).relu_(), rtol=1e-5, atol=1e-5))
        except (AttributeError, RuntimeError):
            _onednn_ok = False
    return _onednn_ok


def onednn_enabled() -> bool:
    """Whether large CPU float32 products go to oneDNN: by default where the CPU is not Intel's (module
    docstring); ``DGL_ACCEL_ONEDNN=0`` / ``=1`` turns it off / on."""
    setting = os.environ.get("DGL_ACCEL_ONEDNN", "")
    if setting == "0" or (setting != "1" and intel_cpu()):
        return False
    return torch.backends.mkldnn.is_available() and _onednn_works()


def _use_onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    tensors = (x, weight) if bias is None else (x, weight, bias)
    if any(t.device.type != "cpu" or t.dtype != torch.float32 for t in tensors):
        return False
    if x.dim() != 2 or weight.dim() != 2 or x.shape[0] == 0 or (bias is not None and bias.dim() != 1):
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False  # recorded for double backward: torch's ops have derivatives, oneDNN's has none
    return x.numel() >= ONEDNN_MIN_ENTRIES and onednn_enabled()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           relu: bool = False) -> torch.Tensor:
    """``x @ weight (+ bias)``, then ReLU if ``relu``; ``weight`` is [in, out] as in GraphConv.
    Returns a fresh tensor."""
    if _use_onednn(x, weight, bias):
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight.t().contiguous(), bias,
                                                  "relu" if relu else "none", [], "")
    out = torch.matmul(x, weight) if bias is None else torch.addmm(bias, x, weight)
    return out.relu_() if relu else out


def _scratch_or_new(name: str, shape, like: torch.Tensor) -> torch.Tensor:
    """A per-thread scratch tensor for a backward intermediate that never leaves it (CPU, no
    double backward recording it), else a fresh one."""
    if like.device.type == "cpu" and not torch.is_grad_enabled():
        return scratch.tensor(name, tuple(shape), like.dtype)
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device)


def weight_grads(x: torch.Tensor, g: torch.Tensor, need_bias: bool):
    """(``x^T g`` [in, out], ``g.sum(0)`` or None) for ``x`` [N, in], ``g`` [N, out].  The product runs
    as ``(g^T x)^T``, ``nn.Linear``'s weight gradient: MKL on Intel CPUs takes that form up to 2x
    faster than ``x^T g`` for wide inputs (one thread, [2708, 1433] inputs: 4.4 vs 10.7 ms at 64
    outputs, 8.3 vs 14.1 ms at 128; [13752, 1433]: 32 vs 63 ms)."""
    return (g.t() @ x).t(), (g.sum(0) if need_bias else None)


def recorded_backward(x, weight, out, grad, need_x: bool, need_w: bool, need_b: bool):
    """:class:`DenseFunction`'s gradients in differentiable torch ops, for ``create_graph=True``:
    every row (the frontier restriction of an execution path is exact but skips nothing worth a
    second code path here).  ``out`` (the ReLU output, or None) gives only the mask, whose
    derivative is zero."""
    g = grad if out is None else grad * (out > 0).to(grad.dtype)
    grad_x = torch.matmul(g, weight.t()) if need_x else None
    grad_w = torch.matmul(g.t(), x).t() if need_w else None  # weight_grads' form
    grad_b = g.sum(0) if need_b else None
    return grad_x, grad_w, grad_b, None, None, None


class DenseFunction(torch.autograd.Function):
    """``act(x @ weight + bias)`` (act: ReLU or none) whose backward, inside an execution-path
    session, keeps to the rows where the output gradient can be nonzero.

    ``plan`` (None, or an execution-path plan with ``backward_rows(offset, grad)`` and
    ``rows_written(tensor, offset)``) and ``offset`` locate
    the product in the step: the gradient reaching it is exactly zero outside N^d with
    d = (aggregations after this layer's) + ``offset`` (1 when the product feeds the layer's
    aggregation, weight first; 0 when it follows it).  So
    ``grad_weight = x[N^d]^T g[N^d]``, ``grad_bias = sum g[N^d]`` and ``grad_x`` is ``g @ weight^T``
    on N^d's rows, 0 elsewhere.  The masked and gathered gradients live in scratch buffers.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, relu: bool, plan, offset: int):
        out = linear(x, weight, bias, relu)
        ctx.save_for_backward(x, weight, out if relu else None)
        ctx.relu, ctx.plan, ctx.offset = relu, plan, offset
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight, out = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if torch.is_grad_enabled():  # create_graph=True: a backward that is itself differentiable
            return recorded_backward(x, weight, out, grad, need_x, need_w, need_b)
        rows = None
        if ctx.plan is not None:
            rows = ctx.plan.backward_rows(ctx.offset, grad)
        threshold = torch.ops.aten.threshold_backward.grad_input
        if rows is None:
            g = threshold(grad, out, 0, grad_input=_scratch_or_new("dense.g", grad.shape, grad)) if ctx.relu else grad
        else:
            g = torch.index_select(grad, 0, rows, out=_scratch_or_new("dense.g", (rows.numel(), grad.shape[1]), grad))
            if ctx.relu:
                kept = torch.index_select(out, 0, rows, out=_scratch_or_new("dense.out", g.shape, out))
                g = threshold(g, kept, 0, grad_input=g)
            if need_w:
                x = torch.index_select(x, 0, rows, out=_scratch_or_new("dense.x", (rows.numel(), x.shape[1]), x))
        grad_w = grad_b = grad_x = None
        if need_w:
            grad_w, grad_b = weight_grads(x, g, need_b)
        elif need_b:
            grad_b = g.sum(0)
        if need_x:
            grad_x = linear(g, weight.t())
            if rows is not None:
                grad_x = grad.new_zeros((grad.shape[0], weight.shape[0])).index_copy_(0, rows, grad_x)
                ctx.plan.rows_written(grad_x, ctx.offset)  # 0 outside rows: the next step need not check
        return grad_x, grad_w, grad_b, None, None, None


@lower_precision
def dense(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, relu: bool = False,
          plan=None, offset: int = 0) -> torch.Tensor:
    """``relu?(x @ weight + bias)`` (:class:`DenseFunction`); under ``torch.autocast`` in its dtype, with
    bias, as ``nn.Linear`` runs there.

    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     dense(torch.ones(2, 3), torch.ones(3, 4), torch.zeros(4)).dtype
    torch.bfloat16
    """
    return DenseFunction.apply(x, weight, bias, relu, plan, offset)
