"""The three paths of the fused GATv2 attention (:mod:`.gatv2`) under :mod:`.variant`'s contract:

* native: vectorised torch over edges in edge-id order (small graphs; it materialises E x H x D
  tensors inside one call, as the native GAT path does);
* compiled: the numba loops of :mod:`dgl_accel.core.jit.gatv2` (one pass per CSR row);
* triton: the kernels of ``kernels/gatv2_heads.py`` (a program per row covering every
  head) where the heads and width fit its tiles, else ``kernels/gatv2.py``'s (a program per
  row, head and feature block); compiled on CUDA, interpreted on CPU.

Forward: (out [num_dst, H, D] in fs's dtype, lse [num_dst, H] in the accumulation dtype).  Backward
sums the row term c [num_dst, H] = sum over v's in-edges of p_e t_e, t_e = <grad_out[v], fs[u]>
(+ grad_attn_e when the attention was returned and used), in the accumulation dtype from the
recomputed p_e, and returns (grad_fs, grad_fd, grad_attn [H, D]) in the inputs' dtypes.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..jit import gatv2 as loops
from ..launch import kernel_module, triton_kernel
from .common import all_heads, as_array, csr_arrays, leaky, row_terms, scalar
from .edge_softmax_paths import segment_softmax


# ------------------------------------------------------------------ native (vectorised torch)
def gatv2_scores(src, dst, fs, fd, attn, slope: float):
    """(z = fs[src] + fd[dst] [E, H, D], s = sum_d attn leaky(z) [E, H]) in fs's dtype."""
    z = fs.index_select(0, src) + fd.index_select(0, dst)
    return z, (leaky(z, slope) * attn).sum(-1)


def edge_scores(src, dst, fs, fd, attn, slope: float):
    """s [E, H] of :func:`gatv2_scores` (the variant contract's name, :mod:`.variant`)."""
    return gatv2_scores(src, dst, fs, fd, attn, slope)[1]


def forward_native(src, dst, num_dst: int, fs, fd, attn, slope: float):
    """(out, lse, attention [E, H] in the accumulation dtype); ``src``/``dst`` int64, edge-id order."""
    acc = acc_dtype(fs.dtype)
    fsa = fs.to(acc)
    a, mx, den = segment_softmax(gatv2_scores(src, dst, fsa, fd.to(acc), attn.to(acc), slope)[1], dst, num_dst)
    out = torch.zeros((num_dst,) + tuple(fs.shape[1:]), dtype=acc, device=fs.device)
    out.index_add_(0, dst, a[:, :, None] * fsa.index_select(0, src))
    return out.to(fs.dtype), mx + torch.log(den), a


def backward_native(src, dst, fs, fd, attn, slope: float, lse, grad_out, grad_attn):
    acc = lse.dtype
    fsa, fda, wa, go = (t.to(acc) for t in (fs, fd, attn, grad_out))
    z, s = gatv2_scores(src, dst, fsa, fda, wa, slope)
    p = torch.exp(s - lse.index_select(0, dst))
    go_e = go.index_select(0, dst)
    t = (go_e * fsa.index_select(0, src)).sum(-1)
    if grad_attn is not None:
        t = t + grad_attn.to(acc)
    ds = row_terms(dst, lse, p, t)[:, :, None]
    gz = ds * wa
    gz = torch.where(z > 0, gz, gz * slope)
    grad_fd = torch.zeros_like(fda).index_add_(0, dst, gz)
    grad_fs = torch.zeros_like(fsa).index_add_(0, src, p[:, :, None] * go_e + gz)
    grad_w = (ds * leaky(z, slope)).sum(0)
    return grad_fs.to(fs.dtype), grad_fd.to(fd.dtype), grad_w.to(attn.dtype)


# ------------------------------------------------------------------ compiled (numba)
def forward_compiled(in_csr: Structure, fs, fd, attn, slope: float, want_attention: bool):
    acc = acc_dtype(fs.dtype)
    indptr, indices, eids = csr_arrays(in_csr)
    fsa, fda, wa = as_array(fs, acc), as_array(fd, acc), as_array(attn, acc)
    out, lse = loops.gatv2_forward(indptr, indices, fsa, fda, wa, slope)
    a = None
    if want_attention:
        a = torch.from_numpy(loops.gatv2_attention(indptr, indices, eids, fsa, fda, wa, slope, lse))
    return torch.from_numpy(out).to(fs.dtype), torch.from_numpy(lse), a


def backward_compiled(in_csr: Structure, out_csr: Structure, fs, fd, attn, slope: float, lse, grad_out, grad_attn):
    acc = lse.dtype
    grads = loops.gatv2_backward(csr_arrays(in_csr), csr_arrays(out_csr), as_array(fs, acc), as_array(fd, acc),
                                 as_array(attn, acc), slope, as_array(lse, acc), as_array(grad_out, acc),
                                 None if grad_attn is None else as_array(grad_attn, acc))
    return tuple(torch.from_numpy(g).to(t.dtype) for g, t in zip(grads, (fs, fd, attn)))


# ------------------------------------------------------------------ triton
def _config(dim: int, kernel: str, dtype: torch.dtype):
    """(launch options as registered in ``kernels/gatv2.py``, the feature tile)."""
    mod = kernel_module("gatv2")
    block_d = mod.feature_tile(dim)
    cap = mod.maxnreg(kernel, block_d, dtype == torch.float64)
    return {"BLOCK_E": mod.BLOCK_E, "BLOCK_D": block_d, "num_warps": mod.num_warps(block_d),
            **({"maxnreg": cap} if cap else {})}, block_d


