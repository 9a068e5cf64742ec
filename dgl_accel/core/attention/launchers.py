"""Triton launchers of the attention kernels (``kernels/attention.py``): compiled on CUDA tensors,
interpreted on CPU tensors.  Inputs are made contiguous here; outputs are new tensors."""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..launch import kernel_module, triton_kernel


def edge_softmax_forward(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """Softmax of ``score`` [E, H] (edge-id order) over each row's entries."""
    score = score.contiguous()
    out = torch.empty_like(score)
    heads = score.shape[1]
    if rows.num_rows and rows.num_edges and heads:
        block_e, block_h = kernel_module("attention").softmax_tile(heads)
        kernel = triton_kernel("attention", "_edge_softmax_fwd_kernel", score.device)
        kernel[(rows.num_rows, -(-heads // block_h))](rows.indptr, rows.eids, score, out, heads,
                                                      BLOCK_E=block_e, BLOCK_H=block_h,
                                                      num_warps=kernel_module("attention").NUM_WARPS)
    return out


def edge_softmax_backward(rows: Structure, a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """a * (grad - sum over the row of a * grad), [E, H] in a's dtype."""
    a, grad = a.contiguous(), grad.to(a.dtype).contiguous()
    out = torch.empty_like(a)
    heads = a.shape[1]
    if rows.num_rows and rows.num_edges and heads:
        block_e, block_h = kernel_module("attention").softmax_tile(heads)
        kernel = triton_kernel("attention", "_edge_softmax_bwd_kernel", a.device)
        kernel[(rows.num_rows, -(-heads // block_h))](rows.indptr, rows.eids, a, grad, out, heads,
                                                      BLOCK_E=block_e, BLOCK_H=block_h,
                                                      num_warps=kernel_module("attention").NUM_WARPS)
    return out


def _params(slope: float, drop, acc: torch.dtype, device) -> torch.Tensor:
    # [slope, dropout scale] as a tensor, not kernel arguments: Triton passes Python floats as fp32,
    # too coarse for fp64
    return torch.tensor([slope, 1.0 if drop is None else drop.scale], dtype=acc, device=device)


def _rng(drop, device) -> torch.Tensor:
    """int64 [threshold, key_0, ..., key_{H-1}] of the dropout mask (a placeholder without dropout)."""
    return torch.zeros(1, dtype=torch.int64, device=device) if drop is None else drop.kernel_args(device)


def gat_forward(in_csr: Structure, feat, el, er, slope: float, drop=None):
    """(out [num_dst, H, D] in feat's dtype, lse [num_dst, H] in the accumulation dtype); ``drop`` an
    :class:`~.dropout.AttentionDropout` or None."""
    feat, el, er = feat.contiguous(), el.contiguous(), er.contiguous()
    num_dst, (_, heads, dim) = in_csr.num_rows, feat.shape
    acc = acc_dtype(feat.dtype)
    out = torch.empty((num_dst, heads, dim), dtype=feat.dtype, device=feat.device)
    lse = torch.empty((num_dst, heads), dtype=acc, device=feat.device)
    heads_tile = kernel_module("attention_heads").tiles(heads, dim)
    if num_dst and heads_tile:  # every head of a row in one program
        _gat_heads("_gat_heads_fwd_kernel", heads_tile, in_csr, feat, el, er, _params(slope, drop, acc, feat.device),
                   _rng(drop, feat.device), out, lse, drop=drop)
    elif num_dst:  # heads, dim >= 1 (checks.check_gat)
        mod = kernel_module("attention")
        block_d = mod.gat_feature_tile(dim)
        kernel = triton_kernel("attention", "_gat_fwd_kernel", feat.device)
        kernel[(num_dst, heads, -(-dim // block_d))](
            in_csr.indptr, in_csr.indices, in_csr.eids, feat, el, er, _params(slope, drop, acc, feat.device),
            _rng(drop, feat.device), out, lse, heads, dim, BLOCK_E=mod.GAT_BLOCK_E, BLOCK_D=block_d,
            DROPOUT=drop is not None, num_warps=mod.gat_num_warps(block_d))
    return out, lse


def gat_backward(in_csr: Structure, out_csr: Structure, feat, el, er, slope: float, lse, grad_out, drop=None):
    """(grad_feat in feat's dtype, grad_el, grad_er in the accumulation dtype): the in-CSR pass
    (delta [num_dst, H] and grad_er), then the out-CSR pass; nothing per edge in between."""
    feat, el, er, grad_out = (t.contiguous() for t in (feat, el, er, grad_out.to(feat.dtype)))
    (num_src, heads, dim), num_dst = feat.shape, in_csr.num_rows
    acc = lse.dtype
    params, rng = _params(slope, drop, acc, feat.device), _rng(drop, feat.device)
    delta = torch.empty((num_dst, heads), dtype=acc, device=feat.device)
    grad_er = torch.empty((num_dst, heads), dtype=acc, device=feat.device)
    grad_el = torch.empty((num_src, heads), dtype=acc, device=feat.device)
    grad_feat = torch.empty_like(feat)
    heads_tile = kernel_module("attention_heads").tiles(heads, dim)
    if heads_tile:  # every head of a row in one program
        if num_dst:
            _gat_heads("_gat_heads_bwd_dst_kernel", heads_tile, in_csr, feat, el, er, params, rng, lse, grad_out,
                       delta, grad_er, drop=drop)
        if num_src:
            _gat_heads("_gat_heads_bwd_src_kernel", heads_tile, out_csr, feat, el, er, params, rng, lse, grad_out,
                       delta, grad_feat, grad_el, drop=drop)
        return grad_feat, grad_el, grad_er
    mod = kernel_module("attention")
    block_d = mod.gat_feature_tile(dim)
    opts = dict(BLOCK_E=mod.GAT_BLOCK_E, BLOCK_D=block_d, DROPOUT=drop is not None,
                num_warps=mod.gat_num_warps(block_d))
    if num_dst:
        kernel = triton_kernel("attention", "_gat_bwd_dst_kernel", feat.device)
        kernel[(num_dst, heads)](in_csr.indptr, in_csr.indices, in_csr.eids, feat, el, er, params, rng, lse, grad_out,
                                 delta, grad_er, heads, dim, **opts)
    if num_src:
        kernel = triton_kernel("attention", "_gat_bwd_src_kernel", feat.device)
        cap = mod.gat_maxnreg("_gat_bwd_src_kernel", block_d, drop is not None)
        opts = {**opts, **({"maxnreg": cap} if cap else {})}
        kernel[(num_src, heads, -(-dim // block_d))](out_csr.indptr, out_csr.indices, out_csr.eids, feat, el, er,
                                                     params, rng, lse, grad_out, delta, grad_feat, grad_el, heads,
                                                     dim, **opts)
    return grad_feat, grad_el, grad_er


def _gat_heads(kernel: str, tile: tuple[int, int], rows: Structure, feat, *args, drop):
    """One of ``kernels/attention_heads.py``'s kernels over ``rows`` (a program per row, every head)."""
    all_heads("attention_heads", kernel, tile, rows, rows.eids, feat, *args, *feat.shape[1:],
              fp64=feat.dtype == torch.float64, DROPOUT=drop is not None)


def all_heads(module: str, kernel: str, tile: tuple[int, int], rows: Structure, *args, fp64: bool,
              **constexprs) -> None:
    """``kernel`` of an all-heads module (``kernels/attention_heads.py``, ``attention_{dot,gatv2}_heads.py``)
    over ``rows``: a program per row covering every head in one [heads, features] ``tile``; ``args``
    follow the row pointers and entries in the kernel's order, ``constexprs`` beyond the tile's."""
    mod = kernel_module(module)
    bh, bd = tile
    cap = mod.maxnreg(kernel, fp64, bh, bd)
    triton_kernel(module, kernel, rows.indptr.device)[(rows.num_rows,)](
        rows.indptr, rows.indices, *args, BLOCK_E=mod.BLOCK_E, BLOCK_H=bh, BLOCK_D=bd, **constexprs,
        num_warps=mod.num_warps(bh, bd), **({"maxnreg": cap} if cap else {}))
