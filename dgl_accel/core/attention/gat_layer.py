"""A whole GAT layer's attention part as one op (issue 18): the projection h = x @ weight.T, the
score halves el = <h, attn_l>, er = <h[:num_dst], attn_r>, the fused attention aggregation
(:mod:`.gat`) and the bias, with h internal to the autograd Function.

Why: a training step through ``fc`` then :func:`~.gat.gat_attention` holds three N x H x D tensors
at its peak (h saved for the attention's backward, the step's output, grad_feat).  Here h is a
private reference of the op (nobody else can read it), so its backward may overwrite it: on the
compiled CPU path (numba, fp32/fp64) pass B of the backward writes grad_h into h's own buffer (row
u of h is read fully before row u of the gradient is written: :mod:`..jit.attention`), and the
halves' gradients are summed in the same loop.  Peak of a step: the output and h/grad_h.  The
Triton path (its source pass splits D over programs that read all of h[u]) and the vectorised torch
path allocate a separate grad_h, then drop h.  Then grad_weight = grad_h.T @ x, grad_x = grad_h @
weight (only if x needs it), grad_bias = grad_out summed over nodes.
"""
from __future__ import annotations

import torch

from .. import backend
from ..aggregation.checks import describe
from ..autocast import lower_precision
from . import compiled
from .checks import check_float, check_slope
from .double import composed_grads
from .dropout import make_dropout
from .gat import composed, fused_forward, halves_backward, score_halves


class GATLayerFunction(torch.autograd.Function):
    """out = gat(h = x @ weight.T) + bias on ``path``; returns ``out`` or ``(out, attention [E, H])``."""

    @staticmethod
    def forward(ctx, views, path: str, slope: float, want_attention: bool, drop, x, weight, attn_l, attn_r, bias):
        ctx.set_materialize_grads(False)
        heads, dim = attn_l.shape[-2:]
        h = torch.mm(x, weight.t()).view(x.shape[0], heads, dim)
        el, er = score_halves(h, attn_l, attn_r, views.num_dst)
        out, lse, attention = fused_forward(views, path, slope, want_attention, drop, h, el, er)
        if bias is not None:
            out.add_(bias.view(1, heads, dim))  # out is this op's own tensor: no second N x H x D one
        ctx.views, ctx.path, ctx.slope, ctx.drop = views, path, slope, drop
        ctx.h = h  # private: backward may overwrite it (not save_for_backward: no version check wanted)
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.save_for_backward(x, weight, attn_l, attn_r, el, er, lse, bias)  # bias: for a double backward
        return out if attention is None else (out, attention)

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        x, weight, attn_l, attn_r, el, er, lse, bias = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            return (None,) * 5 + composed_grads(lambda *t: _composed_layer(ctx, *t), (x, weight, attn_l, attn_r, bias),
                                                (grad_out, grad_attention[0] if grad_attention else None))
        h, ctx.h = ctx.h, None  # consumed: its memory becomes grad_h
        if h is None:  # a second backward through a retained graph: h again from the saved x, weight
            h = torch.mm(x, weight.t()).view(x.shape[0], *attn_l.shape[-2:])
        grad_attn = grad_attention[0] if grad_attention else None
        if grad_out is None:  # only the attention was used
            grad_out = h.new_zeros((ctx.views.num_dst,) + tuple(h.shape[1:]))
        views = ctx.views
        if ctx.path == "native" and compiled.usable(views.num_edges, h):
            backend.record("gat_attention_backward", ctx.path, h.device)
            grad_h, grad_l, grad_r = compiled.gat_backward_halves(
                views.csr("in"), views.csr("out"), h, attn_l, attn_r, el, er, ctx.slope, lse, grad_out, grad_attn,
                ctx.drop, into_feat=True)
        else:
            grad_h, grad_l, grad_r = halves_backward(views, ctx.path, ctx.slope, ctx.drop, h, attn_l, attn_r, el, er,
                                                     lse, grad_out, grad_attn)
        del h  # on the compiled path grad_h is h's buffer; elsewhere h goes now
        gh = grad_h.reshape(x.shape[0], weight.shape[0])  # H * D columns (-1 is ambiguous with 0 rows)
        grad_x = torch.mm(gh, weight) if ctx.needs_input_grad[5] else None
        grad_w = torch.mm(gh.t(), x) if ctx.needs_input_grad[6] else None
        grad_b = None
        if ctx.bias_shape is not None and ctx.needs_input_grad[9]:
            grad_b = grad_out.sum(0).reshape(ctx.bias_shape)
        return (None,) * 5 + (grad_x, grad_w, grad_l, grad_r, grad_b)


