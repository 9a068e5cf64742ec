"""Fused GATv2 attention with one program per row covering every head (``gatv2.py`` has one
per row, head and feature block): for many heads of few features (GATv2Conv's 4 x 16, 8 x 8), where a
per-(row, head) program carries a [BLOCK_E, <= 16]-element tile and the grid is H times longer than
the rows.  The maths, the saved normaliser lse[v, h], the row term c[v, h] and the two-pass backward
are ``gatv2.py``'s; the tiles are [BLOCK_E, BLOCK_H, BLOCK_D] (in-edges x heads x features,
``attention_common.SHAPES``), and a source row fs[u] is read once per chunk for the score and the sum
alike.  The attention itself (``return_attention``) stays ``gatv2._gatv2_attn_kernel``'s.
The reference is ``core/attention/gatv2.ref_gatv2_attention``.
"""
import triton
import triton.language as tl

# the tiles, their rule and launch width, shared by every all-heads module (``tiles`` looked up here: patchable)
from .attention_common import (  # noqa: F401
    BLOCK_E,
    SHAPES,
    edge_chunk,
    edge_ids,
    edges_heads,
    head_offsets,
    heads_edge_grad,
    heads_program,
    heads_row_term,
    heads_softmax_start,
    heads_softmax_step,
    heads_softmax_store,
    node_heads,
    num_warps,
    tiles,
)
from .registry import Specialisation


@triton.jit
def _scores(z, w, slope):
    """s = sum_d w leaky_relu(z) per (edge, head) of z [BLOCK_E, BLOCK_H, BLOCK_D], w [BLOCK_H, BLOCK_D]."""
    return tl.sum(w[None, :, :] * tl.where(z > 0, z, z * slope), axis=2)


