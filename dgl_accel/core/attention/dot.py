"""Fused dot-product attention (what ``dgl.nn.DotGatConv`` computes): for every destination v and head h,

    out[v, h, :] = sum over in-edges e = (u -> v) of softmax_e(scale <q[v, h], k[u, h]>) * val[u, h, :]

in one pass over v's in-edges (online softmax), fp32 accumulation for half types.  Saved for backward:
the inputs and lse[v, h] (not the output); backward recomputes p_e = exp(s_e - lse[v, h]), so nothing of size
E x H x D is kept, and nothing of size E x H unless the caller asks for the attention
(``return_attention=True``, then differentiable too).  DotGatConv divides the dot product by
sqrt(out_feats): ``scale`` defaults to 1 / sqrt(key dim).

The autograd skeleton is :mod:`.variant`'s (shared with GAT and GATv2).  Paths (:mod:`.dot_paths`):
Triton kernels (``kernels/dot.py``, ``kernels/dot_heads.py``); on CPU below ``runtime.MIN_WORK`` edges or
without numba vectorised torch, else the compiled loops of ``core/jit/dot.py`` (a pass over the
in-CSR, one over the out-CSR, no atomics).
"""
from __future__ import annotations

import math
import numbers

import torch

from ..aggregation.checks import describe
from ..autocast import lower_precision
from . import dot_paths as paths
from .reference import entry_rows, ref_edge_softmax
from .variant import Variant, check_dtypes, check_node_features, variant_attention


def check_dot(views, q, k, val, scale) -> None:
    """``q`` [num_dst, H, DK], ``k`` [num_src, H, DK], ``val`` [num_src, H, DV], one float dtype."""
    check_node_features(views, ("q", q, "num_dst"), ("k", k, "num_src"), ("val", val, "num_src"))
    check_dtypes("q", q, ("k", k), ("val", val))
    if k.shape[1:] != q.shape[1:]:
        raise ValueError(f"expected k with q's heads and key dim {list(q.shape[1:])} (got {list(k.shape[1:])}). "
                         f"Fix: project q and k to the same [H, D].")
    if val.shape[1] != q.shape[1]:
        raise ValueError(f"expected val with q's {q.shape[1]} heads (got {val.shape[1]}). "
                         f"Fix: val.view(num_src, {q.shape[1]}, -1).")
    if scale is not None and (not isinstance(scale, numbers.Real) or isinstance(scale, bool)
                              or not math.isfinite(scale)):
        raise ValueError(f"expected scale to be None or a finite real number (got {describe(scale)}). "
                         f"Fix: scale=None (1 / sqrt(key dim), as dgl.nn.DotGatConv).")


def ref_dot_attention(in_csr, q, k, val, scale=None):
    """The unfused composition (for tests): (out, attention [E, H]) with
    attention = edge_softmax(scale <q[v], k[u]>) over each destination's in-edges, in the inputs' dtype."""
    scale = 1.0 / math.sqrt(q.shape[2]) if scale is None else scale
    src = torch.zeros(in_csr.num_edges, dtype=torch.int64, device=q.device)
    dst = torch.zeros_like(src)
    eids = in_csr.eids.long()
    src[eids], dst[eids] = in_csr.indices.long(), entry_rows(in_csr)
    a = ref_edge_softmax(in_csr, (q[dst] * k[src]).sum(-1) * scale)
    out = torch.zeros((in_csr.num_rows,) + tuple(val.shape[1:]), dtype=val.dtype, device=val.device)
    return out.index_add(0, dst, a[:, :, None] * val[src]), a


DOT = Variant("dot_attention", paths, scored=(0, 1), rows=2, by_position=True)


@lower_precision
def dot_attention(views, q: torch.Tensor, k: torch.Tensor, val: torch.Tensor, scale: float | None = None, *,
                  return_attention: bool = False):
    """Dot-product attention aggregated into the destinations of ``views`` (a
    :class:`~dgl_accel.core.aggregation.views.GraphViews`), fused; differentiable in ``q``, ``k``, ``val``.

    ``q`` [num_dst, H, DK] (destination queries), ``k`` [num_src, H, DK] (source keys), ``val``
    [num_src, H, DV] (source values); one float dtype (half types accumulate in fp32).  ``scale``
    multiplies the dot products (default 1 / sqrt(DK), as ``dgl.nn.DotGatConv``).  Returns ``out``
    [num_dst, H, DV] (zeros for a destination without in-edges), and with ``return_attention=True``
    also the attention [E, H] in edge-id order.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1]), torch.tensor([2, 2]), num_nodes=3)
    >>> x = torch.tensor([[[1.0]], [[3.0]], [[0.0]]])
    >>> out, a = dot_attention(g, x, x, x, return_attention=True)
    >>> out.flatten().tolist(), a.flatten().tolist()
    ([0.0, 0.0, 2.0], [0.5, 0.5])
    """
    check_dot(views, q, k, val, scale)
    scale = 1.0 / math.sqrt(q.shape[2]) if scale is None else float(scale)
    if getattr(views, "traced", False) and not return_attention:  # the custom op (core.library), for torch.compile
        return views.attention("dot_attention", scale, q, k, val)
    return variant_attention(DOT, views, scale, return_attention, q, k, val)