def _composed_layer(ctx, x, weight, attn_l, attn_r, bias):
    """(out, attention) of the layer as a differentiable composition (:mod:`.double`)."""
    heads, dim = attn_l.shape[-2:]
    h = torch.mm(x, weight.t()).view(x.shape[0], heads, dim)
    out, attention = composed(ctx.views, ctx.slope, ctx.drop, h, *score_halves(h, attn_l, attn_r, ctx.views.num_dst))
    return (out if bias is None else out + bias.view(1, heads, dim)), attention


def check_layer(views, x, weight, attn_l, attn_r, bias) -> None:
    """``x`` [num_src, F], ``weight`` [H * D, F], ``attn_l``/``attn_r`` [H, D] or [1, H, D], ``bias``
    [H * D] or None, one float dtype, on the graph's device; destinations = the first sources."""
    for name, t in (("x", x), ("weight", weight), ("attn_l", attn_l), ("attn_r", attn_r)) + (
            (("bias", bias),) if bias is not None else ()):
        check_float(name, t, views.device)
        if t.dtype != x.dtype:
            raise ValueError(f"expected {name} in x's dtype {x.dtype} (got {t.dtype}). Fix: {name}.to(x.dtype).")
    if x.dim() != 2 or x.shape[0] != views.num_src:
        raise ValueError(f"expected x of shape [num_src, in_feats] with num_src = {views.num_src} "
                         f"(got {list(x.shape)}). Fix: one feature row per source node.")
    if attn_l.dim() not in (2, 3) or attn_l.shape[-2] < 1 or attn_l.shape[-1] < 1:
        raise ValueError(f"expected attn_l of shape [H, D] or [1, H, D] (got {describe(attn_l)}). "
                         f"Fix: dgl.nn.GATConv's attn_l.")
    heads, dim = attn_l.shape[-2:]
    if tuple(attn_l.shape) not in ((heads, dim), (1, heads, dim)) or attn_r.shape != attn_l.shape:
        raise ValueError(f"expected attn_l and attn_r of one shape [H, D] or [1, H, D] (got {list(attn_l.shape)} "
                         f"and {list(attn_r.shape)}). Fix: dgl.nn.GATConv's attn_l / attn_r.")
    if tuple(weight.shape) != (heads * dim, x.shape[1]):
        raise ValueError(f"expected weight of shape [H * D, in_feats] = [{heads * dim}, {x.shape[1]}] "
                         f"(got {list(weight.shape)}). Fix: dgl.nn.GATConv's fc.weight.")
    if bias is not None and bias.numel() != heads * dim:
        raise ValueError(f"expected bias of {heads * dim} entries (H * D) or None (got {describe(bias)}). "
                         f"Fix: dgl.nn.GATConv's bias.")
    if views.num_dst > views.num_src:
        raise ValueError(f"expected the destinations to be the first sources (num_dst <= num_src) "
                         f"(got num_dst = {views.num_dst}, num_src = {views.num_src}). Fix: use gat_attention.")


@lower_precision
def gat_layer(views, x: torch.Tensor, weight: torch.Tensor, attn_l: torch.Tensor, attn_r: torch.Tensor,
              bias: torch.Tensor | None = None, negative_slope: float = 0.2, dropout: float = 0.0, seed=None, *,
              return_attention: bool = False):
    """``dgl.nn.GATConv``'s projection, attention and bias as one op on ``views`` (a
    :class:`~dgl_accel.core.aggregation.views.GraphViews` whose destinations are its first sources:
    homogeneous, or a block): h = x @ weight.T viewed [num_src, H, D], out[v] = sum over in-edges of
    drop(softmax(leaky_relu(<h[u], attn_l> + <h[v], attn_r>))) h[u], plus ``bias``.  Differentiable in
    x, weight, attn_l, attn_r and bias; ``dropout``/``seed`` and ``return_attention`` as
    :func:`~.gat.gat_attention`.  h never leaves the op, so its backward may reuse h's memory for
    the gradient (the compiled CPU path does: one N x H x D tensor fewer at a step's peak).

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
    path = backend.choose_path(x)  # the native path draws a mask without a seed as DGL's nn.Dropout does
    drop = make_dropout(dropout, seed, attn_l.shape[-2], draw=(views.num_edges, x) if path == "native" else None)
    backend.record("gat_attention", path, x.device)
    return GATLayerFunction.apply(views, path, float(negative_slope), bool(return_attention), drop, x, weight,
                                  attn_l, attn_r, bias)
