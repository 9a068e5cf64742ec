"""The native CPU path of the attention ops: vectorised torch over edges in edge-id order, with
the row (normalisation group) of every edge as an index: segment max by ``scatter_reduce('amax')``,
exp, segment sum by ``index_add``; fp32 accumulation for half types.  The backward helpers are
differentiable torch ops (the edge-softmax backward also serves a double backward); the forward
steps work in place (they run inside autograd Functions' forward only)."""
from __future__ import annotations

import weakref

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from .reference import entry_rows

# Structure -> its edge_groups: views are cached by their owner (the DGL adapter, TensorGraph) and
# reused every layer and epoch, and building the groups cost as much as the segment max.
_groups: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def edge_groups(rows: Structure) -> torch.Tensor:
    """The row of every edge, in edge-id order (int64), cached per view."""
    group = _groups.get(rows)
    if group is None:
        group = torch.empty(rows.num_edges, dtype=torch.int64, device=rows.indptr.device)
        group[rows.eids.long()] = entry_rows(rows)
        _groups[rows] = group
    return group


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
    """a * (grad - sum over the group of a * grad): the softmax backward from its output ``a`` [E, H]."""
    ag = a * grad
    total = torch.zeros((num_groups, a.shape[1]), dtype=ag.dtype, device=ag.device).index_add(0, group, ag)
    return ag - a * total.index_select(0, group)


def edge_softmax_native(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """Edge softmax of ``score`` [E, H] over the rows of ``rows``, in score's dtype."""
    a, _, _ = segment_softmax(score.to(acc_dtype(score.dtype)), edge_groups(rows), rows.num_rows)
    return a.to(score.dtype)


def edge_softmax_backward_native(rows: Structure, a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    acc = acc_dtype(a.dtype)
    return segment_softmax_backward(a.to(acc), grad.to(acc), edge_groups(rows), rows.num_rows).to(a.dtype)


# ------------------------------------------------------------------ fused GAT, native path
def leaky(x: torch.Tensor, slope: float) -> torch.Tensor:
    return torch.where(x > 0, x, x * slope)


def gat_scores(src, dst, el, er, slope: float):
    """(raw scores el[u] + er[v], leaky_relu of them), [E, H] in el's dtype."""
    raw = el.index_select(0, src) + er.index_select(0, dst)
    return raw, leaky(raw, slope)


def gat_forward_native(src, dst, num_dst: int, feat, el, er, slope: float, weight=None):
    """(out [num_dst, H, D] in feat's dtype, lse [num_dst, H] in the accumulation dtype, attention
    [E, H] in the accumulation dtype, times the dropout ``weight`` [E, H] if given);
    ``src``/``dst`` int64 in edge-id order."""
    acc = acc_dtype(feat.dtype)
    _, s = gat_scores(src, dst, el.to(acc), er.to(acc), slope)
    a, mx, den = segment_softmax(s, dst, num_dst)
    if weight is not None:
        a = a.mul_(weight)
    out = torch.zeros((num_dst,) + tuple(feat.shape[1:]), dtype=acc, device=feat.device)
    out.index_add_(0, dst, a[:, :, None] * feat.to(acc).index_select(0, src))
    return out.to(feat.dtype), mx + torch.log(den), a


def gat_attention_from_lse(src, dst, el, er, slope: float, lse):
    """p_e = exp(s_e - lse[v]) recomputed from the saved normalisers, [E, H] in lse's dtype."""
    raw, s = gat_scores(src, dst, el.to(lse.dtype), er.to(lse.dtype), slope)
    return raw, torch.exp(s - lse.index_select(0, dst))


def gat_backward_native(src, dst, feat, el, er, slope: float, lse, grad_out, grad_attn, weight=None):
    """(grad_feat, grad_el, grad_er) of the fused GAT op, recomputing the attention from ``lse``;
    ``grad_attn`` [E, H] (or None) is the gradient of the returned attention, ``weight`` [E, H]
    (or None) the dropout weights.  With g_e = w_e (<grad_out[v], feat[u]> + grad_attn[e]):
    grad_s_e = p_e (g_e - sum over v's in-edges of p g), the softmax backward."""
    acc = lse.dtype
    raw, p = gat_attention_from_lse(src, dst, el, er, slope, lse)
    go, f = grad_out.to(acc), feat.to(acc)
    g = (go.index_select(0, dst) * f.index_select(0, src)).sum(-1)
    if grad_attn is not None:
        g = g + grad_attn.to(acc)
    pw = p if weight is None else p * weight
    if weight is not None:
        g = g * weight
    delta = torch.zeros(lse.shape, dtype=acc, device=lse.device).index_add_(0, dst, p * g)
    gs = p * (g - delta.index_select(0, dst))
    gsl = torch.where(raw > 0, gs, gs * slope)
    grad_el = torch.zeros(el.shape[0], el.shape[1], dtype=acc, device=el.device).index_add_(0, src, gsl)
    grad_er = torch.zeros(er.shape[0], er.shape[1], dtype=acc, device=er.device).index_add_(0, dst, gsl)
    grad_feat = torch.zeros(feat.shape, dtype=acc, device=feat.device)
    grad_feat.index_add_(0, src, pw[:, :, None] * go.index_select(0, dst))
    return grad_feat.to(feat.dtype), grad_el.to(el.dtype), grad_er.to(er.dtype)
