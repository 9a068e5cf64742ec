"""Fused GAT aggregation over CSR rows: the forward, and the two backward kernels that recompute the
attention from saved normalisers (one program per row, head and feature block; ``gat_heads.py`` has
one per row covering every head).

A forward program owns one destination v, one head h and a block of BLOCK_D features; it walks
v's in-edges once with FlashAttention's online softmax (running max, running sum, rescaled
accumulator) over s_e = leaky_relu(el[u, h] + er[v, h]) and stores out[v, h, :] and, from the first
feature block, lse[v, h] = m + log(l).  Backward recomputes p_e = exp(s_e - lse[v, h]) and g_e =
w_e <grad_out[v], feat[u]>: ``_gat_bwd_dst_kernel`` (per destination, head) sums delta[v, h] =
sum_e p_e g_e and grad_er; ``_gat_bwd_src_kernel`` (per source, head, feature block, over the
out-CSR) gathers grad_feat[u] = sum_e p_e w_e grad_out[v] and, in the first feature block,
grad_el[u] = sum_e p_e (g_e - delta[v]) leaky'(.) without atomics; nothing per edge is stored.

Attention dropout (``DROPOUT``): w_e = keep / (1 - p) with keep = ``dropout_keep``(edge id, head key,
threshold), murmur3's finaliser in uint32 (``core/attention/dropout.py`` is the reference), so all
three kernels recompute one mask; without it w_e = 1 and the mask code is compiled out.

Accumulation is fp32 (fp64 for fp64 inputs); row pointers and all address arithmetic are int64.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def leaky_relu(x, slope):
    return tl.where(x > 0, x, x * slope)


@triton.jit
def _fmix32(x):
    """murmur3's 32-bit finaliser on uint32 (``core/attention/dropout.py``'s ``fmix32``)."""
    x ^= x >> 16
    x *= 0x85EBCA6B
    x ^= x >> 13
    x *= 0xC2B2AE35
    return x ^ (x >> 16)


@triton.jit
def dropout_keep(eid, key, thr):
    """The dropout keep mask of int64 edge ids under a head's uint32 ``key``: bits >= ``thr``."""
    lo = (eid & 0xFFFFFFFF).to(tl.uint32)
    hi = (eid >> 32).to(tl.uint32)
    return _fmix32(_fmix32(lo + key) ^ hi) >= thr


@triton.jit
def _rng(rng_ptr, h):
    """(threshold, head h's key) as uint32 from the int64 [threshold, key_0, ..., key_{H-1}]."""
    return tl.load(rng_ptr).to(tl.uint32), tl.load(rng_ptr + 1 + h).to(tl.uint32)


