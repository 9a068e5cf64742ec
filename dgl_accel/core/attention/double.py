"""Double backward of the fused attention ops (``torch.autograd.grad(..., create_graph=True)``, then a
gradient of that gradient: gradient penalties, meta-learning, Hessian-vector products).

The fused ops' backward runs kernels (or compiled loops) that autograd cannot see into.  Under
``create_graph=True`` their autograd Functions come here instead: the op is recomputed as a
differentiable composition of torch ops over the edges (the scores, a softmax per destination, the
weighted sum), and its gradient is taken with ``create_graph=True``, so the gradient has a gradient.
That composition keeps E x H x D tensors, as an unfused framework does; a first-order backward (the
training step) never comes here and keeps the fused path's memory.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype


def composed_grads(compose, inputs, grads) -> tuple:
    """The gradients of ``compose(*inputs)`` -> (out, attention) under ``grads`` (one per output, None
    where that output was unused) with respect to each input that requires one (None for the others),
    with ``create_graph=True``."""
    outs = compose(*inputs)
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
    want = [i for i, t in enumerate(inputs) if t is not None and t.requires_grad]
    result: list = [None] * len(inputs)
    if want and pairs:
        got = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in want], [g for _, g in pairs],
                                  allow_unused=True, create_graph=True)
        for i, g in zip(want, got):
            result[i] = g
    return tuple(result)


def softmax_by_row(s: torch.Tensor, dst: torch.Tensor, num_dst: int) -> torch.Tensor:
    """Softmax of the scores ``s`` [E, H] over each destination's in-edges, differentiable (the
    shift by the row's max is a constant)."""
    heads = s.shape[1]
    shift = torch.full((num_dst, heads), float("-inf"), dtype=s.dtype, device=s.device)
    shift = shift.scatter_reduce(0, dst[:, None].expand(-1, heads), s.detach(), "amax", include_self=True)
    ex = torch.exp(s - shift.index_select(0, dst))
    return ex / torch.zeros_like(shift).index_add(0, dst, ex).index_select(0, dst)


def weighted_sum(a: torch.Tensor, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, num_dst: int):
    """out[v] = sum over v's in-edges e = (u -> v) of a[e, h] x[u, h, :], differentiable."""
    out = torch.zeros((num_dst,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    return out.index_add(0, dst, a[:, :, None] * x.index_select(0, src))


def attention_composition(scores: torch.Tensor, x: torch.Tensor, src, dst, num_dst: int, weight=None):
    """(out in x's dtype, attention in x's dtype) from the edges' ``scores`` [E, H] and the aggregated
    rows ``x`` [num_src, H, D], in the accumulation dtype inside; ``weight`` [E, H] (dropout's
    keep / (1 - p)) multiplies the attention after the softmax."""
    acc = acc_dtype(x.dtype)
    a = softmax_by_row(scores.to(acc), dst, num_dst)
    if weight is not None:
        a = a * weight.to(acc)
    return weighted_sum(a, x.to(acc), src, dst, num_dst).to(x.dtype), a.to(x.dtype)

