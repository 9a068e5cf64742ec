"""The three paths of the edge softmax (:mod:`.edge_softmax`), each a forward ``(rows, score) -> a`` and a
backward ``(rows, a, grad) -> grad_score = a * (grad - sum over the row of a * grad)``, [E, H] in edge-id
order, in the score's dtype (half types accumulate in fp32):

* native: vectorised torch over edges in edge-id order, with the row (normalisation group) of every
  edge as an index: segment max by ``scatter_reduce('amax')``, exp, segment sum by ``index_add``
  (:func:`segment_softmax`, which the fused ops' native forwards share);
* compiled: the numba loops of :mod:`dgl_accel.core.jit.edge_softmax` (sequential passes over the edges);
* triton: the kernels of ``kernels/edge_softmax.py`` (a program per row and block of heads), compiled
  on CUDA, interpreted on CPU.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..jit import edge_softmax as loops
from ..launch import kernel_module, triton_kernel
from .common import as_array, edge_groups


# ------------------------------------------------------------------ native (vectorised torch)
def segment_softmax(x: torch.Tensor, group: torch.Tensor, num_groups: int):
    """(softmax of ``x`` [E, H] within each group, the groups' max [G, H], their sums [G, H]).
    Not differentiable (in-place steps): forward passes only."""
    heads = x.shape[1]
    mx = torch.full((num_groups, heads), float("-inf"), dtype=x.dtype, device=x.device)
    mx.scatter_reduce_(0, group[:, None].expand(-1, heads), x, "amax", include_self=True)
    ex = torch.sub(x, mx.index_select(0, group)).exp_()
    den = torch.zeros((num_groups, heads), dtype=x.dtype, device=x.device).index_add_(0, group, ex)
    return ex.div_(den.index_select(0, group)), mx, den


def segment_softmax_backward(a: torch.Tensor, grad: torch.Tensor, group: torch.Tensor, num_groups: int):
    """a * (grad - sum over the group of a * grad): the softmax backward from its output ``a`` [E, H],
    differentiable (it also serves a double backward)."""
    ag = a * grad
    total = torch.zeros((num_groups, a.shape[1]), dtype=ag.dtype, device=ag.device).index_add(0, group, ag)
    return ag - a * total.index_select(0, group)


def forward_native(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """Edge softmax of ``score`` [E, H] over the rows of ``rows``, in score's dtype."""
    a, _, _ = segment_softmax(score.to(acc_dtype(score.dtype)), edge_groups(rows), rows.num_rows)
    return a.to(score.dtype)


def backward_native(rows: Structure, a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    acc = acc_dtype(a.dtype)
    return segment_softmax_backward(a.to(acc), grad.to(acc), edge_groups(rows), rows.num_rows).to(a.dtype)


# ------------------------------------------------------------------ compiled (numba)
def forward_compiled(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """:func:`forward_native` compiled: softmax of ``score`` [E, H] within each row."""
    out = loops.edge_softmax_forward(edge_groups(rows).numpy(), as_array(score, acc_dtype(score.dtype)), rows.num_rows)
    return torch.from_numpy(out).to(score.dtype)


def backward_compiled(rows: Structure, a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """:func:`backward_native` compiled: a * (grad - sum over the row of a * grad)."""
    acc = acc_dtype(a.dtype)
    out = loops.edge_softmax_backward(edge_groups(rows).numpy(), as_array(a, acc), as_array(grad, acc), rows.num_rows)
    return torch.from_numpy(out).to(a.dtype)


# ------------------------------------------------------------------ triton
def forward_triton(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """Softmax of ``score`` [E, H] (edge-id order) over each row's entries."""
    score = score.contiguous()
    out = torch.empty_like(score)
    heads = score.shape[1]
    if rows.num_rows and rows.num_edges and heads:
        mod = kernel_module("edge_softmax")
        block_e, block_h = mod.tile(heads)
        kernel = triton_kernel("edge_softmax", "_edge_softmax_fwd_kernel", score.device)
        kernel[(rows.num_rows, -(-heads // block_h))](rows.indptr, rows.eids, score, out, heads,
                                                      BLOCK_E=block_e, BLOCK_H=block_h, num_warps=mod.NUM_WARPS)
    return out


def backward_triton(rows: Structure, a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """a * (grad - sum over the row of a * grad), [E, H] in a's dtype."""
    a, grad = a.contiguous(), grad.to(a.dtype).contiguous()
    out = torch.empty_like(a)
    heads = a.shape[1]
    if rows.num_rows and rows.num_edges and heads:
        mod = kernel_module("edge_softmax")
        block_e, block_h = mod.tile(heads)
        kernel = triton_kernel("edge_softmax", "_edge_softmax_bwd_kernel", a.device)
        kernel[(rows.num_rows, -(-heads // block_h))](rows.indptr, rows.eids, a, grad, out, heads,
                                                      BLOCK_E=block_e, BLOCK_H=block_h, num_warps=mod.NUM_WARPS)
    return out
