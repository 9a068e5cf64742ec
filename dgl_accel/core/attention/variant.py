"""The autograd skeleton shared by the fused attention variants over CSR rows (:mod:`.dot`, :mod:`.gatv2`):
per destination v and head h, out[v, h] = sum over v's in-edges e = (u -> v) of softmax_e(s) x[u, h], with
the score s and the aggregated rows x the variant's own.

A variant is a module of paths (``dot_paths.py``, ``gatv2_paths.py``) with one contract, its inputs
in one order (the first ``scored`` of them are all the score reads) and one float parameter (the dot
product's scale, GATv2's negative slope):

* ``forward_triton(in_csr, *inputs, param)`` -> (out, lse); ``forward_compiled(in_csr, *inputs, param,
  want_attention)`` and ``forward_native(src, dst, num_dst, *inputs, param)`` -> (out, lse, attention);
* ``attention_{triton,compiled}(in_csr, *scored, param, lse)`` and ``attention_native(src, dst, *scored,
  param, lse)`` -> the attention [E, H] in lse's dtype;
* ``edge_scores(src, dst, *scored, param)`` -> the scores [E, H] as differentiable torch ops (the
  composition a double backward differentiates, :mod:`.double`);
* ``backward_{triton,compiled}(in_csr, out_csr, *inputs, param, lse, grad_out, grad_attn)`` and
  ``backward_native(src, dst, ...)`` -> the inputs' gradients.  Each path sums the softmax backward's
  row term c[v, h] = sum over v's in-edges of p_e (<grad_out[v], x[u]> + grad_attn_e) itself, in the
  accumulation dtype from the recomputed p_e (as the fused GAT's delta): taken from the output, rounded
  to fp16/bf16, it broke the flash-attention rule for peaked softmaxes.

Under ``create_graph=True`` the backward differentiates :func:`composed` instead (a double backward).
Saved for backward: the inputs and lse[v, h] (not the output); backward recomputes
p_e = exp(s_e - lse), so nothing of size E x H x D is kept, and nothing of size E x H unless the
attention was asked for.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import torch

from .. import backend
from ..aggregation.scales import acc_dtype
from . import compiled
from .checks import check_float
from .double import attention_composition, composed_grads
from .gat import edges_by_id

__all__ = ["Variant", "attention_on", "VariantAttentionFunction", "variant_attention", "check_node_features",
           "check_dtypes"]


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
    ``paths``: its module of paths; ``scored``: how many of the leading inputs the score reads;
    ``rows``: which input holds the aggregated rows."""
    name: str
    paths: ModuleType
    scored: int
    rows: int


def composed(variant: Variant, views, param: float, *inputs):
    """(out, attention) of ``variant`` as a differentiable composition of torch ops (``paths.edge_scores``,
    a softmax per destination, the weighted sum): what a backward with ``create_graph=True``
    differentiates (:mod:`.double`)."""
    src, dst = edges_by_id(views)
    acc = acc_dtype(inputs[0].dtype)
    scores = variant.paths.edge_scores(src, dst, *(t.to(acc) for t in inputs[:variant.scored]), param)
    return attention_composition(scores, inputs[variant.rows], src, dst, views.num_dst)


def attention_on(variant: Variant, path: str, views, inputs, param: float, lse):
    """The attention [E, H] recomputed from lse on ``path``, in lse's dtype."""
    scored, paths = inputs[:variant.scored], variant.paths
    if path == "triton":
        return paths.attention_triton(views.csr("in"), *scored, param, lse)
    if compiled.usable(views.num_edges, inputs[0]):
        return paths.attention_compiled(views.csr("in"), *scored, param, lse)
    src, dst = edges_by_id(views)
    return paths.attention_native(src, dst, *scored, param, lse)


class VariantAttentionFunction(torch.autograd.Function):
    """A fused attention variant on ``path``; returns ``out`` or ``(out, attention [E, H])``."""

    @staticmethod
    def forward(ctx, variant: Variant, views, path: str, param: float, want_attention: bool, *inputs):
        ctx.set_materialize_grads(False)
        paths, attention = variant.paths, None
        if path == "triton":
            out, lse = paths.forward_triton(views.csr("in"), *inputs, param)
            if want_attention:
                attention = paths.attention_triton(views.csr("in"), *inputs[:variant.scored], param, lse)
        elif compiled.usable(views.num_edges, inputs[0]):  # numba over the in-CSR, nothing of E x H x D
            out, lse, attention = paths.forward_compiled(views.csr("in"), *inputs, param, want_attention)
        else:
            src, dst = edges_by_id(views)
            out, lse, attention = paths.forward_native(src, dst, views.num_dst, *inputs, param)
        ctx.variant, ctx.views, ctx.path, ctx.param = variant, views, path, param
        ctx.out_like = (out.shape, out.dtype)  # a zero grad_out when only the attention was used
        ctx.save_for_backward(*inputs, lse)
        return (out, attention.to(inputs[0].dtype)) if want_attention else out

    @staticmethod
    def backward(ctx, grad_out, *grad_attention):
        *inputs, lse = ctx.saved_tensors
        variant, views, path, param = ctx.variant, ctx.views, ctx.path, ctx.param
        grad_attn = grad_attention[0] if grad_attention else None
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composition (double backward)
            return (None,) * 5 + composed_grads(lambda *t: composed(variant, views, param, *t), inputs,
                                                (grad_out, grad_attn))
        if grad_out is None:  # only the attention was used
            grad_out = torch.zeros(ctx.out_like[0], dtype=ctx.out_like[1], device=lse.device)
        backend.record(f"{variant.name}_backward", path, lse.device)
        if grad_attn is not None:
            grad_attn = grad_attn.to(lse.dtype)
        paths = variant.paths
        if path == "triton":
            grads = paths.backward_triton(views.csr("in"), views.csr("out"), *inputs, param, lse, grad_out,
                                          grad_attn)
        elif compiled.usable(views.num_edges, inputs[0]):
            grads = paths.backward_compiled(views.csr("in"), views.csr("out"), *inputs, param, lse, grad_out,
                                            grad_attn)
        else:
            src, dst = edges_by_id(views)
            grads = paths.backward_native(src, dst, *inputs, param, lse, grad_out, grad_attn)
        return (None, None, None, None, None) + tuple(grads)


def variant_attention(variant: Variant, views, param: float, return_attention: bool, *inputs):
    """Pick the path for ``inputs`` (checked by the caller), count the call, apply the Function."""
    path = backend.choose_path(*inputs)
    backend.record(variant.name, path, inputs[0].device)
    return VariantAttentionFunction.apply(variant, views, path, float(param), bool(return_attention), *inputs)
