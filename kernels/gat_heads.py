"""Fused GAT with one program per row covering every head (``gat.py`` has one per
row and head): for many heads of few features (8 x 8, 4 x 16, 4 x 32), where a program per
(row, head) carries a [BLOCK_E, <= 16]-element tile and the grid is H times longer than the rows.
The maths, the saved normaliser lse[v, h] and the dropout mask are ``gat.py``'s, the tiles
[BLOCK_E, BLOCK_H, BLOCK_D] (in-edges x heads x features), so a head's softmax state is a row of
[BLOCK_H] vectors and its accumulator a row of [BLOCK_H, BLOCK_D].  Taken when the heads and the
head width fit one tile (``tiles``); the reference is ``core/attention/reference.py`` as for the
per-head kernels.
"""
import triton
import triton.language as tl

# the tiles, their rule and launch width, shared by every all-heads module (``tiles`` looked up here: patchable)
from .attention_common import BLOCK_E, SHAPES, num_warps, tiles  # noqa: F401
from .gat import dropout_keep, leaky_relu
from .registry import Specialisation


@triton.jit
def _row_start(indptr_ptr, el_ptr, params_ptr, rng_ptr, num_heads, head_dim, BLOCK_H: tl.constexpr,
               BLOCK_D: tl.constexpr, DROPOUT: tl.constexpr):
    """What every kernel here reads first for its row r = program 0: (r, heads, their mask, [H, D]
    offsets and mask, the row's CSR range, the slope, the dropout scale, threshold and the heads'
    keys as uint32 (``gat._rng`` for a vector of heads; unread without dropout)), the floats
    in the accumulation dtype of ``el_ptr``'s."""
    acc_dtype = tl.float64 if el_ptr.dtype.element_ty == tl.float64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, BLOCK_H).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    h_mask = h < num_heads
    hd, hd_mask = h[:, None] * head_dim + d[None, :], h_mask[:, None] & (d < head_dim)[None, :]
    scale = tl.load(params_ptr + 1).to(acc_dtype)  # [slope, scale]: 1.0 without dropout
    key = tl.load(rng_ptr + 1 + h, mask=h_mask & DROPOUT, other=0).to(tl.uint32)
    return (r, h, h_mask, hd, hd_mask, tl.load(indptr_ptr + r), tl.load(indptr_ptr + r + 1),
            tl.load(params_ptr).to(acc_dtype), scale, tl.load(rng_ptr).to(tl.uint32), key)


@triton.jit
def _gat_heads_fwd_kernel(indptr_ptr, indices_ptr, eids_ptr, feat_ptr, el_ptr, er_ptr, params_ptr, rng_ptr, out_ptr,
                          lse_ptr, num_heads, head_dim, BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                          BLOCK_D: tl.constexpr, DROPOUT: tl.constexpr):
    acc_dtype = tl.float64 if el_ptr.dtype.element_ty == tl.float64 else tl.float32
    v, h, h_mask, hd, hd_mask, start, end, slope, scale, thr, key = _row_start(
        indptr_ptr, el_ptr, params_ptr, rng_ptr, num_heads, head_dim, BLOCK_H, BLOCK_D, DROPOUT)
    er_v = tl.load(er_ptr + v * num_heads + h, mask=h_mask, other=0.0).to(acc_dtype)
    m = tl.full((BLOCK_H,), float("-inf"), acc_dtype)
    denom = tl.zeros((BLOCK_H,), acc_dtype)
    acc = tl.zeros((BLOCK_H, BLOCK_D), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        e_mask = k < end
        eh_mask = e_mask[:, None] & h_mask[None, :]
        u = tl.load(indices_ptr + k, mask=e_mask, other=0).to(tl.int64)
        el = tl.load(el_ptr + u[:, None] * num_heads + h[None, :], mask=eh_mask, other=0.0).to(acc_dtype)
        s = tl.where(eh_mask, leaky_relu(el + er_v[None, :], slope), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new).to(acc_dtype)  # heads past num_heads
        alpha = tl.exp(m - m_safe)
        p = tl.exp(s - m_safe[None, :])
        denom = denom * alpha + tl.sum(p, axis=0)
        if DROPOUT:  # the softmax normalises over every edge; the sum takes the kept ones, scaled
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            p = tl.where(dropout_keep(eid[:, None], key[None, :], thr), p * scale, 0.0)
        x = tl.load(feat_ptr + u[:, None, None] * (num_heads * head_dim) + hd[None, :, :],
                    mask=e_mask[:, None, None] & hd_mask[None, :, :], other=0.0)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * x.to(acc_dtype), axis=0)
        m = m_new
    denom = tl.where(denom > 0, denom, 1.0)  # a destination without in-edges: acc = 0, lse = -inf
    row = v * num_heads * head_dim
    tl.store(out_ptr + row + hd, (acc / denom[:, None]).to(out_ptr.dtype.element_ty), mask=hd_mask)
    tl.store(lse_ptr + v * num_heads + h, m + tl.log(denom), mask=h_mask)


