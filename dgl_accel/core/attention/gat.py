"""Fused GAT aggregation: for every destination v and head h,

    out[v, h, :] = sum over in-edges e = (u -> v) of drop(softmax_e(leaky_relu(el[u, h] + er[v, h]))) * feat[u, h, :]

in one pass over v's in-edges (online softmax, FlashAttention style), fp32 accumulation; ``drop``
is DGL's attention dropout (keep / (1 - p), the mask a hash of edge id and head: :mod:`.dropout`),
the identity without it.  Saved for backward: the inputs and lse[v, h] = m + log(l) per destination
and head (not the output); backward recomputes p_e = exp(s_e - lse[v, h]) and the mask, so nothing
of size E x H x D is kept between forward and backward, and nothing of size E x H unless the caller
asks for the attention (``return_attention=True``, which then is differentiable too).

Backward, with g_e = w_e <grad_out[v], feat[u]> (w_e the dropout weight): grad_s_e = p_e (g_e -
delta[v]) with delta[v] = sum over v's in-edges of p g (the softmax backward), times leaky'.  Pass 1
over the in-CSR (destinations) sums delta and grad_er; pass 2 over the out-CSR (sources) needs p_e
and g_e again for grad_feat and grad_el: the Triton kernels recompute them (nothing per edge between
the passes), the compiled CPU loops keep them from pass 1 (E x H scratch, freed when the backward
returns: an exp costs more there than the bytes).  No atomics.
Triton path: ``_gat_fwd_kernel``, ``_gat_bwd_dst_kernel``, ``_gat_bwd_src_kernel``.  Native path:
vectorised torch over edges (:mod:`.native`); from ``runtime.MIN_WORK`` edges with numba, the same
passes as compiled loops (:mod:`.compiled`).
"""
from __future__ import annotations

import torch

from .. import backend
from ..aggregation.scales import acc_dtype
from ..autocast import lower_precision
from . import compiled
from .checks import check_gat, check_gat_vectors
from .double import composed_grads, gat_composition
from .dropout import make_dropout
from .launchers import edge_softmax_backward, gat_backward, gat_forward
from .native import gat_attention_from_lse, gat_backward_native, gat_forward_native


def edges_by_id(views):
    """(src, dst) as int64 in edge-id order, cached on the graph."""
    return views.cached("attention.edges_int64", lambda: tuple(t.long() for t in views.edges_by_id()))


def edge_weights(views, drop, dtype):
    """The dropout weights [E, H] in edge-id order (None without dropout): the vectorised paths."""
    return None if drop is None else drop.weights(torch.arange(views.num_edges, device=views.device), dtype)


def fused_forward(views, path: str, slope: float, want_attention: bool, drop, feat, el, er):
    """(out, lse, attention or None) of the fused op on ``path`` (no autograd)."""
    attention = None
    if path == "triton":
        out, lse = gat_forward(views.csr("in"), feat, el, er, slope, drop)
        if want_attention:
            src, dst = edges_by_id(views)
            attention = gat_attention_from_lse(src, dst, el, er, slope, lse)[1]
            weight = edge_weights(views, drop, attention.dtype)
            attention = (attention if weight is None else attention * weight).to(feat.dtype)
    elif compiled.usable(views.num_edges, feat):  # numba loops over the in-CSR, nothing of E x H x D
        out, lse, a = compiled.gat_forward(views.csr("in"), feat, el, er, slope, want_attention, drop)
        attention = a.to(feat.dtype) if want_attention else None
    else:
        src, dst = edges_by_id(views)
        weight = edge_weights(views, drop, acc_dtype(feat.dtype))
        out, lse, a = gat_forward_native(src, dst, views.num_dst, feat, el, er, slope, weight)
        attention = a.to(feat.dtype) if want_attention else None
    return out, lse, attention


def fused_backward(views, path: str, slope: float, drop, feat, el, er, lse, grad_out, grad_attn):
    """(grad_feat, grad_el, grad_er) in the inputs' dtypes; ``grad_out`` or ``grad_attn`` may be None."""
    if grad_out is None:  # only the attention was used
        grad_out = feat.new_zeros((views.num_dst,) + tuple(feat.shape[1:]))
    backend.record("gat_attention_backward", path, feat.device)
    if path == "native" and compiled.usable(views.num_edges, feat):  # in-CSR then out-CSR pass
        return compiled.gat_backward(views.csr("in"), views.csr("out"), feat, el, er, slope, lse, grad_out,
                                     grad_attn, drop)
    if path == "native":
        src, dst = edges_by_id(views)
        return gat_backward_native(src, dst, feat, el, er, slope, lse, grad_out, grad_attn,
                                   edge_weights(views, drop, lse.dtype))
    in_csr = views.csr("in")
    grad_feat, grad_el, grad_er = gat_backward(in_csr, views.csr("out"), feat, el, er, slope, lse, grad_out, drop)
    if grad_attn is not None:  # d attention / d s: the edge-softmax backward of w * grad_attn, then leaky'
        src, dst = edges_by_id(views)
        raw, p = gat_attention_from_lse(src, dst, el, er, slope, lse)
        weight = edge_weights(views, drop, p.dtype)
        ga = grad_attn.to(p.dtype) if weight is None else grad_attn.to(p.dtype) * weight
        extra = edge_softmax_backward(in_csr, p, ga)
        extra = torch.where(raw > 0, extra, extra * slope)
        grad_el.index_add_(0, src, extra)
        grad_er.index_add_(0, dst, extra)
    return grad_feat, grad_el.to(el.dtype), grad_er.to(er.dtype)


