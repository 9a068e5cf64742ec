"""Fused GATv2 attention (what ``dgl.nn.GATv2Conv`` computes): for every destination v and head h,

    s_e = sum_d attn[h, d] leaky_relu(fs[u, h, d] + fd[v, h, d]) for every in-edge e = (u -> v)
    out[v, h, :] = sum over v's in-edges of softmax_e(s) * fs[u, h, :]

(GATv2Conv aggregates ``fc_src``'s output, the same ``fs`` that enters the score), in one pass over v's
in-edges (online softmax), fp32 accumulation for half types.  Saved for backward: the inputs and
lse[v, h] (not the output); backward recomputes the scores and p_e = exp(s_e - lse[v, h]), so nothing of size
E x H x D is kept (GATv2's score needs fs[u] + fd[v] per edge and feature: DGL stores it), and nothing of
size E x H unless the caller asks for the attention (``return_attention=True``, then differentiable).

The autograd skeleton is :mod:`.variant`'s (shared with GAT and the dot product).  Paths (:mod:`.gatv2_paths`):
Triton kernels (``kernels/gatv2.py``, ``kernels/gatv2_heads.py``); on CPU below ``runtime.MIN_WORK`` edges or
without numba vectorised torch, else the compiled loops of ``core/jit/gatv2.py`` (a pass over the
in-CSR, one over the out-CSR, no atomics).
"""
from __future__ import annotations

import numbers

import torch

from ..autocast import lower_precision
from . import gatv2_paths as paths
from .checks import check_float
from .reference import entry_rows, ref_edge_softmax
from .variant import Variant, check_dtypes, check_node_features, variant_attention


def check_gatv2(views, fs, fd, attn, negative_slope) -> None:
    """``fs`` [num_src, H, D], ``fd`` [num_dst, H, D], ``attn`` [H, D] or [1, H, D], one float dtype."""
    check_node_features(views, ("fs", fs, "num_src"), ("fd", fd, "num_dst"))
    if fd.shape[1:] != fs.shape[1:]:
        raise ValueError(f"expected fd with fs's [H, D] = {list(fs.shape[1:])} (got {list(fd.shape[1:])}). "
                         f"Fix: project source and destination features to the same heads and size.")
    check_float("attn", attn, views.device)
    heads, dim = fs.shape[1], fs.shape[2]
    if tuple(attn.shape) not in ((heads, dim), (1, heads, dim)):
        raise ValueError(f"expected attn of shape [{heads}, {dim}] or [1, {heads}, {dim}], one vector per head "
                         f"(got {list(attn.shape)}). Fix: pass dgl.nn.GATv2Conv's attn parameter.")
    check_dtypes("fs", fs, ("fd", fd), ("attn", attn))
    if not isinstance(negative_slope, numbers.Real) or isinstance(negative_slope, bool) or negative_slope < 0:
        raise ValueError(f"expected negative_slope to be a real number >= 0 (got {negative_slope!r}). "
                         f"Fix: negative_slope=0.2, as dgl.nn.GATv2Conv.")


def ref_gatv2_attention(in_csr, fs, fd, attn, negative_slope: float = 0.2):
    """The unfused composition (for tests): (out, attention [E, H]) with attention =
    edge_softmax(sum_d attn leaky_relu(fs[u] + fd[v])) over each destination's in-edges, inputs' dtype."""
    src = torch.zeros(in_csr.num_edges, dtype=torch.int64, device=fs.device)
    dst = torch.zeros_like(src)
    eids = in_csr.eids.long()
    src[eids], dst[eids] = in_csr.indices.long(), entry_rows(in_csr)
    z = torch.nn.functional.leaky_relu(fs[src] + fd[dst], negative_slope)
    a = ref_edge_softmax(in_csr, (z * attn.reshape(fs.shape[1:])).sum(-1))
    out = torch.zeros((in_csr.num_rows,) + tuple(fs.shape[1:]), dtype=fs.dtype, device=fs.device)
    return out.index_add(0, dst, a[:, :, None] * fs[src]), a


GATV2 = Variant("gatv2_attention", paths, scored=(0, 1, 2), rows=0, by_position=True)


@lower_precision
def gatv2_attention(views, fs: torch.Tensor, fd: torch.Tensor, attn: torch.Tensor, negative_slope: float = 0.2, *,
                    return_attention: bool = False):
    """GATv2's attention aggregation into the destinations of ``views`` (a
    :class:`~dgl_accel.core.aggregation.views.GraphViews`), fused; differentiable in ``fs``, ``fd``, ``attn``.

    ``fs`` [num_src, H, D] (source features: scored and aggregated), ``fd`` [num_dst, H, D]
    (destination features, scored only), ``attn`` [H, D] or [1, H, D]; one float dtype (half types
    accumulate in fp32).  Returns ``out`` [num_dst, H, D] (zeros for a destination without in-edges),
    and with ``return_attention=True`` also the attention [E, H] in edge-id order.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1]), torch.tensor([2, 2]), num_nodes=3)
    >>> fs = torch.tensor([[[1.0]], [[3.0]], [[5.0]]])
    >>> out, a = gatv2_attention(g, fs, torch.zeros(3, 1, 1), torch.zeros(1, 1), return_attention=True)
    >>> out.flatten().tolist(), a.flatten().tolist()
    ([0.0, 0.0, 2.0], [0.5, 0.5])
    """
    check_gatv2(views, fs, fd, attn, negative_slope)
    if getattr(views, "traced", False) and not return_attention:  # the custom op (core.library), for torch.compile
        return views.attention("gatv2_attention", negative_slope, fs, fd, attn)
    return variant_attention(GATV2, views, float(negative_slope), return_attention, fs, fd,
                             attn.reshape(fs.shape[1:]))
