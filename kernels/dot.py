"""Fused dot-product attention over CSR rows (what ``dgl.nn.DotGatConv`` computes): per destination v
and head h,

    s_e = scale * <q[v, h, :], k[u, h, :]>,   out[v, h, :] = sum over in-edges e = (u -> v) of softmax_e(s) val[u, h, :]

``_dot_fwd_kernel``: a program owns one destination, one head and a block of BLOCK_D value features;
it walks v's in-edges once with FlashAttention's online softmax (the score's dot product in chunks of
BLOCK_D over the key dimension) and stores out and, from the first block, lse[v, h] = m + log(l).
``_dot_attn_kernel`` writes the attention exp(s_e - lse[v, h]) per edge (edge-id order), only when the
caller asks for it.  Backward recomputes p_e = exp(s_e - lse) in two passes without atomics and without
per-edge scratch: with t_e = <grad_out[v], val[u]> + grad_attn_e, c[v, h] = sum over v's in-edges of
p_e t_e and ds_e = p_e (t_e - c[v]), ``_dot_bwd_dst_kernel`` (in-CSR) sweeps v's edges twice, first
summing c[v] (fp32 from the recomputed p_e, stored to c_ptr), then grad_q[v] = scale * sum_e ds_e k[u];
``_dot_bwd_src_kernel`` (out-CSR, launched after) reads c and sums grad_k[u] = scale * sum_e ds_e q[v],
grad_val[u] = sum_e p_e grad_out[v].

The attention gradient is read at (eid * H + h) * ga_on: with ga_on = 0 a one-element zero tensor
stands in (no second specialisation).  Accumulation is fp32 (fp64 for fp64 inputs); all address
arithmetic is int64.
"""
import triton
import triton.language as tl

from .attention_common import (
    dst_terms,
    edge_chunk,
    edge_grad,
    edge_ids,
    row_program,
    row_term_chunk,
    row_term_start,
    rows_dot,
    softmax_start,
    softmax_step,
    softmax_store,
    store_attention,
    store_row_term,
    weighted_rows,
)
from .registry import Specialisation


