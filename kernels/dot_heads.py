"""Fused dot-product attention with one program per row covering every head (``dot.py`` has
one per row, head and feature block): for many heads of few features (DotGatConv's 4 x 16, 8 x 8),
where a per-(row, head) program carries a [BLOCK_E, <= 16]-element tile and the grid is H times longer
than the rows.  The maths, the saved normaliser lse[v, h], the row term c[v, h] and the two-pass
backward are ``dot.py``'s; the tiles are [BLOCK_E, BLOCK_H, BLOCK_D] (in-edges x heads x
features, ``attention_common.SHAPES``, BLOCK_D covering the key and the value width), so a key or value
row is read once per chunk for every head.  The attention itself (``return_attention``) stays
``dot._dot_attn_kernel``'s.  The reference is ``core/attention/dot.ref_dot_attention``.
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
def _dot_heads_fwd_kernel(indptr_ptr, indices_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, out_ptr, lse_ptr, num_heads,
                          key_dim, val_dim, BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    v, h, h_mask, d, start, end = heads_program(indptr_ptr, num_heads, BLOCK_H, BLOCK_D)
    hk, hk_mask = head_offsets(h, h_mask, d, key_dim)
    hv, hv_mask = head_offsets(h, h_mask, d, val_dim)
    scale = tl.load(scale_ptr)
    q = node_heads(q_ptr, v, num_heads, key_dim, hk, hk_mask, scale)
    m, denom, acc = heads_softmax_start(scale, BLOCK_H, BLOCK_D)
    for k0 in range(start, end, BLOCK_E):
        _, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        s = tl.sum(edges_heads(k_ptr, u, num_heads, key_dim, hk, hk_mask, e_mask, scale) * q[None, :, :], axis=2)
        x = edges_heads(val_ptr, u, num_heads, val_dim, hv, hv_mask, e_mask, scale)
        m, denom, acc = heads_softmax_step(m, denom, acc, s * scale, e_mask[:, None] & h_mask[None, :], x)
    heads_softmax_store(out_ptr, lse_ptr, v, num_heads, val_dim, h, h_mask, hv, hv_mask, m, denom, acc)


@triton.jit
def _dot_heads_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, lse_ptr, c_ptr,
                              grad_out_ptr, ga_ptr, ga_on, grad_q_ptr, num_heads, key_dim, val_dim,
                              BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per destination v, every head: c[v] (stored), then grad_q[v] = scale * sum_e ds_e k[u]."""
    v, h, h_mask, d, start, end = heads_program(indptr_ptr, num_heads, BLOCK_H, BLOCK_D)
    hk, hk_mask = head_offsets(h, h_mask, d, key_dim)
    hv, hv_mask = head_offsets(h, h_mask, d, val_dim)
    scale = tl.load(scale_ptr)
    q = node_heads(q_ptr, v, num_heads, key_dim, hk, hk_mask, scale)
    go = node_heads(grad_out_ptr, v, num_heads, val_dim, hv, hv_mask, scale)
    lse_v = tl.load(lse_ptr + v * num_heads + h, mask=h_mask, other=0.0)
    c_parts = tl.zeros((BLOCK_H,), scale.dtype)
    p_parts = tl.zeros((BLOCK_H,), scale.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        eh_mask = e_mask[:, None] & h_mask[None, :]
        s = tl.sum(edges_heads(k_ptr, u, num_heads, key_dim, hk, hk_mask, e_mask, scale) * q[None, :, :], axis=2)
        t = tl.sum(edges_heads(val_ptr, u, num_heads, val_dim, hv, hv_mask, e_mask, scale) * go[None, :, :], axis=2)
        p, pt = heads_edge_grad(s * scale, lse_v[None, :], 0.0, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask),
                                num_heads, h, eh_mask)
        c_parts += tl.sum(pt, axis=0)
        p_parts += tl.sum(p, axis=0)
    c_v = heads_row_term(c_ptr, v, num_heads, h, h_mask, c_parts, p_parts)
    acc = tl.zeros((BLOCK_H, BLOCK_D), scale.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        kx = edges_heads(k_ptr, u, num_heads, key_dim, hk, hk_mask, e_mask, scale)
        t = tl.sum(edges_heads(val_ptr, u, num_heads, val_dim, hv, hv_mask, e_mask, scale) * go[None, :, :], axis=2)
        _, ds = heads_edge_grad(tl.sum(kx * q[None, :, :], axis=2) * scale, lse_v[None, :], c_v[None, :], t, ga_ptr,
                                ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h,
                                e_mask[:, None] & h_mask[None, :])
        acc += tl.sum(ds[:, :, None] * kx, axis=0)
    tl.store(grad_q_ptr + v * (num_heads * key_dim) + hk, (acc * scale).to(grad_q_ptr.dtype.element_ty),
             mask=hk_mask)


@triton.jit
def _dot_heads_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, lse_ptr, c_ptr,
                              grad_out_ptr, ga_ptr, ga_on, grad_k_ptr, grad_val_ptr, num_heads, key_dim, val_dim,
                              BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per source u, every head (out-CSR rows): grad_k[u] = scale * sum_e ds_e q[v] and
    grad_val[u] = sum_e p_e grad_out[v]."""
    u, h, h_mask, d, start, end = heads_program(indptr_ptr, num_heads, BLOCK_H, BLOCK_D)
    hk, hk_mask = head_offsets(h, h_mask, d, key_dim)
    hv, hv_mask = head_offsets(h, h_mask, d, val_dim)
    scale = tl.load(scale_ptr)
    k_u = node_heads(k_ptr, u, num_heads, key_dim, hk, hk_mask, scale)
    val_u = node_heads(val_ptr, u, num_heads, val_dim, hv, hv_mask, scale)
    acc_k = tl.zeros((BLOCK_H, BLOCK_D), scale.dtype)
    acc_v = tl.zeros((BLOCK_H, BLOCK_D), scale.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, v = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        eh_mask = e_mask[:, None] & h_mask[None, :]
        vh = v[:, None] * num_heads + h[None, :]
        qx = edges_heads(q_ptr, v, num_heads, key_dim, hk, hk_mask, e_mask, scale)
        go = edges_heads(grad_out_ptr, v, num_heads, val_dim, hv, hv_mask, e_mask, scale)
        lse = tl.load(lse_ptr + vh, mask=eh_mask, other=0.0)
        c = tl.load(c_ptr + vh, mask=eh_mask, other=0.0)
        p, ds = heads_edge_grad(tl.sum(qx * k_u[None, :, :], axis=2) * scale, lse, c,
                                tl.sum(go * val_u[None, :, :], axis=2), ga_ptr, ga_on,
                                edge_ids(eids_ptr, kk, e_mask), num_heads, h, eh_mask)
        acc_k += tl.sum(ds[:, :, None] * qx, axis=0)
        acc_v += tl.sum(p[:, :, None] * go, axis=0)
    tl.store(grad_k_ptr + u * (num_heads * key_dim) + hk, (acc_k * scale).to(grad_k_ptr.dtype.element_ty),
             mask=hk_mask)
    tl.store(grad_val_ptr + u * (num_heads * val_dim) + hv, acc_v.to(grad_val_ptr.dtype.element_ty), mask=hv_mask)


# ------------------------------------------------------------------ launch configuration
def maxnreg(kernel: str, fp64: bool, block_h: int, block_d: int) -> int | None:
    """Register cap: fp64 (the reference dtype, not a training one) takes the whole register file,
    255; at ptxas's own target the fp64 source pass on the 8 x 8 tile spilled 12-16 bytes (168
    registers) on triton 3.5.1.  None (ptxas's default) for the training dtypes: 56-128 registers,
    no spills."""
    return 255 if fp64 else None


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
_ARGS = {
    "_dot_heads_fwd_kernel": ("indptr_ptr", "indices_ptr", "q_ptr", "k_ptr", "val_ptr", "scale_ptr", "out_ptr",
                              "lse_ptr", "num_heads", "key_dim", "val_dim"),
    "_dot_heads_bwd_dst_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "q_ptr", "k_ptr", "val_ptr", "scale_ptr",
                                  "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_q_ptr", "num_heads",
                                  "key_dim", "val_dim"),
    "_dot_heads_bwd_src_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "q_ptr", "k_ptr", "val_ptr", "scale_ptr",
                                  "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_k_ptr",
                                  "grad_val_ptr", "num_heads", "key_dim", "val_dim"),
}
KERNELS = tuple(_ARGS)


def _spec(kernel: str, t: str, idx: str, bh: int, bd: int) -> Specialisation:
    acc = "fp64" if t == "fp64" else "fp32"
    types = {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "scale_ptr": f"*{acc}",
             "lse_ptr": f"*{acc}", "c_ptr": f"*{acc}", "ga_ptr": f"*{acc}", "ga_on": "i32", "num_heads": "i32",
             "key_dim": "i32", "val_dim": "i32"}
    sig = {a: types.get(a, f"*{t}") for a in _ARGS[kernel]}
    sig.update(BLOCK_E="constexpr", BLOCK_H="constexpr", BLOCK_D="constexpr")
    return Specialisation("dot_heads", kernel, sig, {"BLOCK_E": BLOCK_E, "BLOCK_H": bh, "BLOCK_D": bd},
                          num_warps=num_warps(bh, bd), maxnreg=maxnreg(kernel, t == "fp64", bh, bd))


SPECIALISATIONS = [_spec(k, t, idx, bh, bd) for k in _ARGS for t in _DT for idx in _IDX for bh, bd in SHAPES]
