"""Fused GAT aggregation: for every destination v and head h,

    out[v, h, :] = sum over in-edges e = (u -> v) of softmax_e(leaky_relu(el[u, h] + er[v, h])) * feat[u, h, :]

in one pass over v's in-edges (online softmax, FlashAttention style), fp32 accumulation.  Saved for
backward: the inputs, the output and lse[v, h] = m + log(l) per destination and head; backward
recomputes p_e = exp(s_e - lse[v, h]), so nothing of size E x H x D is kept between forward and
backward, and nothing of size E x H unless the caller asks for the attention
(``return_attention=True``, which then is differentiable too).

Triton path: ``_gat_fwd_kernel`` over the in-CSR; backward ``_gat_bwd_dst_kernel`` over the in-CSR
(grad_s and grad_er) and ``_gat_bwd_src_kernel`` over the out-CSR (grad_feat and grad_el, no
atomics).  Native path: vectorised torch over edges (:mod:`.native`), recomputing in backward too;
from ``runtime.MIN_WORK`` edges with numba, the same passes as compiled loops (:mod:`.compiled`).
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from .. import backend
from . import compiled
from .checks import check_gat
from .launchers import edge_softmax_backward, gat_backward, gat_forward
from .native import gat_attention_from_lse, gat_backward_native, gat_forward_native


def edges_by_id(views):
    """(src, dst) as int64 in edge-id order, cached on the graph."""
    return views.cached("attention.edges_int64", lambda: tuple(t.long() for t in views.edges_by_id()))


class GATAttentionFunction(torch.autograd.Function):
    """The fused GAT aggregation on ``path``; returns ``out`` or ``(out, attention [E, H])``."""

    @staticmethod
    def forward(ctx, views, path: str, slope: float, want_attention: bool, feat, el, er):
        ctx.set_materialize_grads(False)
        attention = None
        if path == "triton":
            out, lse = gat_forward(views.csr("in"), feat, el, er, slope)
            if want_attention:
                src, dst = edges_by_id(views)
                attention = gat_attention_from_lse(src, dst, el, er, slope, lse)[1].to(feat.dtype)
        elif compiled.usable(views.num_edges, feat):  # numba loops over the in-CSR, nothing of E x H x D
            out, lse, a = compiled.gat_forward(views.csr("in"), feat, el, er, slope, want_attention)
            attention = a.to(feat.dtype) if want_attention else None
        else:
            src, dst = edges_by_id(views)
            out, lse, a = gat_forward_native(src, dst, views.num_dst, feat, el, er, slope)
            attention = a.to(feat.dtype) if want_attention else None
        ctx.views, ctx.path, ctx.slope = views, path, slope
        ctx.save_for_backward(feat, el, er, out, lse)
        return out if attention is None else (out, attention)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, *grad_attention):
        feat, el, er, out, lse = ctx.saved_tensors
        views, slope = ctx.views, ctx.slope
        grad_attn = grad_attention[0] if grad_attention else None
        if grad_out is None:  # only the attention was used
            grad_out = torch.zeros_like(out)
        backend.record("gat_attention_backward", ctx.path, out.device)
        if ctx.path == "native" and compiled.usable(views.num_edges, feat):  # in-CSR then out-CSR pass
            grad_feat, grad_el, grad_er = compiled.gat_backward(views.csr("in"), views.csr("out"), feat, el, er, slope,
                                                                out, lse, grad_out, grad_attn)
            return None, None, None, None, grad_feat, grad_el, grad_er
        if ctx.path == "native":
            src, dst = edges_by_id(views)
            grad_feat, grad_el, grad_er = gat_backward_native(src, dst, feat, el, er, slope, out, lse, grad_out,
                                                              grad_attn)
            return None, None, None, None, grad_feat, grad_el, grad_er
        in_csr = views.csr("in")
        grad_feat, grad_el, grad_er, _ = gat_backward(in_csr, views.csr("out"), feat, el, er, slope, out, lse,
                                                      grad_out)
        if grad_attn is not None:  # d attention / d s: the edge-softmax backward, then leaky'
            src, dst = edges_by_id(views)
            raw, p = gat_attention_from_lse(src, dst, el, er, slope, lse)
            extra = edge_softmax_backward(in_csr, p, grad_attn.to(p.dtype))
            extra = torch.where(raw > 0, extra, extra * slope)
            grad_el.index_add_(0, src, extra)
            grad_er.index_add_(0, dst, extra)
        return None, None, None, None, grad_feat, grad_el.to(el.dtype), grad_er.to(er.dtype)


def gat_attention(views, feat: torch.Tensor, el: torch.Tensor, er: torch.Tensor, negative_slope: float = 0.2, *,
                  return_attention: bool = False):
    """GAT's attention-weighted aggregation into the destinations of ``views`` (a
    :class:`~dgl_accel.core.aggregation.views.GraphViews`), fused; differentiable in all three inputs.

    ``feat`` [num_src, H, D], ``el`` [num_src, H] or [num_src, H, 1] (the source half of the score),
    ``er`` [num_dst, H] or [num_dst, H, 1]; one float dtype (half types accumulate in fp32).
    Returns ``out`` [num_dst, H, D] (zeros for a destination without in-edges), and with
    ``return_attention=True`` also the attention [E, H] in edge-id order.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1]), torch.tensor([2, 2]), num_nodes=3)
    >>> feat = torch.tensor([[[1.0]], [[3.0]], [[5.0]]])
    >>> out, a = gat_attention(g, feat, torch.zeros(3, 1), torch.zeros(3, 1), return_attention=True)
    >>> out.flatten().tolist(), a.flatten().tolist()
    ([0.0, 0.0, 2.0], [0.5, 0.5])
    """
    check_gat(views, feat, el, er, negative_slope)
    path = backend.choose_path(feat, el, er)
    backend.record("gat_attention", path, feat.device)
    heads = feat.shape[1]
    return GATAttentionFunction.apply(views, path, float(negative_slope), bool(return_attention), feat,
                                      el.reshape(el.shape[0], heads), er.reshape(er.shape[0], heads))
