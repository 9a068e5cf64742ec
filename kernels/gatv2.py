"""Fused GATv2 attention over CSR rows (what ``dgl.nn.GATv2Conv`` computes): per destination v and head h,

    s_e = sum_d attn[h, d] leaky_relu(fs[u, h, d] + fd[v, h, d]),   out[v, h, :] = sum_e softmax_e(s) fs[u, h, :]

over v's in-edges e = (u -> v).  ``_gatv2_fwd_kernel``: a program owns one destination, one head and a
block of BLOCK_D features; it walks v's in-edges once with an online softmax (each score summed over
the whole feature dimension in chunks of BLOCK_D) and stores out and, from the first block,
lse[v, h] = m + log(l).  ``_gatv2_attn_kernel`` writes exp(s_e - lse) per edge id when asked for.

Backward recomputes p_e = exp(s_e - lse[v, h]); with t_e = <grad_out[v], fs[u]> + grad_attn_e,
c[v, h] = sum over v's in-edges of p_e t_e and ds_e = p_e (t_e - c[v]): ``_gatv2_bwd_dst_kernel``
(in-CSR) sweeps v's edges twice, first summing c[v] (fp32 from the recomputed p_e, stored to c_ptr for
the source kernel, launched after), then writes grad_fd[v] = sum_e ds_e attn leaky'(z_e) and the destination's
share of the attention vector's gradient, sum_e ds_e leaky(z_e) (summed over destinations by the
caller: no atomics); ``_gatv2_bwd_src_kernel`` (out-CSR) grad_fs[u] = sum_e p_e grad_out[v] +
ds_e attn leaky'(z_e), with z_e = fs[u] + fd[v].  Nothing per edge is stored.  The attention gradient
is read at (eid * H + h) * ga_on (a one-element zero tensor when ga_on = 0).  Accumulation is fp32
(fp64 for fp64 inputs); addresses int64.
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
def _scores(one_ptr, one_base, many_ptr, many_rows, attn_ptr, attn_base, slope, e_mask, dim,
            BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """s_i = sum_d attn[attn_base + d] leaky(one[one_base + d] + many[many_rows[i] + d]) for BLOCK_E rows i:
    one node's features (fd[v] over v's in-edges, fs[u] over u's out-edges) against the other ends'."""
    acc_dtype = tl.float64 if many_ptr.dtype.element_ty == tl.float64 else tl.float32
    s = tl.zeros((BLOCK_E,), acc_dtype)
    for d0 in range(0, dim, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        d_mask = d < dim
        x = tl.load(one_ptr + one_base + d, mask=d_mask, other=0.0).to(acc_dtype)
        z = tl.load(many_ptr + many_rows[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :],
                    other=0.0).to(acc_dtype) + x[None, :]
        w = tl.load(attn_ptr + attn_base + d, mask=d_mask, other=0.0).to(acc_dtype)
        s += tl.sum(w[None, :] * tl.where(z > 0, z, z * slope), axis=1)
    return s


@triton.jit
def _scores_and_terms(fd_ptr, v_base, fs_ptr, u_rows, attn_ptr, attn_base, grad_out_ptr, slope, e_mask, dim,
                      BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """(s_i as :func:`_scores` over v's in-edges, t_i = <grad_out[v], fs[u_i]>) for BLOCK_E rows i, each
    source row loaded once (the c pass of the dst kernel: with _scores and rows_dot apart, the fp64
    BLOCK_D = 16 specialisation spilled 32 bytes on sm_90)."""
    acc_dtype = tl.float64 if fs_ptr.dtype.element_ty == tl.float64 else tl.float32
    s = tl.zeros((BLOCK_E,), acc_dtype)
    t = tl.zeros((BLOCK_E,), acc_dtype)
    for d0 in range(0, dim, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        d_mask = d < dim
        y = tl.load(fs_ptr + u_rows[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :],
                    other=0.0).to(acc_dtype)
        x = tl.load(fd_ptr + v_base + d, mask=d_mask, other=0.0).to(acc_dtype)
        w = tl.load(attn_ptr + attn_base + d, mask=d_mask, other=0.0).to(acc_dtype)
        g = tl.load(grad_out_ptr + v_base + d, mask=d_mask, other=0.0).to(acc_dtype)
        z = y + x[None, :]
        s += tl.sum(w[None, :] * tl.where(z > 0, z, z * slope), axis=1)
        t += tl.sum(y * g[None, :], axis=1)
    return s, t


@triton.jit
def _pair_sums(one, many_ptr, rows, d, e_mask, d_mask):
    """z[i] = many[rows[i] + d] + one over the chunk's BLOCK_E rows (one: a feature block of the row's
    own node, in the accumulation dtype)."""
    z = tl.load(many_ptr + rows[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :], other=0.0)
    return z.to(one.dtype) + one[None, :]


@triton.jit
def _gatv2_fwd_kernel(indptr_ptr, indices_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, out_ptr, lse_ptr, num_heads,
                      head_dim, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    v, h, d, start, end = row_program(indptr_ptr, BLOCK_D)
    d_mask = d < head_dim
    m, denom, acc = softmax_start(fs_ptr, BLOCK_E, BLOCK_D)
    slope = tl.load(slope_ptr).to(acc.dtype)
    vh = v * num_heads + h
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        row = (u * num_heads + h) * head_dim
        s = _scores(fd_ptr, vh * head_dim, fs_ptr, row, attn_ptr, h * head_dim, slope, e_mask, head_dim, BLOCK_E,
                    BLOCK_D)
        m, denom, acc = softmax_step(m, denom, acc, s, e_mask, fs_ptr, row, d, d_mask)
    softmax_store(out_ptr, lse_ptr, vh, head_dim, d, d_mask, m, denom, acc)


@triton.jit
def _gatv2_attn_kernel(indptr_ptr, indices_ptr, eids_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, lse_ptr, a_ptr,
                       num_heads, head_dim, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """a[e, h] = exp(s_e - lse[v, h]) for v's in-edges (stored at the edge id)."""
    v, h, _, start, end = row_program(indptr_ptr, BLOCK_D)
    vh = v * num_heads + h
    lse_v = tl.load(lse_ptr + vh)
    slope = tl.load(slope_ptr).to(lse_v.dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        s = _scores(fd_ptr, vh * head_dim, fs_ptr, (u * num_heads + h) * head_dim, attn_ptr, h * head_dim, slope,
                    e_mask, head_dim, BLOCK_E, BLOCK_D)
        store_attention(a_ptr, edge_ids(eids_ptr, kk, e_mask), num_heads, h, s, lse_v, e_mask)


@triton.jit
def _gatv2_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, lse_ptr, c_ptr,
                          grad_out_ptr, ga_ptr, ga_on, grad_fd_ptr, grad_attn_ptr, num_heads, head_dim,
                          BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per destination v, head h, feature block: c[v, h] (stored), then grad_fd[v, h] and grad_attn[v, h]
    (v's share)."""
    v, h, d, start, end = row_program(indptr_ptr, BLOCK_D)
    d_mask = d < head_dim
    vh = v * num_heads + h
    lse_v = tl.load(lse_ptr + vh)
    acc_dtype = lse_v.dtype
    slope = tl.load(slope_ptr).to(acc_dtype)
    c_parts = row_term_start(lse_v, BLOCK_E)
    p_parts = row_term_start(lse_v, BLOCK_E)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        s, t = _scores_and_terms(fd_ptr, vh * head_dim, fs_ptr, (u * num_heads + h) * head_dim, attn_ptr,
                                 h * head_dim, grad_out_ptr, slope, e_mask, head_dim, BLOCK_E, BLOCK_D)
        p, pt = row_term_chunk(s, lse_v, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, e_mask)
        c_parts += pt
        p_parts += p
    c_v = store_row_term(c_ptr, vh, c_parts, p_parts)
    w = tl.load(attn_ptr + h * head_dim + d, mask=d_mask, other=0.0).to(acc_dtype)
    fd_v = tl.load(fd_ptr + vh * head_dim + d, mask=d_mask, other=0.0).to(acc_dtype)
    acc_fd = tl.zeros((BLOCK_D,), acc_dtype)
    acc_w = tl.zeros((BLOCK_D,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, u = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        row = (u * num_heads + h) * head_dim
        s = _scores(fd_ptr, vh * head_dim, fs_ptr, row, attn_ptr, h * head_dim, slope, e_mask, head_dim, BLOCK_E,
                    BLOCK_D)
        t = rows_dot(grad_out_ptr, vh * head_dim, fs_ptr, row, e_mask, head_dim, BLOCK_E, BLOCK_D)
        _, ds = edge_grad(s, lse_v, c_v, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, e_mask)
        z = _pair_sums(fd_v, fs_ptr, row, d, e_mask, d_mask)
        acc_fd += tl.sum(ds[:, None] * tl.where(z > 0, 1.0, slope), axis=0)
        acc_w += tl.sum(ds[:, None] * tl.where(z > 0, z, z * slope), axis=0)
    tl.store(grad_fd_ptr + vh * head_dim + d, (acc_fd * w).to(grad_fd_ptr.dtype.element_ty), mask=d_mask)
    tl.store(grad_attn_ptr + vh * head_dim + d, acc_w.to(grad_attn_ptr.dtype.element_ty), mask=d_mask)


@triton.jit
def _gatv2_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, fs_ptr, fd_ptr, attn_ptr, slope_ptr, lse_ptr, c_ptr,
                          grad_out_ptr, ga_ptr, ga_on, grad_fs_ptr, num_heads, head_dim,
                          BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per source u, head h, feature block (out-CSR rows): grad_fs[u, h]."""
    u, h, d, start, end = row_program(indptr_ptr, BLOCK_D)
    d_mask = d < head_dim
    slope = tl.load(slope_ptr)
    acc_dtype = slope.dtype
    uh = u * num_heads + h
    w = tl.load(attn_ptr + h * head_dim + d, mask=d_mask, other=0.0).to(acc_dtype)
    fs_u = tl.load(fs_ptr + uh * head_dim + d, mask=d_mask, other=0.0).to(acc_dtype)
    acc_p = tl.zeros((BLOCK_D,), acc_dtype)
    acc_s = tl.zeros((BLOCK_D,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        kk, e_mask, v = edge_chunk(indices_ptr, k0, end, BLOCK_E)
        vh = v * num_heads + h
        s = _scores(fs_ptr, uh * head_dim, fd_ptr, vh * head_dim, attn_ptr, h * head_dim, slope, e_mask, head_dim,
                    BLOCK_E, BLOCK_D)
        t = rows_dot(fs_ptr, uh * head_dim, grad_out_ptr, vh * head_dim, e_mask, head_dim, BLOCK_E, BLOCK_D)
        lse, c = dst_terms(lse_ptr, c_ptr, vh, e_mask)
        p, ds = edge_grad(s, lse, c, t, ga_ptr, ga_on, edge_ids(eids_ptr, kk, e_mask), num_heads, h, e_mask)
        acc_p += weighted_rows(p, grad_out_ptr, vh * head_dim, d, e_mask, d_mask)
        z = _pair_sums(fs_u, fd_ptr, vh * head_dim, d, e_mask, d_mask)
        acc_s += tl.sum(ds[:, None] * tl.where(z > 0, 1.0, slope), axis=0)
    tl.store(grad_fs_ptr + uh * head_dim + d, (acc_p + acc_s * w).to(grad_fs_ptr.dtype.element_ty), mask=d_mask)


# ------------------------------------------------------------------ launch configuration
BLOCK_E = 32
FEATURE_TILES = (16, 64)  # BLOCK_D: the scores loop over it; more features: more programs


def feature_tile(dim: int) -> int:
    return FEATURE_TILES[0] if dim <= FEATURE_TILES[0] else FEATURE_TILES[1]


def num_warps(block_d: int) -> int:
    """About 256 tile elements per warp, at least 4 warps (as the fused GAT kernels)."""
    return max(4, min(8, BLOCK_E * block_d // 256))


def maxnreg(kernel: str, block_d: int, fp64: bool) -> int | None:
    """Register cap where triton 3.6's ptxas spilled at its default target: 168 for the forward and
    the destination-side backward on the 64-feature tile (8 warps; 8 bytes), 128 for the fp64
    destination-side backward on the 16-feature tile (4 warps; 32 bytes); None elsewhere."""
    if kernel in ("_gatv2_fwd_kernel", "_gatv2_bwd_dst_kernel") and block_d == 64:
        return 168
    return 128 if kernel == "_gatv2_bwd_dst_kernel" and block_d == 16 and fp64 else None


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
_ARGS = {
    "_gatv2_fwd_kernel": ("indptr_ptr", "indices_ptr", "fs_ptr", "fd_ptr", "attn_ptr", "slope_ptr", "out_ptr",
                          "lse_ptr", "num_heads", "head_dim"),
    "_gatv2_attn_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "fs_ptr", "fd_ptr", "attn_ptr", "slope_ptr",
                           "lse_ptr", "a_ptr", "num_heads", "head_dim"),
    "_gatv2_bwd_dst_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "fs_ptr", "fd_ptr", "attn_ptr", "slope_ptr",
                              "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_fd_ptr", "grad_attn_ptr",
                              "num_heads", "head_dim"),
    "_gatv2_bwd_src_kernel": ("indptr_ptr", "indices_ptr", "eids_ptr", "fs_ptr", "fd_ptr", "attn_ptr", "slope_ptr",
                              "lse_ptr", "c_ptr", "grad_out_ptr", "ga_ptr", "ga_on", "grad_fs_ptr", "num_heads",
                              "head_dim"),
}


def _spec(kernel: str, t: str, idx: str, block_d: int) -> Specialisation:
    acc = "fp64" if t == "fp64" else "fp32"
    types = {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "slope_ptr": f"*{acc}",
             "lse_ptr": f"*{acc}", "c_ptr": f"*{acc}", "ga_ptr": f"*{acc}", "grad_attn_ptr": f"*{acc}",
             "a_ptr": f"*{acc}", "ga_on": "i32", "num_heads": "i32", "head_dim": "i32"}
    sig = {a: types.get(a, f"*{t}") for a in _ARGS[kernel]}
    sig.update(BLOCK_E="constexpr", BLOCK_D="constexpr")
    return Specialisation("gatv2", kernel, sig, {"BLOCK_E": BLOCK_E, "BLOCK_D": block_d},
                          num_warps=num_warps(block_d), maxnreg=maxnreg(kernel, block_d, t == "fp64"))


SPECIALISATIONS = [_spec(k, t, idx, bd) for k in _ARGS for t in _DT for idx in _IDX for bd in FEATURE_TILES]