@triton.jit
def _gat_heads_bwd_dst_kernel(indptr_ptr, indices_ptr, eids_ptr, feat_ptr, el_ptr, er_ptr, params_ptr, rng_ptr,
                              lse_ptr, grad_out_ptr, delta_ptr, grad_er_ptr, num_heads, head_dim,
                              BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                              DROPOUT: tl.constexpr):
    """``gat._gat_bwd_dst_kernel`` for every head of destination v at once."""
    acc_dtype = tl.float64 if el_ptr.dtype.element_ty == tl.float64 else tl.float32
    v, h, h_mask, hd, hd_mask, start, end, slope, scale, thr, key = _row_start(
        indptr_ptr, el_ptr, params_ptr, rng_ptr, num_heads, head_dim, BLOCK_H, BLOCK_D, DROPOUT)
    er_v = tl.load(er_ptr + v * num_heads + h, mask=h_mask, other=0.0).to(acc_dtype)
    lse_v = tl.load(lse_ptr + v * num_heads + h, mask=h_mask, other=0.0).to(acc_dtype)
    go = tl.load(grad_out_ptr + v * num_heads * head_dim + hd, mask=hd_mask, other=0.0).to(acc_dtype)
    delta = tl.zeros((BLOCK_H,), acc_dtype)
    pgl = tl.zeros((BLOCK_H,), acc_dtype)
    pl = tl.zeros((BLOCK_H,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        e_mask = k < end
        eh_mask = e_mask[:, None] & h_mask[None, :]
        u = tl.load(indices_ptr + k, mask=e_mask, other=0).to(tl.int64)
        s_raw = tl.load(el_ptr + u[:, None] * num_heads + h[None, :], mask=eh_mask, other=0.0).to(acc_dtype) \
            + er_v[None, :]
        p = tl.where(eh_mask, tl.exp(leaky_relu(s_raw, slope) - lse_v[None, :]), 0.0)
        x = tl.load(feat_ptr + u[:, None, None] * (num_heads * head_dim) + hd[None, :, :],
                    mask=e_mask[:, None, None] & hd_mask[None, :, :], other=0.0)
        g = tl.sum(x.to(acc_dtype) * go[None, :, :], axis=2)
        if DROPOUT:
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            g = tl.where(dropout_keep(eid[:, None], key[None, :], thr), g * scale, 0.0)
        pg = p * g
        delta += tl.sum(pg, axis=0)
        pgl += tl.sum(tl.where(s_raw > 0, pg, pg * slope), axis=0)
        pl += tl.sum(tl.where(s_raw > 0, p, p * slope), axis=0)
    tl.store(delta_ptr + v * num_heads + h, delta, mask=h_mask)
    tl.store(grad_er_ptr + v * num_heads + h, pgl - delta * pl, mask=h_mask)


@triton.jit
def _gat_heads_bwd_src_kernel(indptr_ptr, indices_ptr, eids_ptr, feat_ptr, el_ptr, er_ptr, params_ptr, rng_ptr,
                              lse_ptr, grad_out_ptr, delta_ptr, grad_feat_ptr, grad_el_ptr, num_heads, head_dim,
                              BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                              DROPOUT: tl.constexpr):
    """``gat._gat_bwd_src_kernel`` for every head of source u at once (out-CSR rows): the
    whole [H, D] row of u in one tile, so no feature blocks."""
    acc_dtype = tl.float64 if el_ptr.dtype.element_ty == tl.float64 else tl.float32
    u, h, h_mask, hd, hd_mask, start, end, slope, scale, thr, key = _row_start(
        indptr_ptr, el_ptr, params_ptr, rng_ptr, num_heads, head_dim, BLOCK_H, BLOCK_D, DROPOUT)
    el_u = tl.load(el_ptr + u * num_heads + h, mask=h_mask, other=0.0).to(acc_dtype)
    row = u * num_heads * head_dim
    x = tl.load(feat_ptr + row + hd, mask=hd_mask, other=0.0).to(acc_dtype)
    acc = tl.zeros((BLOCK_H, BLOCK_D), acc_dtype)
    g_el = tl.zeros((BLOCK_H,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        e_mask = k < end
        eh_mask = e_mask[:, None] & h_mask[None, :]
        v = tl.load(indices_ptr + k, mask=e_mask, other=0).to(tl.int64)
        vh = v[:, None] * num_heads + h[None, :]
        s_raw = el_u[None, :] + tl.load(er_ptr + vh, mask=eh_mask, other=0.0).to(acc_dtype)
        p = tl.exp(leaky_relu(s_raw, slope) - tl.load(lse_ptr + vh, mask=eh_mask, other=0.0).to(acc_dtype))
        p = tl.where(eh_mask, p, 0.0)
        pw = p
        if DROPOUT:
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            pw = tl.where(dropout_keep(eid[:, None], key[None, :], thr), p * scale, 0.0)
        go = tl.load(grad_out_ptr + v[:, None, None] * (num_heads * head_dim) + hd[None, :, :],
                     mask=e_mask[:, None, None] & hd_mask[None, :, :], other=0.0).to(acc_dtype)
        g = tl.sum(go * x[None, :, :], axis=2)
        acc += tl.sum(pw[:, :, None] * go, axis=0)
        gs = pw * g - p * tl.load(delta_ptr + vh, mask=eh_mask, other=0.0).to(acc_dtype)  # p (w g - delta)
        g_el += tl.sum(tl.where(s_raw > 0, gs, gs * slope), axis=0)
    tl.store(grad_feat_ptr + row + hd, acc.to(grad_feat_ptr.dtype.element_ty), mask=hd_mask)
    tl.store(grad_el_ptr + u * num_heads + h, g_el, mask=h_mask)


# ------------------------------------------------------------------ launch configuration
def maxnreg(kernel: str, fp64: bool, block_h: int, block_d: int) -> int:
    """Register cap: without one, ptxas stopped at 64-128 registers and spilled 8-32 bytes in 43 of
    384 (kernel, target) pairs on triton 3.5.1; at 128 it takes 87-125 and spills none, except fp64
    on the 128-entry tiles (16-160 bytes), which get 232 (at 168 and 200 triton 3.6 still spilled 8
    bytes in one of them; fp64 is the reference dtype, not a training one).  The same for all three
    kernels: ``kernel`` keeps the all-heads modules' one signature (``core/attention/common.py``'s ``all_heads``)."""
    return 232 if fp64 and block_h * block_d >= 128 else 128


_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
KERNELS = ("_gat_heads_fwd_kernel", "_gat_heads_bwd_dst_kernel", "_gat_heads_bwd_src_kernel")


def _spec(kernel: str, t: str, idx: str, bh: int, bd: int, dropout: bool) -> Specialisation:
    acc = "fp64" if t == "fp64" else "fp32"
    types = {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "feat_ptr": f"*{t}",
             "el_ptr": f"*{t}", "er_ptr": f"*{t}", "params_ptr": f"*{acc}", "rng_ptr": "*i64", "out_ptr": f"*{t}",
             "lse_ptr": f"*{acc}", "grad_out_ptr": f"*{t}", "delta_ptr": f"*{acc}", "grad_er_ptr": f"*{acc}",
             "grad_feat_ptr": f"*{t}", "grad_el_ptr": f"*{acc}", "num_heads": "i32", "head_dim": "i32",
             "BLOCK_E": "constexpr", "BLOCK_H": "constexpr", "BLOCK_D": "constexpr", "DROPOUT": "constexpr"}
    inputs = ("indptr_ptr", "indices_ptr", "eids_ptr", "feat_ptr", "el_ptr", "er_ptr", "params_ptr", "rng_ptr")
    args = inputs + {
        "_gat_heads_fwd_kernel": ("out_ptr", "lse_ptr"),
        "_gat_heads_bwd_dst_kernel": ("lse_ptr", "grad_out_ptr", "delta_ptr", "grad_er_ptr"),
        "_gat_heads_bwd_src_kernel": ("lse_ptr", "grad_out_ptr", "delta_ptr", "grad_feat_ptr", "grad_el_ptr"),
    }[kernel] + ("num_heads", "head_dim", "BLOCK_E", "BLOCK_H", "BLOCK_D", "DROPOUT")
    return Specialisation("gat_heads", kernel, {a: types[a] for a in args},
                          {"BLOCK_E": BLOCK_E, "BLOCK_H": bh, "BLOCK_D": bd, "DROPOUT": dropout},
                          num_warps=num_warps(bh, bd), maxnreg=maxnreg(kernel, t == "fp64", bh, bd))


SPECIALISATIONS = [_spec(k, t, idx, bh, bd, drop) for k in KERNELS for t in _DT for idx in _IDX for bh, bd in SHAPES
                   for drop in (False, True)]
