"""Fused GAT aggregation: for every destination v and head h,

    out[v, h, :] = sum over in-edges e = (u -> v) of drop(softmax_e(leaky_relu(el[u, h] + er[v, h]))) * feat[u, h, :]

in one pass over v's in-edges (online softmax, FlashAttention style), fp32 accumulation; ``drop``
is DGL's attention dropout (keep / (1 - p), the mask a hash of edge id and head: :mod:`.dropout`),
the identity without it.  Saved for backward: the inputs and lse[v, h] = m + log(l) per destination
and head (not the output); backward recomputes p_e = exp(s_e - lse[v, h]) and the mask, so nothing
of size E x H x D is kept between forward and backward, and nothing of size E x H unless the caller
asks for the attention (``return_attention=True``, which then is differentiable too).

The autograd skeleton is :mod:`.variant`'s (shared with GATv2 and the dot product): inputs (feat,
el, er), parameter (negative slope, dropout).  Paths (:mod:`.gat_paths`): Triton kernels
(``kernels/gat.py``, ``kernels/gat_heads.py``); on CPU below ``runtime.MIN_WORK`` edges or without
numba vectorised torch, else the compiled loops of ``core/jit/gat.py`` (a pass over the in-CSR, one
over the out-CSR, no atomics).  Two Functions of its own keep the score halves inside the op:
:class:`GATHalvesFunction` (``attn=``) and :class:`GATLayerFunction` (:func:`gat_layer`, the
projection too); they call the variant's :func:`~.variant.forward_on` and :func:`~.variant.backward_on`.
"""
from __future__ import annotations

import torch

from .. import backend
from ..autocast import lower_precision
from . import gat_paths as paths
from .checks import check_gat, check_gat_vectors, check_layer, check_slope
from .common import usable
from .double import composed_grads
from .dropout import check_dropout, make_dropout
from .variant import Variant, backward_on, composed, forward_on, variant_attention

GAT = Variant("gat_attention", paths, scored=(1, 2), rows=0, dropout=True)


def _halves_grads(views, path: str, param, feat, attn_l, attn_r, el, er, lse, grad_out, grad_attn):
    """(grad_feat, grad_attn_l, grad_attn_r): the fused op's backward (:func:`~.variant.backward_on`),
    then ``paths.halves_backward``; ``grad_out`` or ``grad_attn`` may be None."""
    if grad_out is None:  # only the attention was used
        grad_out = feat.new_zeros((views.num_dst,) + tuple(feat.shape[1:]))
    grads = backward_on(GAT, views, path, param, (feat, el, er), lse, grad_out, grad_attn)
    return paths.halves_backward(grads, feat, attn_l, attn_r)


class GATHalvesFunction(torch.autograd.Function):
    """The fused op with the score halves computed inside from the attention vectors: el =
    (feat * attn_l).sum(-1), er = (feat[:num_dst] * attn_r).sum(-1) (a graph whose destinations are
    the first sources: homogeneous, or a DGL block).  Backward adds their gradient into grad_feat in
    place (one addmm), so no second N x H x D gradient buffer exists next to it."""

    @staticmethod
    def forward(ctx, views, path: str, param, want_attention: bool, feat, attn_l, attn_r):
        ctx.set_materialize_grads(False)
        el, er = paths.score_halves(feat, attn_l, attn_r, views.num_dst)
        out, lse, attention = forward_on(GAT, views, path, param, want_attention, (feat, el, er))
        ctx.views, ctx.path, ctx.param = views, path, param
        ctx.save_for_backward(feat, attn_l, attn_r, el, er, lse)
        return out if attention is None else (out, attention)

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        grad_attn = grad_attention[0] if grad_attention else None
        views, param = ctx.views, ctx.param
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            def compose(feat, attn_l, attn_r):
                return composed(GAT, views, param, feat, *paths.score_halves(feat, attn_l, attn_r, views.num_dst))
            return (None,) * 4 + composed_grads(compose, ctx.saved_tensors[:3], (grad_out, grad_attn))
        return (None,) * 4 + _halves_grads(views, ctx.path, param, *ctx.saved_tensors, grad_out, grad_attn)