@triton.jit
def _gat_fwd_kernel(indptr_ptr, indices_ptr, eids_ptr, feat_ptr, el_ptr, er_ptr, params_ptr, rng_ptr, out_ptr,
                    lse_ptr, num_heads, head_dim, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr,
                    DROPOUT: tl.constexpr):
    acc_dtype = tl.float64 if feat_ptr.dtype.element_ty == tl.float64 else tl.float32
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = d < head_dim
    start = tl.load(indptr_ptr + v)
    end = tl.load(indptr_ptr + v + 1)
    slope = tl.load(params_ptr).to(acc_dtype)
    er_v = tl.load(er_ptr + v * num_heads + h).to(acc_dtype)
    if DROPOUT:
        scale = tl.load(params_ptr + 1).to(acc_dtype)
        thr, key = _rng(rng_ptr, h)
    m = tl.max(tl.full((BLOCK_E,), float("-inf"), acc_dtype), axis=0)  # a scalar of acc_dtype
    denom = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    acc = tl.zeros((BLOCK_D,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        e_mask = k < end
        u = tl.load(indices_ptr + k, mask=e_mask, other=0).to(tl.int64)
        s = leaky_relu(tl.load(el_ptr + u * num_heads + h, mask=e_mask, other=0.0).to(acc_dtype) + er_v, slope)
        s = tl.where(e_mask, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))  # finite: the chunk has at least one entry
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        denom = denom * alpha + tl.sum(p, axis=0)
        if DROPOUT:  # the softmax normalises over every edge; the sum takes the kept ones, scaled
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            p = tl.where(dropout_keep(eid, key, thr), p * scale, 0.0)
        row = (u * num_heads + h) * head_dim
        x = tl.load(feat_ptr + row[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * x.to(acc_dtype), axis=0)
        m = m_new
    denom = tl.where(denom > 0, denom, 1.0)  # a destination without in-edges: acc = 0, lse = -inf
    tl.store(out_ptr + (v * num_heads + h) * head_dim + d, (acc / denom).to(out_ptr.dtype.element_ty), mask=d_mask)
    if tl.program_id(2) == 0:
        tl.store(lse_ptr + v * num_heads + h, m + tl.log(denom))


@triton.jit
def _gat_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, feat_ptr, el_ptr, er_ptr, params_ptr, rng_ptr, lse_ptr,
                        grad_out_ptr, delta_ptr, grad_er_ptr, num_heads, head_dim,
                        BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr, DROPOUT: tl.constexpr):
    """Per destination v and head h, one pass over v's in-edges: with g_e = w_e <grad_out[v], feat[u]>,
    delta[v, h] = sum_e p_e g_e and grad_er[v, h] = sum_e p_e (g_e - delta) leaky'_e, summed as
    sum p g leaky' - delta sum p leaky' (nothing stored per edge)."""
    acc_dtype = tl.float64 if feat_ptr.dtype.element_ty == tl.float64 else tl.float32
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    start = tl.load(indptr_ptr + v)
    end = tl.load(indptr_ptr + v + 1)
    slope = tl.load(params_ptr).to(acc_dtype)
    if DROPOUT:
        scale = tl.load(params_ptr + 1).to(acc_dtype)
        thr, key = _rng(rng_ptr, h)
    er_v = tl.load(er_ptr + v * num_heads + h).to(acc_dtype)
    lse_v = tl.load(lse_ptr + v * num_heads + h).to(acc_dtype)
    base_v = (v * num_heads + h) * head_dim
    delta = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    pgl = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    pl = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        e_mask = k < end
        u = tl.load(indices_ptr + k, mask=e_mask, other=0).to(tl.int64)
        s_raw = tl.load(el_ptr + u * num_heads + h, mask=e_mask, other=0.0).to(acc_dtype) + er_v
        p = tl.exp(leaky_relu(s_raw, slope) - lse_v)
        p = tl.where(e_mask, p, 0.0)
        row = (u * num_heads + h) * head_dim
        g = tl.zeros((BLOCK_E,), acc_dtype)
        for d0 in range(0, head_dim, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            go = tl.load(grad_out_ptr + base_v + d, mask=d < head_dim, other=0.0).to(acc_dtype)
            x = tl.load(feat_ptr + row[:, None] + d[None, :], mask=e_mask[:, None] & (d < head_dim)[None, :],
                        other=0.0)
            g += tl.sum(x.to(acc_dtype) * go[None, :], axis=1)
        if DROPOUT:
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            g = tl.where(dropout_keep(eid, key, thr), g * scale, 0.0)
        pg = p * g
        delta += tl.sum(pg, axis=0)
        pgl += tl.sum(tl.where(s_raw > 0, pg, pg * slope), axis=0)
        pl += tl.sum(tl.where(s_raw > 0, p, p * slope), axis=0)
    tl.store(delta_ptr + v * num_heads + h, delta)
    tl.store(grad_er_ptr + v * num_heads + h, pgl - delta * pl)


@triton.jit
def _gat_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, feat_ptr, el_ptr, er_ptr, params_ptr, rng_ptr, lse_ptr,
                        grad_out_ptr, delta_ptr, grad_feat_ptr, grad_el_ptr, num_heads, head_dim,
                        BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr, DROPOUT: tl.constexpr):
    """Per source u, head h, feature block (out-CSR rows), recomputing p_e, w_e and g_e:
    grad_feat[u, h] = sum_e p_e w_e grad_out[v, h] and, in the first feature block, grad_el[u, h] =
    sum_e p_e (g_e - delta[v, h]) leaky'_e.  The first block's programs walk every feature block
    for the dot g_e (adding their own block's tile to grad_feat on the way), the others only theirs:
    one grad_out tile in registers at a time (a second one spilled on sm_80)."""
    acc_dtype = tl.float64 if el_ptr.dtype.element_ty == tl.float64 else tl.float32
    u = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    own = tl.program_id(2) * BLOCK_D
    first = tl.program_id(2) == 0
    d_end = tl.where(first, head_dim, own + BLOCK_D)  # the first block: every feature for the dot
    start = tl.load(indptr_ptr + u)
    end = tl.load(indptr_ptr + u + 1)
    slope = tl.load(params_ptr).to(acc_dtype)
    if DROPOUT:
        scale = tl.load(params_ptr + 1).to(acc_dtype)
        thr, key = _rng(rng_ptr, h)
    el_u = tl.load(el_ptr + u * num_heads + h).to(acc_dtype)
    row = (u * num_heads + h) * head_dim
    acc = tl.zeros((BLOCK_D,), acc_dtype)
    g_el = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        e_mask = k < end
        v = tl.load(indices_ptr + k, mask=e_mask, other=0).to(tl.int64)
        vh = v * num_heads + h
        s_raw = el_u + tl.load(er_ptr + vh, mask=e_mask, other=0.0).to(acc_dtype)
        p = tl.exp(leaky_relu(s_raw, slope) - tl.load(lse_ptr + vh, mask=e_mask, other=0.0).to(acc_dtype))
        p = tl.where(e_mask, p, 0.0)
        pw = p
        if DROPOUT:
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            pw = tl.where(dropout_keep(eid, key, thr), p * scale, 0.0)
        g = tl.zeros((BLOCK_E,), acc_dtype)
        for d0 in range(tl.where(first, 0, own), d_end, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            d_mask = d < head_dim
            go = tl.load(grad_out_ptr + vh[:, None] * head_dim + d[None, :], mask=e_mask[:, None] & d_mask[None, :],
                         other=0.0).to(acc_dtype)
            x = tl.load(feat_ptr + row + d, mask=d_mask, other=0.0).to(acc_dtype)
            g += tl.sum(go * x[None, :], axis=1)
            if d0 == own:
                acc += tl.sum(pw[:, None] * go, axis=0)
        gs = pw * g - p * tl.load(delta_ptr + vh, mask=e_mask, other=0.0).to(acc_dtype)  # p (w g - delta)
        g_el += tl.sum(tl.where(s_raw > 0, gs, gs * slope), axis=0)
    d = own + tl.arange(0, BLOCK_D)
    tl.store(grad_feat_ptr + row + d, acc.to(grad_feat_ptr.dtype.element_ty), mask=d < head_dim)
    if first:
        tl.store(grad_el_ptr + u * num_heads + h, g_el)


# ------------------------------------------------------------------ launch configuration
# BLOCK_E in-edges per step, BLOCK_D features per program (D > BLOCK_D: more programs).
BLOCK_E = 32
FEATURE_TILES = (16, 64)


def feature_tile(head_dim: int) -> int:
    return FEATURE_TILES[0] if head_dim <= FEATURE_TILES[0] else FEATURE_TILES[1]


def num_warps(block_d: int) -> int:
    """About 256 tile elements per warp (as in gspmm_grouped), at least 4 warps: in the AOT table
    32 x 64 tiles on 2 warps spilled in the backward kernels (255 registers), and one 32 x 16
    variant on 2 warps spilled 24 bytes on sm_90."""
    return max(4, min(8, BLOCK_E * block_d // 256))


def maxnreg(kernel: str, block_d: int, dropout: bool) -> int | None:
    """Register cap: 168 for the source-side backward with dropout on the 64-feature tile (8 warps;
    triton 3.6's ptxas stopped at its 128-register target and spilled 16-32 bytes on sm_80 and
    sm_90; at 168 none, one 256-thread block per SM instead of two); None elsewhere."""
    return 168 if kernel == "_gat_bwd_src_kernel" and block_d == 64 and dropout else None


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
KERNELS = ("_gat_fwd_kernel", "_gat_bwd_dst_kernel", "_gat_bwd_src_kernel")


def _spec(kernel: str, t: str, idx: str, block_d: int, dropout: bool) -> Specialisation:
    acc = "fp64" if t == "fp64" else "fp32"
    types = {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "feat_ptr": f"*{t}",
             "el_ptr": f"*{t}", "er_ptr": f"*{t}", "params_ptr": f"*{acc}", "rng_ptr": "*i64", "out_ptr": f"*{t}",
             "lse_ptr": f"*{acc}", "grad_out_ptr": f"*{t}", "delta_ptr": f"*{acc}", "grad_er_ptr": f"*{acc}",
             "grad_feat_ptr": f"*{t}", "grad_el_ptr": f"*{acc}", "num_heads": "i32", "head_dim": "i32",
             "BLOCK_E": "constexpr", "BLOCK_D": "constexpr", "DROPOUT": "constexpr"}
    inputs = ("indptr_ptr", "indices_ptr", "eids_ptr", "feat_ptr", "el_ptr", "er_ptr", "params_ptr", "rng_ptr")
    args = inputs + {
        "_gat_fwd_kernel": ("out_ptr", "lse_ptr"),
        "_gat_bwd_dst_kernel": ("lse_ptr", "grad_out_ptr", "delta_ptr", "grad_er_ptr"),
        "_gat_bwd_src_kernel": ("lse_ptr", "grad_out_ptr", "delta_ptr", "grad_feat_ptr", "grad_el_ptr"),
    }[kernel] + ("num_heads", "head_dim", "BLOCK_E", "BLOCK_D", "DROPOUT")
    return Specialisation("gat", kernel, {a: types[a] for a in args},
                          {"BLOCK_E": BLOCK_E, "BLOCK_D": block_d, "DROPOUT": dropout},
                          num_warps=num_warps(block_d), maxnreg=maxnreg(kernel, block_d, dropout))


SPECIALISATIONS = [_spec(k, t, idx, bd, drop) for k in KERNELS for t in _DT for idx in _IDX for bd in FEATURE_TILES
                   for drop in (False, True)]
