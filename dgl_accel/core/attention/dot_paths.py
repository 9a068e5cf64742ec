"""The three paths of the fused dot-product attention (:mod:`.dot`) under :mod:`.variant`'s contract:

* native: vectorised torch over edges in edge-id order (small graphs; it materialises E x H x D
  products inside one call, as the native GAT path does);
* compiled: the numba loops of :mod:`dgl_accel.core.jit.dot` (one pass per CSR row,
  nothing E-sized but the attention when asked for);
* triton: the kernels of ``kernels/dot_heads.py`` (a program per row covering every head)
  where the heads and widths fit its tiles, else ``kernels/dot.py``'s (a program per row,
  head and feature block); compiled on CUDA, interpreted on CPU.

Forward: (out [num_dst, H, DV] in val's dtype, lse [num_dst, H] in the accumulation dtype).  Backward
sums the row term c [num_dst, H] = sum over v's in-edges of p_e t_e, t_e = <grad_out[v], val[u]>
(+ grad_attn_e when the attention was returned and used), in the accumulation dtype from the
recomputed p_e (not from the output rounded to the input dtype), and returns (grad_q, grad_k, grad_val)
in the inputs' dtypes.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..jit import dot as loops
from ..launch import kernel_module, triton_kernel
from .common import all_heads, as_array, csr_arrays, row_terms, scalar
from .edge_softmax_paths import segment_softmax


# ------------------------------------------------------------------ native (vectorised torch)
def dot_scores(src, dst, q, k, scale: float) -> torch.Tensor:
    """s_e = scale <q[dst_e], k[src_e]>, [E, H] in q's dtype."""
    return (q.index_select(0, dst) * k.index_select(0, src)).sum(-1) * scale


edge_scores = dot_scores  # the variant contract's name (:mod:`.variant`)


def forward_native(src, dst, num_dst: int, q, k, val, scale: float):
    """(out, lse, attention [E, H] in the accumulation dtype); ``src``/``dst`` int64, edge-id order."""
    acc = acc_dtype(q.dtype)
    a, mx, den = segment_softmax(dot_scores(src, dst, q.to(acc), k.to(acc), scale), dst, num_dst)
    out = torch.zeros((num_dst,) + tuple(val.shape[1:]), dtype=acc, device=val.device)
    out.index_add_(0, dst, a[:, :, None] * val.to(acc).index_select(0, src))
    return out.to(val.dtype), mx + torch.log(den), a


def attention_native(src, dst, q, k, scale: float, lse) -> torch.Tensor:
    """p_e = exp(s_e - lse[v]), [E, H] in lse's dtype."""
    return torch.exp(dot_scores(src, dst, q.to(lse.dtype), k.to(lse.dtype), scale) - lse.index_select(0, dst))


def backward_native(src, dst, q, k, val, scale: float, lse, grad_out, grad_attn):
    acc = lse.dtype
    qa, ka, va, go = (t.to(acc) for t in (q, k, val, grad_out))
    p = attention_native(src, dst, qa, ka, scale, lse)
    t = (go.index_select(0, dst) * va.index_select(0, src)).sum(-1)
    if grad_attn is not None:
        t = t + grad_attn.to(acc)
    ds = (row_terms(dst, lse, p, t) * scale)[:, :, None]
    grad_q = torch.zeros_like(qa).index_add_(0, dst, ds * ka.index_select(0, src))
    grad_k = torch.zeros_like(ka).index_add_(0, src, ds * qa.index_select(0, dst))
    grad_val = torch.zeros_like(va).index_add_(0, src, p[:, :, None] * go.index_select(0, dst))
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_val.to(val.dtype)


# ------------------------------------------------------------------ compiled (numba)
def forward_compiled(in_csr: Structure, q, k, val, scale: float, want_attention: bool):
    """(out, lse, attention or None), the attention in the accumulation dtype."""
    acc = acc_dtype(q.dtype)
    indptr, indices, eids = csr_arrays(in_csr)
    qa, ka = as_array(q, acc), as_array(k, acc)
    out, lse = loops.dot_forward(indptr, indices, qa, ka, as_array(val, acc), scale)
    a = torch.from_numpy(loops.dot_attention(indptr, indices, eids, qa, ka, scale, lse)) if want_attention else None
    return torch.from_numpy(out).to(val.dtype), torch.from_numpy(lse), a


def backward_compiled(in_csr: Structure, out_csr: Structure, q, k, val, scale: float, lse, grad_out, grad_attn):
    acc = lse.dtype
    grads = loops.dot_backward(csr_arrays(in_csr), csr_arrays(out_csr), as_array(q, acc), as_array(k, acc),
                               as_array(val, acc), scale, as_array(lse, acc), as_array(grad_out, acc),
                               None if grad_attn is None else as_array(grad_attn, acc))
    return tuple(torch.from_numpy(g).to(t.dtype) for g, t in zip(grads, (q, k, val)))