@triton.jit
def _dot_fwd_kernel(indptr_ptr, indices_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, out_ptr, lse_ptr, num_heads, key_dim,
                    val_dim, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    v, h, d, start, end = row_program(indptr_ptr, BLOCK_D)
    d_mask = d < val_dim
    m, denom, acc = softmax_start(q_ptr, BLOCK_E, BLOCK_D)
    scale = tl.load(scale_ptr).to(acc.dtype)
    vh = v * num_heads + h
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        uh = u * num_heads + h
        s = rows_dot(q_ptr, vh * key_dim, k_ptr, uh * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        m, denom, acc = softmax_step(m, denom, acc, s, e_mask, val_ptr, uh * val_dim, d, d_mask)
    softmax_store(out_ptr, lse_ptr, vh, val_dim, d, d_mask, m, denom, acc)


@triton.jit
def _dot_attn_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, scale_ptr, lse_ptr, a_ptr, num_heads, key_dim,
                     BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """a[e, h] = exp(s_e - lse[v, h]) for v's in-edges (stored at the edge id)."""
    v, h, _, start, end = row_program(indptr_ptr, BLOCK_D)
    vh = v * num_heads + h
    lse_v = tl.load(lse_ptr + vh)
    scale = tl.load(scale_ptr).to(lse_v.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        s = rows_dot(q_ptr, vh * key_dim, k_ptr, (u * num_heads + h) * key_dim, e_mask, key_dim, BLOCK_E,
                     BLOCK_D) * scale
        store_attention(a_ptr, edge_ids(eids_ptr, kk, e_mask), num_heads, h, s, lse_v, e_mask)


@triton.jit
def _dot_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, lse_ptr, c_ptr,
                        grad_out_ptr, ga_ptr, ga_on, grad_q_ptr, num_heads, key_dim, val_dim,
                        BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per destination v, head h, key-feature block: c[v, h] (stored), then
    grad_q[v, h] = scale * sum_e ds_e k[u, h]."""
    v, h, d, start, end = row_program(indptr_ptr, BLOCK_D)
    d_mask = d < key_dim
    vh = v * num_heads + h
    lse_v = tl.load(lse_ptr + vh)
    scale = tl.load(scale_ptr).to(lse_v.dtype)
    c_parts = row_term_start(lse_v, BLOCK_E)
    p_parts = row_term_start(lse_v, BLOCK_E)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        uh = u * num_heads + h
        s = rows_dot(q_ptr, vh * key_dim, k_ptr, uh * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        t = rows_dot(grad_out_ptr, vh * val_dim, val_ptr, uh * val_dim, e_mask, val_dim, BLOCK_E, BLOCK_D)
        p, pt = row_term_chunk(s, lse_v, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, e_mask)
        c_parts += pt
        p_parts += p
    c_v = store_row_term(c_ptr, vh, c_parts, p_parts)
    acc = tl.zeros((BLOCK_D,), lse_v.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        uh = u * num_heads + h
        s = rows_dot(q_ptr, vh * key_dim, k_ptr, uh * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        t = rows_dot(grad_out_ptr, vh * val_dim, val_ptr, uh * val_dim, e_mask, val_dim, BLOCK_E, BLOCK_D)
        _, ds = edge_grad(s, lse_v, c_v, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, e_mask)
        acc += weighted_rows(ds, k_ptr, uh * key_dim, d, e_mask, d_mask)
    tl.store(grad_q_ptr + vh * key_dim + d, (acc * scale).to(grad_q_ptr.dtype.element_ty), mask=d_mask)


@triton.jit
def _dot_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, lse_ptr, c_ptr,
                        grad_out_ptr, ga_ptr, ga_on, grad_k_ptr, grad_val_ptr, num_heads, key_dim, val_dim,
                        BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per source u, head h, feature block (out-CSR rows): grad_k[u, h] = scale * sum_e ds_e q[v, h]
    and grad_val[u, h] = sum_e p_e grad_out[v, h]; blocks past key_dim / val_dim store nothing there."""
    u, h, d, start, end = row_program(indptr_ptr, BLOCK_D)
    dk_mask = d < key_dim
    dv_mask = d < val_dim
    scale = tl.load(scale_ptr)
    uh = u * num_heads + h
    acc_k = tl.zeros((BLOCK_D,), scale.dtype)
    acc_v = tl.zeros((BLOCK_D,), scale.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, v = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        vh = v * num_heads + h
        s = rows_dot(k_ptr, uh * key_dim, q_ptr, vh * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        t = rows_dot(val_ptr, uh * val_dim, grad_out_ptr, vh * val_dim, e_mask, val_dim, BLOCK_E, BLOCK_D)
        lse, c = dst_terms(lse_ptr, c_ptr, vh, e_mask)
        p, ds = edge_grad(s, lse, c, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, e_mask)
        acc_k += weighted_rows(ds, q_ptr, vh * key_dim, d, e_mask, dk_mask)
        acc_v += weighted_rows(p, grad_out_ptr, vh * val_dim, d, e_mask, dv_mask)
    tl.store(grad_k_ptr + uh * key_dim + d, (acc_k * scale).to(grad_k_ptr.dtype.element_ty), mask=dk_mask)
    tl.store(grad_val_ptr + uh * val_dim + d, acc_v.to(grad_val_ptr.dtype.element_ty), mask=dv_mask)


# ------------------------------------------------------------------ launch configuration
BLOCK_E = 32
FEATURE_TILES = (16, 64)  # BLOCK_D: the dot products loop over it; more features: more programs


def feature_tile(dim: int) -> int:
    return FEATURE_TILES[0] if dim <= FEATURE_TILES[0] else FEATURE_TILES[1]


def num_warps(block_d: int, kernel: str = "", fp64: bool = False) -> int:
    """About 256 tile elements per warp, at least 4 warps (as the fused GAT kernels); the fp64 forward
    on 16 features takes 8: on 4 warps ptxas spilled 24 bytes on sm_90 (at 72 registers), on 8 none."""
    if fp64 and kernel == "_dot_fwd_kernel" and block_d == FEATURE_TILES[0]:
        return 8
    return max(4, min(8, BLOCK_E * block_d // 256))


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
_ARGS = {
    "_dot_fwd_kernel": ("indptr_ptr", "indices_ptr", "q_ptr", "k_ptr", "val_ptr", "scale_ptr", "out_ptr", "lse_ptr",
                        "num_heads", "key_dim", "val_dim"),
    "_dot_attn_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "q_ptr", "k_ptr", "scale_ptr", "lse_ptr", "a_ptr",
                         "num_heads", "key_dim"),
    "_dot_bwd_dst_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "q_ptr", "k_ptr", "val_ptr", "scale_ptr",
                            "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_q_ptr", "num_heads",
                            "key_dim", "val_dim"),
    "_dot_bwd_src_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "q_ptr", "k_ptr", "val_ptr", "scale_ptr",
                            "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_k_ptr", "grad_val_ptr",
                            "num_heads", "key_dim", "val_dim"),
}


def _spec(kernel: str, t: str, idx: str, block_d: int) -> Specialisation:
    acc = "fp64" if t == "fp64" else "fp32"
    types = {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "scale_ptr": f"*{acc}",
             "lse_ptr": f"*{acc}", "c_ptr": f"*{acc}", "ga_ptr": f"*{acc}", "a_ptr": f"*{acc}", "ga_on": "i32",
             "num_heads": "i32", "key_dim": "i32", "val_dim": "i32"}
    sig = {a: types.get(a, f"*{t}") for a in _ARGS[kernel]}
    sig.update(BLOCK_E="constexpr", BLOCK_D="constexpr")
    return Specialisation("dot", kernel, sig, {"BLOCK_E": BLOCK_E, "BLOCK_D": block_d},
                          num_warps=num_warps(block_d, kernel, t == "fp64"))


SPECIALISATIONS = [_spec(k, t, idx, bd) for k in _ARGS for t in _DT for idx in _IDX for bd in FEATURE_TILES]