class GATLayerFunction(torch.autograd.Function):
    """out = gat(h = x @ weight.T) + bias on ``path``, the halves inside (:func:`gat_layer`);
    returns ``out`` or ``(out, attention [E, H])``.  h is private to the op: its backward may overwrite
    it (the compiled path writes grad_h into h's buffer, ``paths.backward_compiled_halves``)."""

    @staticmethod
    def forward(ctx, views, path: str, param, want_attention: bool, x, weight, attn_l, attn_r, bias):
        ctx.set_materialize_grads(False)
        heads, dim = attn_l.shape[-2:]
        h = torch.mm(x, weight.t()).view(x.shape[0], heads, dim)
        el, er = paths.score_halves(h, attn_l, attn_r, views.num_dst)
        out, lse, attention = forward_on(GAT, views, path, param, want_attention, (h, el, er))
        if bias is not None:
            out.add_(bias.view(1, heads, dim))  # out is this op's own tensor: no second N x H x D one
        ctx.views, ctx.path, ctx.param = views, path, param
        ctx.h = h  # private: backward may overwrite it (not save_for_backward: no version check wanted)
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.save_for_backward(x, weight, attn_l, attn_r, el, er, lse, bias)  # bias: for a double backward
        return out if attention is None else (out, attention)

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        x, weight, attn_l, attn_r, el, er, lse, bias = ctx.saved_tensors
        grad_attn = grad_attention[0] if grad_attention else None
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            return (None,) * 4 + composed_grads(lambda *t: _composed_layer(ctx, *t), (x, weight, attn_l, attn_r, bias),
                                                (grad_out, grad_attn))
        h, ctx.h = ctx.h, None  # consumed: its memory becomes grad_h
        if h is None:  # a second backward through a retained graph: h again from the saved x, weight
            h = torch.mm(x, weight.t()).view(x.shape[0], *attn_l.shape[-2:])
        if grad_out is None:  # only the attention was used
            grad_out = h.new_zeros((ctx.views.num_dst,) + tuple(h.shape[1:]))
        views = ctx.views
        if ctx.path == "native" and usable(views.num_edges, h):
            backend.record(f"{GAT.name}_backward", ctx.path, h.device)
            grad_h, grad_l, grad_r = paths.backward_compiled_halves(
                views.csr("in"), views.csr("out"), h, attn_l, attn_r, el, er, ctx.param, lse, grad_out, grad_attn,
                into_feat=True)
        else:
            grad_h, grad_l, grad_r = _halves_grads(views, ctx.path, ctx.param, h, attn_l, attn_r, el, er, lse,
                                                   grad_out, grad_attn)
        del h  # on the compiled path grad_h is h's buffer; elsewhere h goes now
        gh = grad_h.reshape(x.shape[0], weight.shape[0])  # H * D columns (-1 is ambiguous with 0 rows)
        grad_x = torch.mm(gh, weight) if ctx.needs_input_grad[4] else None
        grad_w = torch.mm(gh.t(), x) if ctx.needs_input_grad[5] else None
        grad_b = None
        if ctx.bias_shape is not None and ctx.needs_input_grad[8]:
            grad_b = grad_out.sum(0).reshape(ctx.bias_shape)
        return (None,) * 4 + (grad_x, grad_w, grad_l, grad_r, grad_b)


def _composed_layer(ctx, x, weight, attn_l, attn_r, bias):
    """(out, attention) of the layer as a differentiable composition (:mod:`.double`)."""
    heads, dim = attn_l.shape[-2:]
    h = torch.mm(x, weight.t()).view(x.shape[0], heads, dim)
    out, attention = composed(GAT, ctx.views, ctx.param, h, *paths.score_halves(h, attn_l, attn_r, ctx.views.num_dst))
    return (out if bias is None else out + bias.view(1, heads, dim)), attention


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
    if getattr(views, "traced", False) and attn is None and not return_attention:
        return views.attention("gat_attention", negative_slope, feat, el.reshape(el.shape[0], heads),
                               er.reshape(er.shape[0], heads), dropout=check_dropout(dropout),
                               seed=seed)  # the custom op (core.library), for torch.compile
    path = backend.choose_path(feat)  # the native path draws a mask without a seed as DGL's nn.Dropout does
    param = (float(negative_slope), make_dropout(dropout, seed, heads,
                                                 draw=(views.num_edges, feat) if path == "native" else None))
    if attn is None:
        return variant_attention(GAT, views, param, return_attention, feat, el.reshape(el.shape[0], heads),
                                 er.reshape(er.shape[0], heads), path=path)
    backend.record(GAT.name, path, feat.device)
    return GATHalvesFunction.apply(views, path, param, bool(return_attention), feat, *attn)


@lower_precision
def gat_layer(views, x: torch.Tensor, weight: torch.Tensor, attn_l: torch.Tensor, attn_r: torch.Tensor,
              bias: torch.Tensor | None = None, negative_slope: float = 0.2, dropout: float = 0.0, seed=None, *,
              return_attention: bool = False):
    """``dgl.nn.GATConv``'s projection, attention and bias as one op on ``views`` (a
    :class:`~dgl_accel.core.aggregation.views.GraphViews` whose destinations are its first sources:
    homogeneous, or a block): h = x @ weight.T viewed [num_src, H, D], out[v] = sum over in-edges of
    drop(softmax(leaky_relu(<h[u], attn_l> + <h[v], attn_r>))) h[u], plus ``bias``.  Differentiable in
    x, weight, attn_l, attn_r and bias; ``dropout``/``seed`` and ``return_attention`` as
    :func:`gat_attention`.

    Why (issue 18): a training step through ``fc`` then :func:`gat_attention` holds three N x H x D
    tensors at its peak (h saved for the attention's backward, the step's output, grad_feat).  Here h
    never leaves the op, so its backward may overwrite it: on the compiled CPU path (numba, fp32/fp64)
    pass B writes grad_h into h's own buffer (row u of h is read fully before row u of the gradient is
    written: ``core/jit/gat.py``) and sums the halves' gradients in the same loop; the Triton and the
    vectorised torch paths allocate a separate grad_h, then drop h.  Then grad_weight = grad_h.T @ x,
    grad_x = grad_h @ weight (only if x needs it), grad_bias = grad_out summed over nodes.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1]), torch.tensor([2, 2]), num_nodes=3)
    >>> x = torch.tensor([[1.0], [3.0], [5.0]])
    >>> out = gat_layer(g, x, torch.ones(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1))
    >>> out.flatten().tolist()
    [1.0, 1.0, 3.0]
    """
    check_layer(views, x, weight, attn_l, attn_r, bias)
    check_slope(negative_slope)
    if getattr(views, "traced", False) and not return_attention:  # the custom op (core.library)
        return views.attention("gat_layer", negative_slope, x, weight, attn_l, attn_r, bias,
                               dropout=check_dropout(dropout), seed=seed)
    path = backend.choose_path(x)  # the native path draws a mask without a seed as DGL's nn.Dropout does
    drop = make_dropout(dropout, seed, attn_l.shape[-2], draw=(views.num_edges, x) if path == "native" else None)
    backend.record(GAT.name, path, x.device)
    return GATLayerFunction.apply(views, path, (float(negative_slope), drop), bool(return_attention), x, weight,
                                  attn_l, attn_r, bias)