# ------------------------------------------------------------------ triton
def _config(dim: int, kernel: str, dtype: torch.dtype):
    mod = kernel_module("dot")
    block_d = mod.feature_tile(dim)
    warps = mod.num_warps(block_d, kernel, dtype == torch.float64)
    return {"BLOCK_E": mod.BLOCK_E, "BLOCK_D": block_d, "num_warps": warps}, block_d


def forward_triton(in_csr: Structure, q, k, val, scale: float):
    q, k, val = q.contiguous(), k.contiguous(), val.contiguous()
    num_dst, (_, heads, key_dim), val_dim = in_csr.num_rows, q.shape, val.shape[2]
    acc = acc_dtype(q.dtype)
    out = torch.empty((num_dst, heads, val_dim), dtype=val.dtype, device=val.device)
    lse = torch.empty((num_dst, heads), dtype=acc, device=val.device)
    tile = kernel_module("dot_heads").tiles(heads, max(key_dim, val_dim))
    if num_dst and tile:
        all_heads("dot_heads", "_dot_heads_fwd_kernel", tile, in_csr, q, k, val, scalar(scale, acc, q.device),
                  out, lse, heads, key_dim, val_dim, fp64=acc == torch.float64)
    elif num_dst:  # heads and dims >= 1 (checks)
        cfg, block_d = _config(max(key_dim, val_dim), "_dot_fwd_kernel", q.dtype)
        kernel = triton_kernel("dot", "_dot_fwd_kernel", q.device)
        kernel[(num_dst, heads, -(-val_dim // block_d))](in_csr.indptr, in_csr.indices, q, k, val,
                                                         scalar(scale, acc, q.device), out, lse, heads, key_dim,
                                                         val_dim, **cfg)
    return out, lse


def attention_triton(in_csr: Structure, q, k, scale: float, lse) -> torch.Tensor:
    """The attention [E, H] in lse's dtype."""
    q, k = q.contiguous(), k.contiguous()
    heads, key_dim = q.shape[1], q.shape[2]
    a = torch.empty((in_csr.num_edges, heads), dtype=lse.dtype, device=q.device)
    if in_csr.num_rows and in_csr.num_edges:
        cfg, _ = _config(key_dim, "_dot_attn_kernel", q.dtype)
        kernel = triton_kernel("dot", "_dot_attn_kernel", q.device)
        kernel[(in_csr.num_rows, heads)](in_csr.indptr, in_csr.indices, in_csr.eids, q, k,
                                         scalar(scale, lse.dtype, q.device), lse, a, heads, key_dim, **cfg)
    return a


def backward_triton(in_csr: Structure, out_csr: Structure, q, k, val, scale: float, lse, grad_out, grad_attn):
    acc = lse.dtype
    q, k, val = q.contiguous(), k.contiguous(), val.contiguous()
    grad_out = grad_out.to(val.dtype).contiguous()
    (num_dst, heads, key_dim), num_src, val_dim = q.shape, k.shape[0], val.shape[2]
    c = torch.zeros((num_dst, heads), dtype=acc, device=q.device)  # the row terms: the dst kernel writes them
    if grad_attn is None:
        ga, ga_on = torch.zeros(1, dtype=acc, device=q.device), 0
    else:
        ga, ga_on = grad_attn.to(acc).contiguous(), 1
    grad_q, grad_k, grad_val = torch.empty_like(q), torch.empty_like(k), torch.empty_like(val)
    scale_t = scalar(scale, acc, q.device)
    tile = kernel_module("dot_heads").tiles(heads, max(key_dim, val_dim))
    if tile:  # every head of a row in one program
        args = (q, k, val, scale_t, lse, c, grad_out, ga, ga_on)
        if num_dst:
            all_heads("dot_heads", "_dot_heads_bwd_dst_kernel", tile, in_csr, in_csr.eids, *args, grad_q,
                      heads, key_dim, val_dim, fp64=acc == torch.float64)
        if num_src:
            all_heads("dot_heads", "_dot_heads_bwd_src_kernel", tile, out_csr, out_csr.eids, *args, grad_k,
                      grad_val, heads, key_dim, val_dim, fp64=acc == torch.float64)
        return grad_q, grad_k, grad_val
    cfg, block_d = _config(max(key_dim, val_dim), "_dot_bwd", q.dtype)
    if num_dst:
        kernel = triton_kernel("dot", "_dot_bwd_dst_kernel", q.device)
        kernel[(num_dst, heads, -(-key_dim // block_d))](in_csr.indptr, in_csr.indices, in_csr.eids, q, k, val,
                                                         scale_t, lse, c, grad_out, ga, ga_on, grad_q, heads,
                                                         key_dim, val_dim, **cfg)
    if num_src:
        kernel = triton_kernel("dot", "_dot_bwd_src_kernel", q.device)
        kernel[(num_src, heads, -(-max(key_dim, val_dim) // block_d))](
            out_csr.indptr, out_csr.indices, out_csr.eids, q, k, val, scale_t, lse, c, grad_out, ga, ga_on, grad_k,
            grad_val, heads, key_dim, val_dim, **cfg)
    return grad_q, grad_k, grad_val
