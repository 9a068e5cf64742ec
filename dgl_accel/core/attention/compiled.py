"""The compiled CPU path of the attention ops: the numba loops of :mod:`dgl_accel.core.jit.attention`
behind the native path's contracts (torch tensors in, torch tensors out, half types computed in
float32 and cast back), on CSR views instead of edge lists.

:mod:`.native` (edge softmax) and :mod:`.gat` (the fused op) call these where :func:`usable` says so:
numba enabled, at least ``runtime.MIN_WORK`` edges (read at call time, so tests can lower it), CPU
tensors.  Otherwise they run their vectorised torch code, which is also what runs without numba.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..jit import attention as loops
from ..jit import runtime
from ..sampling.arrays import np64
from .native import edge_groups


def usable(num_edges: int, *tensors: torch.Tensor) -> bool:
    """Whether the compiled loops take a call over ``num_edges`` edges on ``tensors``."""
    return runtime.worth(num_edges) and all(t.device.type == "cpu" for t in tensors)


def as_array(t: torch.Tensor, dtype: torch.dtype):
    """A C-contiguous numpy view (or converted copy) of ``t`` in ``dtype`` (float32 or float64)."""
    return t.detach().to(dtype).contiguous().numpy()


def csr_arrays(rows: Structure):
    """(indptr, indices, eids) of a CSR view as int64 numpy arrays (views where already int64)."""
    return np64(rows.indptr), np64(rows.indices), np64(rows.eids)


def edge_softmax(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """:func:`~.native.edge_softmax_native` compiled: softmax of ``score`` [E, H] within each row."""
    out = loops.edge_softmax_forward(edge_groups(rows).numpy(), as_array(score, acc_dtype(score.dtype)), rows.num_rows)
    return torch.from_numpy(out).to(score.dtype)


def edge_softmax_backward(rows: Structure, a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """:func:`~.native.edge_softmax_backward_native` compiled: a * (grad - sum over the row of a * grad)."""
    acc = acc_dtype(a.dtype)
    out = loops.edge_softmax_backward(edge_groups(rows).numpy(), as_array(a, acc), as_array(grad, acc), rows.num_rows)
    return torch.from_numpy(out).to(a.dtype)


def _loop_dropout(drop):
    return None if drop is None else drop.loop_args()


def gat_forward(in_csr: Structure, feat, el, er, slope: float, want_attention: bool, drop=None):
    """:func:`~.native.gat_forward_native` compiled, over the in-CSR: (out [num_dst, H, D] in feat's
    dtype, lse [num_dst, H] and, if ``want_attention``, the attention [E, H] (after ``drop``, an
    :class:`~.dropout.AttentionDropout` or None) in the accumulation dtype, else None).  Nothing of
    size E x H x D, nor E x H without ``want_attention``."""
    acc = acc_dtype(feat.dtype)
    indptr, indices, eids = csr_arrays(in_csr)
    el_a, er_a = as_array(el, acc), as_array(er, acc)
    dropout = _loop_dropout(drop)
    out, lse = loops.gat_forward(indptr, indices, eids, as_array(feat, acc), el_a, er_a, slope, dropout)
    attention = None
    if want_attention:
        attention = torch.from_numpy(loops.gat_attention(indptr, indices, eids, el_a, er_a, slope, lse, dropout))
    return torch.from_numpy(out).to(feat.dtype), torch.from_numpy(lse), attention


def gat_backward(in_csr: Structure, out_csr: Structure, feat, el, er, slope: float, lse, grad_out, grad_attn,
                 drop=None):
    """:func:`~.native.gat_backward_native` compiled: (grad_feat, grad_el, grad_er) in the inputs'
    dtypes, recomputing the attention from ``lse``; ``grad_attn`` [E, H] or None."""
    acc = lse.dtype
    grads = loops.gat_backward(csr_arrays(in_csr), csr_arrays(out_csr), as_array(feat, acc), as_array(el, acc),
                               as_array(er, acc), slope, as_array(lse, acc), as_array(grad_out, acc),
                               None if grad_attn is None else as_array(grad_attn, acc), _loop_dropout(drop))
    return tuple(torch.from_numpy(g).to(t.dtype) for g, t in zip(grads, (feat, el, er)))


def reuses_buffer(feat: torch.Tensor) -> bool:
    """Whether :func:`gat_backward_halves` can write grad_feat into ``feat``'s own memory: the loops
    run in its dtype (float32/float64) on its buffer (contiguous), so the numpy view is that memory."""
    return feat.dtype in (torch.float32, torch.float64) and feat.is_contiguous()


def gat_backward_halves(in_csr: Structure, out_csr: Structure, feat, attn_l, attn_r, el, er, slope: float, lse,
                        grad_out, grad_attn, drop=None, into_feat: bool = False):
    """(grad_feat, grad_attn_l, grad_attn_r) of the fused op with the score halves made from attn_l /
    attn_r inside: the halves' gradient summed in pass B's loop (no addmm).  ``into_feat`` (where
    :func:`reuses_buffer`): grad_feat is written into ``feat``'s memory and ``feat`` is returned,
    its values gone (pass B reads row u of feat before writing row u of the gradient)."""
    acc = lse.dtype
    heads, dim = feat.shape[1:]
    into_feat = into_feat and reuses_buffer(feat)
    halves = tuple(as_array(a.reshape(heads, dim), acc) for a in (attn_l, attn_r))
    grads = loops.gat_backward(csr_arrays(in_csr), csr_arrays(out_csr), as_array(feat, acc), as_array(el, acc),
                               as_array(er, acc), slope, as_array(lse, acc), as_array(grad_out, acc),
                               None if grad_attn is None else as_array(grad_attn, acc), _loop_dropout(drop),
                               halves=halves, into_feat=into_feat)
    grad_feat = feat if into_feat else torch.from_numpy(grads[0]).to(feat.dtype)
    return (grad_feat,) + tuple(torch.from_numpy(g).reshape(a.shape).to(a.dtype) for g, a in
                                zip(grads[3:], (attn_l, attn_r)))
