"""The autograd skeleton shared by the fused attention ops over CSR rows (:mod:`.gat`, :mod:`.gatv2`,
:mod:`.dot`): per destination v and head h, out[v, h] = sum over v's in-edges e = (u -> v) of
w_e softmax_e(s) x[u, h], with the score s and the aggregated rows x the op's own (w_e = 1 but for
GAT's attention dropout).

An op is a :class:`Variant`: a module of paths (``gat_paths.py``, ``gatv2_paths.py``, ``dot_paths.py``)
with one contract, its inputs in one order (``scored``: the positions of those the score reads) and one
parameter (the dot product's scale, GATv2's negative slope, GAT's (negative slope, dropout) pair):

* ``forward_triton(in_csr, *inputs, param)`` -> (out, lse); ``forward_compiled(in_csr, *inputs, param,
  want_attention)`` and ``forward_native(src, dst, num_dst, *inputs, param)`` -> (out, lse, attention);
* ``attention_triton(in_csr, *scored, param, lse)`` -> the attention [E, H] in lse's dtype, recomputed
  after the Triton forward (the compiled and native forwards return it themselves);
* ``edge_scores(src, dst, *scored, param)`` -> the scores [E, H] as differentiable torch ops (the
  composition a double backward differentiates, :mod:`.double`); with ``Variant.dropout``, also
  ``edge_weights(src, param, dtype)`` -> the weights w_e [E, H] (or None);
* ``backward_{triton,compiled}(in_csr, out_csr, *inputs, param, lse, grad_out, grad_attn)`` (the
  compiled one's ``out_csr`` by in-CSR position where ``Variant.by_position``) and
  ``backward_native(src, dst, ...)`` -> the inputs' gradients.  Each path sums the softmax backward's
  row term c[v, h] = sum over v's in-edges of p_e (<grad_out[v], x[u]> + grad_attn_e) itself, in the
  accumulation dtype from the recomputed p_e: taken from the output, rounded to fp16/bf16, it broke
  the flash-attention rule for peaked softmaxes.

:func:`forward_on` and :func:`backward_on` pick the path's functions (an op's own autograd Functions
call them too: GAT's with the score halves inside, :mod:`.gat`); :class:`VariantAttentionFunction`
is the plain op.  Under ``create_graph=True`` the backward differentiates :func:`composed` instead (a
double backward).  Saved for backward: the inputs and lse[v, h] (not the output); backward recomputes
p_e = exp(s_e - lse), so nothing of size E x H x D is kept, and nothing of size E x H unless the
attention was asked for.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import torch

from .. import backend
from ..aggregation.scales import acc_dtype
from .checks import check_float
from .common import edges_by_id, usable
from .double import attention_composition, composed_grads

__all__ = ["Variant", "forward_on", "backward_on", "VariantAttentionFunction", "variant_attention",
           "check_node_features", "check_dtypes"]


def check_node_features(views, *named) -> None:
    """Each (name, x, "num_src" or "num_dst") a float tensor [rows, H, D] on the graph's device, with
    rows the graph's sources or destinations and H, D >= 1."""
    for name, x, what in named:
        rows = views.num_src if what == "num_src" else views.num_dst
        check_float(name, x, views.device)
        if x.dim() != 3 or x.shape[0] != rows or x.shape[1] < 1 or x.shape[2] < 1:
            raise ValueError(f"expected {name} of shape [{what}, H, D] with {what} = {rows} and H, D >= 1 "
                             f"(got {list(x.shape)}). Fix: {name}.view({what}, num_heads, head_dim).")


def check_dtypes(first: str, x0, *named) -> None:
    """Each (name, x) of the dtype of ``x0`` (named ``first``)."""
    for name, x in named:
        if x.dtype != x0.dtype:
            raise ValueError(f"expected {name} of {first}'s dtype {x0.dtype} (got {x.dtype}). "
                             f"Fix: {name}.to({first}.dtype).")


@dataclass(frozen=True)
class Variant:
    """``name``: the op as :func:`backend.record` counts it (backward: ``name + "_backward"``);
    ``paths``: its module of paths; ``scored``: the positions of the inputs the score reads;
    ``rows``: which input holds the aggregated rows; ``dropout``: whether the paths weight the
    attention after the softmax (``paths.edge_weights``); ``by_position``: whether the compiled
    backward's out-CSR carries each entry's in-CSR position instead of its edge id
    (:meth:`~dgl_accel.core.aggregation.views.GraphViews.out_by_in_position`)."""
    name: str
    paths: ModuleType
    scored: tuple[int, ...]
    rows: int
    dropout: bool = False
    by_position: bool = False