def composed(views, slope: float, drop, feat, el, er):
    """(out, attention) of the op as a differentiable composition of torch ops: what a backward with
    ``create_graph=True`` differentiates (:mod:`.double`)."""
    src, dst = edges_by_id(views)
    weight = edge_weights(views, drop, acc_dtype(feat.dtype))
    return gat_composition(src, dst, views.num_dst, slope, weight, feat, el, er)


class GATAttentionFunction(torch.autograd.Function):
    """The fused GAT aggregation on ``path``; returns ``out`` or ``(out, attention [E, H])``; ``drop``
    an :class:`~.dropout.AttentionDropout` or None."""

    @staticmethod
    def forward(ctx, views, path: str, slope: float, want_attention: bool, drop, feat, el, er):
        ctx.set_materialize_grads(False)
        out, lse, attention = fused_forward(views, path, slope, want_attention, drop, feat, el, er)
        ctx.views, ctx.path, ctx.slope, ctx.drop = views, path, slope, drop
        ctx.save_for_backward(feat, el, er, lse)
        return out if attention is None else (out, attention)

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        feat, el, er, lse = ctx.saved_tensors
        grad_attn = grad_attention[0] if grad_attention else None
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            return (None,) * 5 + composed_grads(lambda *t: composed(ctx.views, ctx.slope, ctx.drop, *t),
                                                (feat, el, er), (grad_out, grad_attn))
        grads = fused_backward(ctx.views, ctx.path, ctx.slope, ctx.drop, feat, el, er, lse, grad_out, grad_attn)
        return (None,) * 5 + tuple(grads)


def halves_matrix(attn_l, attn_r, heads: int, dim: int) -> torch.Tensor:
    """[H * D, 2 H], block diagonal: feat [N, H * D] @ it = (el, er) with el[:, h] = <feat[:, h], attn_l[h]>."""
    eye = torch.eye(heads, device=attn_l.device).to(attn_l.dtype)  # CPU torch has no bf16 eye
    return torch.cat([(a.reshape(heads, dim, 1) * eye[:, None, :]).reshape(heads * dim, heads)
                      for a in (attn_l, attn_r)], dim=1)


def score_halves(feat, attn_l, attn_r, num_dst: int):
    """(el [N, H], er [num_dst, H]) = ((feat * attn_l).sum(-1), (feat[:num_dst] * attn_r).sum(-1)), one matmul."""
    (n, heads, dim) = feat.shape
    acc = acc_dtype(feat.dtype)  # half types: the matmul in fp32 (CPU torch lacks some half matmuls)
    w = halves_matrix(attn_l.to(acc), attn_r.to(acc), heads, dim)
    elr = (feat.reshape(n, heads * dim).to(acc) @ w).to(feat.dtype)
    return elr[:, :heads].contiguous(), elr[:num_dst, heads:].contiguous()


def halves_backward(views, path: str, slope: float, drop, feat, attn_l, attn_r, el, er, lse, grad_out, grad_attn):
    """(grad_feat, grad_attn_l, grad_attn_r) of the fused op with the halves inside: the fused
    backward, then the halves' gradient added into grad_feat in place (one addmm)."""
    grad_feat, grad_el, grad_er = fused_backward(views, path, slope, drop, feat, el, er, lse, grad_out, grad_attn)
    (n, heads, dim), num_dst = feat.shape, er.shape[0]
    acc = acc_dtype(feat.dtype)
    grad_elr = torch.zeros((n, 2 * heads), dtype=acc, device=feat.device)
    grad_elr[:, :heads] = grad_el
    grad_elr[:num_dst, heads:] = grad_er
    w = halves_matrix(attn_l.to(acc), attn_r.to(acc), heads, dim)
    if grad_feat.dtype == acc and grad_feat.is_contiguous():
        grad_feat.view(n, heads * dim).addmm_(grad_elr, w.t())  # in place: no second N x H x D buffer
    else:  # half types: through fp32
        grad_feat = grad_feat.to(acc).view(n, heads * dim).addmm_(grad_elr, w.t()).to(feat.dtype)
    grad_w = (feat.reshape(n, heads * dim).to(acc).t() @ grad_elr).reshape(heads, dim, 2, heads)
    grads_attn = [grad_w[:, :, k, :].diagonal(dim1=0, dim2=2).t().reshape(a.shape).to(a.dtype)
                  for k, a in enumerate((attn_l, attn_r))]
    return (grad_feat.view(feat.shape), *grads_attn)


