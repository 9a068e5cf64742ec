"""Fused GATv2 attention (what ``dgl.nn.GATv2Conv`` computes): for every destination v and head h,

    s_e = sum_d attn[h, d] leaky_relu(fs[u, h, d] + fd[v, h, d]) for every in-edge e = (u -> v)
    out[v, h, :] = sum over v's in-edges of softmax_e(s) * fs[u, h, :]

(GATv2Conv aggregates ``fc_src``'s output, the same ``fs`` that enters the score), in one pass over v's
in-edges (online softmax), fp32 accumulation for half types.  Saved for backward: the inputs, the
output and lse[v, h]; backward recomputes the scores and p_e = exp(s_e - lse[v, h]), so nothing of size
E x H x D is kept (GATv2's score needs fs[u] + fd[v] per edge and feature: DGL stores it), and nothing of
size E x H unless the caller asks for the attention (``return_attention=True``, then differentiable).

Paths (:mod:`.gatv2_paths`): Triton kernels (``kernels/attention_gatv2.py``); on CPU below
``runtime.MIN_WORK`` edges or without numba vectorised torch, else the compiled loops of
``core/jit/attention_gatv2.py`` (a pass over the in-CSR, one over the out-CSR, no atomics).
"""
from __future__ import annotations

import numbers

import torch
from torch.autograd.function import once_differentiable

from .. import backend
from . import compiled
from . import gatv2_paths as paths
from .checks import check_float
from .gat import edges_by_id
from .reference import entry_rows, ref_edge_softmax


def check_gatv2(views, fs, fd, attn, negative_slope) -> None:
    """``fs`` [num_src, H, D], ``fd`` [num_dst, H, D], ``attn`` [H, D] or [1, H, D], one float dtype."""
    device = views.device
    for name, x, rows, what in (("fs", fs, views.num_src, "num_src"), ("fd", fd, views.num_dst, "num_dst")):
        check_float(name, x, device)
        if x.dim() != 3 or x.shape[0] != rows or x.shape[1] < 1 or x.shape[2] < 1:
            raise ValueError(f"expected {name} of shape [{what}, H, D] with {what} = {rows} and H, D >= 1 "
                             f"(got {list(x.shape)}). Fix: {name}.view({what}, num_heads, head_dim).")
    if fd.shape[1:] != fs.shape[1:]:
        raise ValueError(f"expected fd with fs's [H, D] = {list(fs.shape[1:])} (got {list(fd.shape[1:])}). "
                         f"Fix: project source and destination features to the same heads and size.")
    check_float("attn", attn, device)
    heads, dim = fs.shape[1], fs.shape[2]
    if tuple(attn.shape) not in ((heads, dim), (1, heads, dim)):
        raise ValueError(f"expected attn of shape [{heads}, {dim}] or [1, {heads}, {dim}], one vector per head "
                         f"(got {list(attn.shape)}). Fix: pass dgl.nn.GATv2Conv's attn parameter.")
    for name, x in (("fd", fd), ("attn", attn)):
        if x.dtype != fs.dtype:
            raise ValueError(f"expected {name} of fs's dtype {fs.dtype} (got {x.dtype}). Fix: {name}.to(fs.dtype).")
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


def _attention(path: str, views, fs, fd, attn, slope: float, lse):
    """The attention [E, H] recomputed from lse on ``path``, in lse's dtype."""
    if path == "triton":
        return paths.attention_triton(views.csr("in"), fs, fd, attn, slope, lse)
    if compiled.usable(views.num_edges, fs):
        return paths.attention_compiled(views.csr("in"), fs, fd, attn, slope, lse)
    src, dst = edges_by_id(views)
    return paths.attention_native(src, dst, fs, fd, attn, slope, lse)


class GATv2AttentionFunction(torch.autograd.Function):
    """The fused GATv2 attention on ``path``; returns ``out`` or ``(out, attention [E, H])``."""

    @staticmethod
    def forward(ctx, views, path: str, slope: float, want_attention: bool, fs, fd, attn):
        ctx.set_materialize_grads(False)
        attention = None
        if path == "triton":
            out, lse = paths.forward_triton(views.csr("in"), fs, fd, attn, slope)
            if want_attention:
                attention = paths.attention_triton(views.csr("in"), fs, fd, attn, slope, lse)
        elif compiled.usable(views.num_edges, fs):  # numba over the in-CSR, nothing of E x H x D
            out, lse, attention = paths.forward_compiled(views.csr("in"), fs, fd, attn, slope, want_attention)
        else:
            src, dst = edges_by_id(views)
            out, lse, attention = paths.forward_native(src, dst, views.num_dst, fs, fd, attn, slope)
        ctx.views, ctx.path, ctx.slope = views, path, slope
        ctx.save_for_backward(fs, fd, attn, out, lse)
        return (out, attention.to(fs.dtype)) if want_attention else out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, *grad_attention):
        fs, fd, attn, out, lse = ctx.saved_tensors
        views, path, slope = ctx.views, ctx.path, ctx.slope
        grad_attn = grad_attention[0] if grad_attention else None
        if grad_out is None:  # only the attention was used
            grad_out = torch.zeros_like(out)
        backend.record("gatv2_attention_backward", path, out.device)
        acc = lse.dtype
        c = (grad_out.to(acc) * out.to(acc)).sum(-1)  # <grad_out[v], out[v]> = sum_e p_e <grad_out[v], fs[u]>
        if grad_attn is not None:  # the softmax backward's row term: sum over v's in-edges of p_e grad_attn_e
            grad_attn = grad_attn.to(acc)
            c = c.index_add(0, edges_by_id(views)[1], _attention(path, views, fs, fd, attn, slope, lse) * grad_attn)
        if path == "triton":
            grads = paths.backward_triton(views.csr("in"), views.csr("out"), fs, fd, attn, slope, lse, c, grad_out,
                                          grad_attn)
        elif compiled.usable(views.num_edges, fs):
            grads = paths.backward_compiled(views.csr("in"), views.csr("out"), fs, fd, attn, slope, lse, c, grad_out,
                                            grad_attn)
        else:
            src, dst = edges_by_id(views)
            grads = paths.backward_native(src, dst, fs, fd, attn, slope, lse, c, grad_out, grad_attn)
        return (None, None, None, None) + tuple(grads)


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
    path = backend.choose_path(fs, fd, attn)
    backend.record("gatv2_attention", path, fs.device)
    return GATv2AttentionFunction.apply(views, path, float(negative_slope), bool(return_attention), fs, fd,
                                        attn.reshape(fs.shape[1:]))