def composed(variant: Variant, views, param, *inputs):
    """(out, attention) of ``variant`` as a differentiable composition of torch ops (``paths.edge_scores``,
    a softmax per destination, the weighted sum): what a backward with ``create_graph=True``
    differentiates (:mod:`.double`)."""
    src, dst = edges_by_id(views)
    acc = acc_dtype(inputs[0].dtype)
    scores = variant.paths.edge_scores(src, dst, *(inputs[i].to(acc) for i in variant.scored), param)
    weight = variant.paths.edge_weights(src, param, acc) if variant.dropout else None
    return attention_composition(scores, inputs[variant.rows], src, dst, views.num_dst, weight)


def forward_on(variant: Variant, views, path: str, param, want_attention: bool, inputs):
    """(out, lse, the attention in the inputs' dtype or None) of ``variant`` on ``path`` (no autograd)."""
    paths, attention = variant.paths, None
    if path == "triton":
        out, lse = paths.forward_triton(views.csr("in"), *inputs, param)
        if want_attention:
            attention = paths.attention_triton(views.csr("in"), *(inputs[i] for i in variant.scored), param, lse)
    elif usable(views.num_edges, inputs[0]):  # numba over the in-CSR, nothing of E x H x D
        out, lse, attention = paths.forward_compiled(views.csr("in"), *inputs, param, want_attention)
    else:
        src, dst = edges_by_id(views)
        out, lse, attention = paths.forward_native(src, dst, views.num_dst, *inputs, param)
    return out, lse, (attention.to(inputs[0].dtype) if want_attention else None)


def backward_on(variant: Variant, views, path: str, param, inputs, lse, grad_out, grad_attn) -> tuple:
    """The gradients of ``inputs`` on ``path`` (counted as ``name_backward``); ``grad_attn`` (the
    returned attention's gradient) may be None."""
    backend.record(f"{variant.name}_backward", path, lse.device)
    if grad_attn is not None:
        grad_attn = grad_attn.to(lse.dtype)
    paths = variant.paths
    if path == "triton":
        return tuple(paths.backward_triton(views.csr("in"), views.csr("out"), *inputs, param, lse, grad_out,
                                           grad_attn))
    if usable(views.num_edges, inputs[0]):
        out_csr = views.out_by_in_position() if variant.by_position else views.csr("out")
        return tuple(paths.backward_compiled(views.csr("in"), out_csr, *inputs, param, lse, grad_out, grad_attn))
    src, dst = edges_by_id(views)
    return tuple(paths.backward_native(src, dst, *inputs, param, lse, grad_out, grad_attn))


class VariantAttentionFunction(torch.autograd.Function):
    """A fused attention op on ``path``; returns ``out`` or ``(out, attention [E, H])``."""

    @staticmethod
    def forward(ctx, variant: Variant, views, path: str, param, want_attention: bool, *inputs):
        ctx.set_materialize_grads(False)
        out, lse, attention = forward_on(variant, views, path, param, want_attention, inputs)
        ctx.variant, ctx.views, ctx.path, ctx.param = variant, views, path, param
        ctx.out_like = (out.shape, out.dtype)  # a zero grad_out when only the attention was used
        ctx.save_for_backward(*inputs, lse)
        return out if attention is None else (out, attention)

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        *inputs, lse = ctx.saved_tensors
        variant, views, param = ctx.variant, ctx.views, ctx.param
        grad_attn = grad_attention[0] if grad_attention else None
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            return (None,) * 5 + composed_grads(lambda *t: composed(variant, views, param, *t), inputs,
                                                (grad_out, grad_attn))
        if grad_out is None:  # only the attention was used
            grad_out = torch.zeros(ctx.out_like[0], dtype=ctx.out_like[1], device=lse.device)
        return (None,) * 5 + backward_on(variant, views, ctx.path, param, inputs, lse, grad_out, grad_attn)


def variant_attention(variant: Variant, views, param, return_attention: bool, *inputs, path: str | None = None):
    """Pick the path for ``inputs`` (checked by the caller) unless given, count the call, apply the Function."""
    path = backend.choose_path(*inputs) if path is None else path
    backend.record(variant.name, path, inputs[0].device)
    return VariantAttentionFunction.apply(variant, views, path, param, bool(return_attention), *inputs)
