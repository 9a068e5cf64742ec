"""Fused dot-product attention over CSR rows (what ``dgl.nn.DotGatConv`` computes): per destination v
and head h,

    s_e = scale * <q[v, h, :], k[u, h, :]>,   out[v, h, :] = sum over in-edges e = (u -> v) of softmax_e(s) val[u, h, :]

``_dot_fwd_kernel``: a program owns one destination, one head and a block of BLOCK_D value features;
it walks v's in-edges once with FlashAttention's online softmax (the score's dot product in chunks of
BLOCK_D over the key dimension) and stores out and, from the first block, lse[v, h] = m + log(l).
``_dot_attn_kernel`` writes the attention exp(s_e - lse[v, h]) per edge (edge-id order), only when the
caller asks for it.  Backward recomputes p_e = exp(s_e - lse) in two passes without atomics and without
per-edge scratch: with c[v, h] = <grad_out[v], out[v]> (+ the attention gradient's row term, computed
by the caller) and ds_e = p_e (<grad_out[v], val[u]> + grad_attn_e - c[v]),
``_dot_bwd_dst_kernel`` (in-CSR) sums grad_q[v] = scale * sum_e ds_e k[u] and
``_dot_bwd_src_kernel`` (out-CSR) grad_k[u] = scale * sum_e ds_e q[v], grad_val[u] = sum_e p_e grad_out[v].

The attention gradient is read at (eid * H + h) * ga_on: with ga_on = 0 a one-element zero tensor
stands in (no second specialisation).  Accumulation is fp32 (fp64 for fp64 inputs); all address
arithmetic is int64.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def rows_dot(x_ptr, x_base, y_ptr, y_rows, e_mask, dim, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """<x[x_base:x_base + dim], y[y_rows[i]:y_rows[i] + dim]> for the BLOCK_E rows i (0 where masked), in
    the accumulation dtype: one vector against BLOCK_E rows (the vector is loaded once per chunk)."""
    acc_dtype = tl.float64 if y_ptr.dtype.element_ty == tl.float64 else tl.float32
    out = tl.zeros((BLOCK_E,), acc_dtype)
    for d0 in range(0, dim, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        d_mask = d < dim
        x = tl.load(x_ptr + x_base + d, mask=d_mask, other=0.0).to(acc_dtype)
        y = tl.load(y_ptr + y_rows[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :], other=0.0)
        out += tl.sum(y.to(acc_dtype) * x[None, :], axis=1)
    return out


@triton.jit
def _dot_fwd_kernel(indptr_ptr, indices_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, out_ptr, lse_ptr, num_heads, key_dim,
                    val_dim, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    acc_dtype = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = d < val_dim
    start = tl.load(indptr_ptr + v)
    end = tl.load(indptr_ptr + v + 1)
    scale = tl.load(scale_ptr).to(acc_dtype)
    q_base = (v * num_heads + h) * key_dim
    m = tl.max(tl.full((BLOCK_E,), float("-inf"), acc_dtype), axis=0)  # a scalar of acc_dtype
    denom = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    acc = tl.zeros((BLOCK_D,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        kk = k0 + tl.arange(0, BLOCK_E)
        e_mask = kk < end
        u = tl.load(indices_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        s = rows_dot(q_ptr, q_base, k_ptr, (u * num_heads + h) * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        s = tl.where(e_mask, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))  # finite: the chunk has at least one entry
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        denom = denom * alpha + tl.sum(p, axis=0)
        row = (u * num_heads + h) * val_dim
        x = tl.load(val_ptr + row[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * x.to(acc_dtype), axis=0)
        m = m_new
    denom = tl.where(denom > 0, denom, 1.0)  # a destination without in-edges: acc = 0, lse = -inf
    tl.store(out_ptr + (v * num_heads + h) * val_dim + d, (acc / denom).to(out_ptr.dtype.element_ty), mask=d_mask)
    if tl.program_id(2) == 0:
        tl.store(lse_ptr + v * num_heads + h, m + tl.log(denom))


@triton.jit
def _dot_attn_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, scale_ptr, lse_ptr, a_ptr, num_heads, key_dim,
                     BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """a[e, h] = exp(s_e - lse[v, h]) for v's in-edges (stored at the edge id)."""
    acc_dtype = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    start = tl.load(indptr_ptr + v)
    end = tl.load(indptr_ptr + v + 1)
    scale = tl.load(scale_ptr).to(acc_dtype)
    lse_v = tl.load(lse_ptr + v * num_heads + h).to(acc_dtype)
    q_base = (v * num_heads + h) * key_dim
    for k0 in range(start, end, BLOCK_E):
        kk = k0 + tl.arange(0, BLOCK_E)
        e_mask = kk < end
        u = tl.load(indices_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        eid = tl.load(eids_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        s = rows_dot(q_ptr, q_base, k_ptr, (u * num_heads + h) * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        tl.store(a_ptr + eid * num_heads + h, tl.exp(s - lse_v).to(a_ptr.dtype.element_ty), mask=e_mask)


@triton.jit
def _dot_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, lse_ptr, c_ptr,
                        grad_out_ptr, ga_ptr, ga_on, grad_q_ptr, num_heads, key_dim, val_dim,
                        BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per destination v, head h, key-feature block: grad_q[v, h] = scale * sum_e ds_e k[u, h]."""
    acc_dtype = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = d < key_dim
    start = tl.load(indptr_ptr + v)
    end = tl.load(indptr_ptr + v + 1)
    scale = tl.load(scale_ptr).to(acc_dtype)
    vh = v * num_heads + h
    lse_v = tl.load(lse_ptr + vh).to(acc_dtype)
    c_v = tl.load(c_ptr + vh).to(acc_dtype)
    acc = tl.zeros((BLOCK_D,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        kk = k0 + tl.arange(0, BLOCK_E)
        e_mask = kk < end
        u = tl.load(indices_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        eid = tl.load(eids_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        uh = u * num_heads + h
        s = rows_dot(q_ptr, vh * key_dim, k_ptr, uh * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        t = rows_dot(grad_out_ptr, vh * val_dim, val_ptr, uh * val_dim, e_mask, val_dim, BLOCK_E, BLOCK_D)
        ga = tl.load(ga_ptr + (eid * num_heads + h) * ga_on, mask=e_mask, other=0.0).to(acc_dtype)
        ds = tl.where(e_mask, tl.exp(s - lse_v) * (t + ga - c_v), 0.0)
        x = tl.load(k_ptr + uh[:, None] * key_dim + d[None, :], mask=e_mask[:, None] & d_mask[None, :], other=0.0)
        acc += tl.sum(ds[:, None] * x.to(acc_dtype), axis=0)
    tl.store(grad_q_ptr + vh * key_dim + d, (acc * scale).to(grad_q_ptr.dtype.element_ty), mask=d_mask)


@triton.jit
def _dot_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, q_ptr, k_ptr, val_ptr, scale_ptr, lse_ptr, c_ptr,
                        grad_out_ptr, ga_ptr, ga_on, grad_k_ptr, grad_val_ptr, num_heads, key_dim, val_dim,
                        BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """Per source u, head h, feature block (out-CSR rows): grad_k[u, h] = scale * sum_e ds_e q[v, h]
    and grad_val[u, h] = sum_e p_e grad_out[v, h]; blocks past key_dim / val_dim store nothing there."""
    acc_dtype = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    u = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    dk_mask = d < key_dim
    dv_mask = d < val_dim
    start = tl.load(indptr_ptr + u)
    end = tl.load(indptr_ptr + u + 1)
    scale = tl.load(scale_ptr).to(acc_dtype)
    uh = u * num_heads + h
    acc_k = tl.zeros((BLOCK_D,), acc_dtype)
    acc_v = tl.zeros((BLOCK_D,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        kk = k0 + tl.arange(0, BLOCK_E)
        e_mask = kk < end
        v = tl.load(indices_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        eid = tl.load(eids_ptr + kk, mask=e_mask, other=0).to(tl.int64)
        vh = v * num_heads + h
        s = rows_dot(k_ptr, uh * key_dim, q_ptr, vh * key_dim, e_mask, key_dim, BLOCK_E, BLOCK_D) * scale
        t = rows_dot(val_ptr, uh * val_dim, grad_out_ptr, vh * val_dim, e_mask, val_dim, BLOCK_E, BLOCK_D)
        ga = tl.load(ga_ptr + (eid * num_heads + h) * ga_on, mask=e_mask, other=0.0).to(acc_dtype)
        lse = tl.load(lse_ptr + vh, mask=e_mask, other=0.0).to(acc_dtype)
        c = tl.load(c_ptr + vh, mask=e_mask, other=0.0).to(acc_dtype)
        p = tl.where(e_mask, tl.exp(s - lse), 0.0)
        ds = p * (t + ga - c)
        x = tl.load(q_ptr + vh[:, None] * key_dim + d[None, :], mask=e_mask[:, None] & dk_mask[None, :], other=0.0)
        acc_k += tl.sum(ds[:, None] * x.to(acc_dtype), axis=0)
        go = tl.load(grad_out_ptr + vh[:, None] * val_dim + d[None, :], mask=e_mask[:, None] & dv_mask[None, :],
                     other=0.0)
        acc_v += tl.sum(p[:, None] * go.to(acc_dtype), axis=0)
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
    return Specialisation("attention_dot", kernel, sig, {"BLOCK_E": BLOCK_E, "BLOCK_D": block_d},
                          num_warps=num_warps(block_d, kernel, t == "fp64"))


SPECIALISATIONS = [_spec(k, t, idx, bd) for k in _ARGS for t in _DT for idx in _IDX for bd in FEATURE_TILES]