@triton.jit
def _gatv2_heads_fwd_kernel(indptr_ptr, indices_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, out_ptr, lse_ptr, num_heads,
                            head_dim, BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    v, h, h_mask, d, start, end = heads_program(indptr_ptr, num_heads, BLOCK_H, BLOCK_D)
    hd, hd_mask = head_offsets(h, h_mask, d, head_dim)
    slope = tl.load(slope_ptr)
    fd_v = node_heads(fd_ptr, v, num_heads, head_dim, hd, hd_mask, slope)
    w = node_heads(attn_ptr, 0, num_heads, head_dim, hd, hd_mask, slope)
    m, denom, acc = heads_softmax_start(slope, BLOCK_H, BLOCK_D)
    for k0 in range(start, end, BLOCK_E):
        _, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        x = edges_heads(fs_ptr, u, num_heads, head_dim, hd, hd_mask, e_mask, slope)
        m, denom, acc = heads_softmax_step(m, denom, acc, _scores(x + fd_v[None, :, :], w, slope),
                                           e_mask[:, None] & h_mask[None, :], x)
    heads_softmax_store(out_ptr, lse_ptr, v, num_heads, head_dim, h, h_mask, hd, hd_mask, m, denom, acc)


@triton.jit
def _gatv2_heads_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, lse_ptr,
                                c_ptr, grad_out_ptr, ga_ptr, ga_on, grad_fd_ptr, grad_attn_ptr, num_heads, head_dim,
                                BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per destination v, every head: c[v] (stored), then grad_fd[v] and v's share of grad_attn."""
    v, h, h_mask, d, start, end = heads_program(indptr_ptr, num_heads, BLOCK_H, BLOCK_D)
    hd, hd_mask = head_offsets(h, h_mask, d, head_dim)
    slope = tl.load(slope_ptr)
    fd_v = node_heads(fd_ptr, v, num_heads, head_dim, hd, hd_mask, slope)
    go = node_heads(grad_out_ptr, v, num_heads, head_dim, hd, hd_mask, slope)
    w = node_heads(attn_ptr, 0, num_heads, head_dim, hd, hd_mask, slope)
    lse_v = tl.load(lse_ptr + v * num_heads + h, mask=h_mask, other=0.0)
    c_parts = tl.zeros((BLOCK_H,), slope.dtype)
    p_parts = tl.zeros((BLOCK_H,), slope.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        x = edges_heads(fs_ptr, u, num_heads, head_dim, hd, hd_mask, e_mask, slope)
        p, pt = heads_edge_grad(_scores(x + fd_v[None, :, :], w, slope), lse_v[None, :], 0.0,
                                tl.sum(x * go[None, :, :], axis=2), ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask),
                                num_heads, h, e_mask[:, None] & h_mask[None, :])
        c_parts += tl.sum(pt, axis=0)
        p_parts += tl.sum(p, axis=0)
    c_v = heads_row_term(c_ptr, v, num_heads, h, h_mask, c_parts, p_parts)
    acc_fd = tl.zeros((BLOCK_H, BLOCK_D), slope.dtype)
    acc_w = tl.zeros((BLOCK_H, BLOCK_D), slope.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        x = edges_heads(fs_ptr, u, num_heads, head_dim, hd, hd_mask, e_mask, slope)
        z = x + fd_v[None, :, :]
        _, ds = heads_edge_grad(_scores(z, w, slope), lse_v[None, :], c_v[None, :], tl.sum(x * go[None, :, :], axis=2),
                                ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h,
                                e_mask[:, None] & h_mask[None, :])
        acc_fd += tl.sum(ds[:, :, None] * tl.where(z > 0, 1.0, slope), axis=0)
        acc_w += tl.sum(ds[:, :, None] * tl.where(z > 0, z, z * slope), axis=0)
    row = v * (num_heads * head_dim)
    tl.store(grad_fd_ptr + row + hd, (acc_fd * w).to(grad_fd_ptr.dtype.element_ty), mask=hd_mask)
    tl.store(grad_attn_ptr + row + hd, acc_w.to(grad_attn_ptr.dtype.element_ty), mask=hd_mask)


@triton.jit
def _gatv2_heads_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, lse_ptr,
                                c_ptr, grad_out_ptr, ga_ptr, ga_on, grad_fs_ptr, num_heads, head_dim,
                                BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per source u, every head (out-CSR rows): grad_fs[u] = sum_e p_e grad_out[v] + ds_e attn leaky'(z_e)."""
    u, h, h_mask, d, start, end = heads_program(indptr_ptr, num_heads, BLOCK_H, BLOCK_D)
    hd, hd_mask = head_offsets(h, h_mask, d, head_dim)
    slope = tl.load(slope_ptr)
    fs_u = node_heads(fs_ptr, u, num_heads, head_dim, hd, hd_mask, slope)
    w = node_heads(attn_ptr, 0, num_heads, head_dim, hd, hd_mask, slope)
    acc_p = tl.zeros((BLOCK_H, BLOCK_D), slope.dtype)
    acc_s = tl.zeros((BLOCK_H, BLOCK_D), slope.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, v = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        eh_mask = e_mask[:, None] & h_mask[None, :]
        vh = v[:, None] * num_heads + h[None, :]
        z = edges_heads(fd_ptr, v, num_heads, head_dim, hd, hd_mask, e_mask, slope) + fs_u[None, :, :]
        go = edges_heads(grad_out_ptr, v, num_heads, head_dim, hd, hd_mask, e_mask, slope)
        p, ds = heads_edge_grad(_scores(z, w, slope), tl.load(lse_ptr + vh, mask=eh_mask, other=0.0),
                                tl.load(c_ptr + vh, mask=eh_mask, other=0.0), tl.sum(go * fs_u[None, :, :], axis=2),
                                ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, eh_mask)
        acc_p += tl.sum(p[:, :, None] * go, axis=0)
        acc_s += tl.sum(ds[:, :, None] * tl.where(z > 0, 1.0, slope), axis=0)
    tl.store(grad_fs_ptr + u * (num_heads * head_dim) + hd, (acc_p + acc_s * w).to(grad_fs_ptr.dtype.element_ty),
             mask=hd_mask)


# ------------------------------------------------------------------ launch configuration
def maxnreg(kernel: str, fp64: bool, block_h: int, block_d: int) -> int | None:
    """Register cap: fp64 (the reference dtype, not a training one) takes the whole register file,
    255 (``dot_heads.maxnreg``); the backward kernels 168: at ptxas's own target the
    destination pass on the 8 x 8 tile stopped at 96 registers and spilled 12 bytes (sm_80, 3.5.1
    and 3.6), the source pass on 8 x 16 at 128 and spilled 16 (sm_90, 3.5.1).  None (ptxas's
    default) for the forward."""
    if fp64:
        return 255
    return None if kernel == "_gatv2_heads_fwd_kernel" else 168


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
_ARGS = {
    "_gatv2_heads_fwd_kernel": ("indptr_ptr", "indices_ptr", "fs_ptr", "fd_ptr", "attn_ptr", "slope_ptr", "out_ptr",
                                "lse_ptr", "num_heads", "head_dim"),
    "_gatv2_heads_bwd_dst_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "fs_ptr", "fd_ptr", "attn_ptr",
                                    "slope_ptr", "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_fd_ptr",
                                    "grad_attn_ptr", "num_heads", "head_dim"),
    "_gatv2_heads_bwd_src_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "fs_ptr", "fd_ptr", "attn_ptr",
                                    "slope_ptr", "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_fs_ptr",
                                    "num_heads", "head_dim"),
}
KERNELS = tuple(_ARGS)


def _spec(kernel: str, t: str, idx: str, bh: int, bd: int) -> Specialisation:
    acc = "fp64" if t == "fp64" else "fp32"
    types = {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "slope_ptr": f"*{acc}",
             "lse_ptr": f"*{acc}", "c_ptr": f"*{acc}", "ga_ptr": f"*{acc}", "grad_attn_ptr": f"*{acc}",
             "ga_on": "i32", "num_heads": "i32", "head_dim": "i32"}
    sig = {a: types.get(a, f"*{t}") for a in _ARGS[kernel]}
    sig.update(BLOCK_E="constexpr", BLOCK_H="constexpr", BLOCK_D="constexpr")
    return Specialisation("gatv2_heads", kernel, sig, {"BLOCK_E": BLOCK_E, "BLOCK_H": bh, "BLOCK_D": bd},
                          num_warps=num_warps(bh, bd), maxnreg=maxnreg(kernel, t == "fp64", bh, bd))


SPECIALISATIONS = [_spec(k, t, idx, bh, bd) for k in _ARGS for t in _DT for idx in _IDX for bh, bd in SHAPES]