def _inputs(fs, fd, attn):
    """Contiguous, attn in fs's dtype (the kernels read one element type)."""
    return fs.contiguous(), fd.contiguous(), attn.to(fs.dtype).contiguous()


def forward_triton(in_csr: Structure, fs, fd, attn, slope: float):
    fs, fd, attn = _inputs(fs, fd, attn)
    num_dst, (_, heads, dim) = in_csr.num_rows, fs.shape
    acc = acc_dtype(fs.dtype)
    out = torch.empty((num_dst, heads, dim), dtype=fs.dtype, device=fs.device)
    lse = torch.empty((num_dst, heads), dtype=acc, device=fs.device)
    tile = kernel_module("gatv2_heads").tiles(heads, dim)
    if num_dst and tile:
        all_heads("gatv2_heads", "_gatv2_heads_fwd_kernel", tile, in_csr, fs, fd, attn,
                  scalar(slope, acc, fs.device), out, lse, heads, dim, fp64=acc == torch.float64)
    elif num_dst:  # heads, dim >= 1 (checks)
        cfg, block_d = _config(dim, "_gatv2_fwd_kernel", fs.dtype)
        kernel = triton_kernel("gatv2", "_gatv2_fwd_kernel", fs.device)
        kernel[(num_dst, heads, -(-dim // block_d))](in_csr.indptr, in_csr.indices, fs, fd, attn,
                                                     scalar(slope, acc, fs.device), out, lse, heads, dim, **cfg)
    return out, lse


def attention_triton(in_csr: Structure, fs, fd, attn, slope: float, lse) -> torch.Tensor:
    """The attention [E, H] in lse's dtype."""
    fs, fd, attn = _inputs(fs, fd, attn)
    heads, dim = fs.shape[1], fs.shape[2]
    a = torch.empty((in_csr.num_edges, heads), dtype=lse.dtype, device=fs.device)
    if in_csr.num_rows and in_csr.num_edges:
        cfg, _ = _config(dim, "_gatv2_attn_kernel", fs.dtype)
        kernel = triton_kernel("gatv2", "_gatv2_attn_kernel", fs.device)
        kernel[(in_csr.num_rows, heads)](in_csr.indptr, in_csr.indices, in_csr.eids, fs, fd, attn,
                                         scalar(slope, lse.dtype, fs.device), lse, a, heads, dim, **cfg)
    return a


def backward_triton(in_csr: Structure, out_csr: Structure, fs, fd, attn, slope: float, lse, grad_out, grad_attn):
    acc = lse.dtype
    attn_dtype = attn.dtype
    fs, fd, attn = _inputs(fs, fd, attn)
    grad_out = grad_out.to(fs.dtype).contiguous()
    (num_src, heads, dim), num_dst = fs.shape, fd.shape[0]
    c = torch.zeros((num_dst, heads), dtype=acc, device=fs.device)  # the row terms: the dst kernel writes them
    if grad_attn is None:
        ga, ga_on = torch.zeros(1, dtype=acc, device=fs.device), 0
    else:
        ga, ga_on = grad_attn.to(acc).contiguous(), 1
    grad_fs, grad_fd = torch.empty_like(fs), torch.empty_like(fd)
    grad_w = torch.empty((num_dst, heads, dim), dtype=acc, device=fs.device)  # per destination, summed below
    slope_t = scalar(slope, acc, fs.device)
    tile = kernel_module("gatv2_heads").tiles(heads, dim)
    if tile:  # every head of a row in one program
        args = (fs, fd, attn, slope_t, lse, c, grad_out, ga, ga_on)
        if num_dst:
            all_heads("gatv2_heads", "_gatv2_heads_bwd_dst_kernel", tile, in_csr, in_csr.eids, *args,
                      grad_fd, grad_w, heads, dim, fp64=acc == torch.float64)
        if num_src:
            all_heads("gatv2_heads", "_gatv2_heads_bwd_src_kernel", tile, out_csr, out_csr.eids, *args,
                      grad_fs, heads, dim, fp64=acc == torch.float64)
        return grad_fs, grad_fd, grad_w.sum(0).to(attn_dtype)
    cfg, block_d = _config(dim, "_gatv2_bwd_dst_kernel", fs.dtype)
    blocks = -(-dim // block_d)
    if num_dst:
        kernel = triton_kernel("gatv2", "_gatv2_bwd_dst_kernel", fs.device)
        kernel[(num_dst, heads, blocks)](in_csr.indptr, in_csr.indices, in_csr.eids, fs, fd, attn, slope_t, lse, c,
                                         grad_out, ga, ga_on, grad_fd, grad_w, heads, dim, **cfg)
    if num_src:
        cfg, _ = _config(dim, "_gatv2_bwd_src_kernel", fs.dtype)
        kernel = triton_kernel("gatv2", "_gatv2_bwd_src_kernel", fs.device)
        kernel[(num_src, heads, blocks)](out_csr.indptr, out_csr.indices, out_csr.eids, fs, fd, attn, slope_t, lse, c,
                                         grad_out, ga, ga_on, grad_fs, heads, dim, **cfg)
    return grad_fs, grad_fd, grad_w.sum(0).to(attn_dtype)