class GATHalvesFunction(torch.autograd.Function):
    """The fused op with the score halves computed inside from the attention vectors: el =
    (feat * attn_l).sum(-1), er = (feat[:num_dst] * attn_r).sum(-1) (a graph whose destinations are
    the first sources: homogeneous, or a DGL block).  Backward adds their gradient into grad_feat in
    place (one addmm), so no second N x H x D gradient buffer exists next to it."""

    @staticmethod
    def forward(ctx, views, path: str, slope: float, want_attention: bool, drop, feat, attn_l, attn_r):
        ctx.set_materialize_grads(False)
        el, er = score_halves(feat, attn_l, attn_r, views.num_dst)
        out, lse, attention = fused_forward(views, path, slope, want_attention, drop, feat, el, er)
        ctx.views, ctx.path, ctx.slope, ctx.drop = views, path, slope, drop
        ctx.save_for_backward(feat, attn_l, attn_r, el, er, lse)
        return out if attention is None else (out, attention)

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        grad_attn = grad_attention[0] if grad_attention else None
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            views = ctx.views

            def compose(feat, attn_l, attn_r):
                return composed(views, ctx.slope, ctx.drop, feat, *score_halves(feat, attn_l, attn_r, views.num_dst))
            return (None,) * 5 + composed_grads(compose, ctx.saved_tensors[:3], (grad_out, grad_attn))
        return (None,) * 5 + halves_backward(ctx.views, ctx.path, ctx.slope, ctx.drop, *ctx.saved_tensors, grad_out,
                                             grad_attn)


@lower_precision
def gat_attention(views, feat: torch.Tensor, el: torch.Tensor | None = None, er: torch.Tensor | None = None,
                  negative_slope: float = 0.2, *, attn=None, return_attention: bool = False, dropout: float = 0.0,
                  seed=None):
    """GAT's attention-weighted aggregation into the destinations of ``views`` (a
    :class:`~dgl_accel.core.aggregation.views.GraphViews`), fused; differentiable in all inputs.

    ``feat`` [num_src, H, D], ``el`` [num_src, H] or [num_src, H, 1] (the source half of the score),
    ``er`` [num_dst, H] or [num_dst, H, 1]; one float dtype (half types accumulate in fp32).  Or,
    instead of el and er, ``attn=(attn_l, attn_r)`` (each [H, D] or [1, H, D], dgl.nn.GATConv's
    parameters): el = (feat * attn_l).sum(-1) and er = (feat[:num_dst] * attn_r).sum(-1) are computed
    inside (destinations = the first sources: a homogeneous graph or a block), and backward adds
    their gradient into feat's in place (one N x H x D gradient buffer instead of two).
    Returns ``out`` [num_dst, H, D] (zeros for a destination without in-edges), and with
    ``return_attention=True`` also the attention [E, H] in edge-id order (after dropout, as
    ``dgl.nn.GATConv(get_attention=True)`` returns it).  ``dropout`` in [0, 1): DGL's attention
    dropout (training mode; pass 0.0 in evaluation), keep probability 1 - dropout, kept weights
    scaled by 1 / (1 - dropout); ``seed`` (an int in [0, 2^64)) fixes the mask (a hash of edge id
    and head), else it is drawn from torch's global generator: on the native path the mask itself,
    as DGL's ``nn.Dropout`` draws it (same numbers as DGL from the same ``torch.manual_seed``), on
    the Triton path the hash's seed.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1]), torch.tensor([2, 2]), num_nodes=3)
    >>> feat = torch.tensor([[[1.0]], [[3.0]], [[5.0]]])
    >>> out, a = gat_attention(g, feat, torch.zeros(3, 1), torch.zeros(3, 1), return_attention=True)
    >>> out.flatten().tolist(), a.flatten().tolist()
    ([0.0, 0.0, 2.0], [0.5, 0.5])
    >>> gat_attention(g, feat, attn=(torch.zeros(1, 1), torch.zeros(1, 1))).flatten().tolist()
    [0.0, 0.0, 2.0]
    """
    if attn is not None:
        check_gat_vectors(views, feat, el, er, attn, negative_slope)
    else:
        check_gat(views, feat, el, er, negative_slope)
    heads = feat.shape[1]
    path = backend.choose_path(feat)  # the native path draws a mask without a seed as DGL's nn.Dropout does
    drop = make_dropout(dropout, seed, heads, draw=(views.num_edges, feat) if path == "native" else None)
    backend.record("gat_attention", path, feat.device)
    if attn is not None:
        return GATHalvesFunction.apply(views, path, float(negative_slope), bool(return_attention), drop, feat, *attn)
    return GATAttentionFunction.apply(views, path, float(negative_slope), bool(return_attention), drop, feat,
                                      el.reshape(el.shape[0], heads), er.reshape(er.shape[0], heads))
