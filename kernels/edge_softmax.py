"""Edge softmax over CSR rows, forward and backward (DGL's ``edge_softmax`` without DGL; the GAT kernels
of ``gat.py`` fuse it with the weighted sum instead).

A program owns one row (a normalisation group: a destination for DGL's default ``norm_by='dst'``) and a
block of BLOCK_H heads.  Pass 1 walks the row's entries in chunks of BLOCK_E with an online max/sum
(running max m, sum l rescaled by exp(m_old - m_new)); pass 2 writes exp(x - m) / l.  Scores live in
edge-id order: entry k of the row is edge ``eids[k]``.  The backward is DGL's own: from the output a,
grad_score = a * (grad - sum over the row of a * grad).

Accumulation is fp32 (fp64 for fp64 inputs); row pointers and all address arithmetic are int64.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def _chunk(eids_ptr, k0, end, h, h_mask, num_heads, BLOCK_E: tl.constexpr):
    """(offsets [BLOCK_E, BLOCK_H] of the chunk's entries k0.. (edge-id order) x heads h, their mask)."""
    k = k0 + tl.arange(0, BLOCK_E)
    e_mask = k < end
    eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
    return eid[:, None] * num_heads + h[None, :], e_mask[:, None] & h_mask[None, :]


@triton.jit
def _edge_softmax_fwd_kernel(indptr_ptr, eids_ptr, score_ptr, out_ptr, num_heads,
                             BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr):
    acc_dtype = tl.float64 if score_ptr.dtype.element_ty == tl.float64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = h < num_heads
    start = tl.load(indptr_ptr + r)
    end = tl.load(indptr_ptr + r + 1)
    m = tl.full((BLOCK_H,), float("-inf"), acc_dtype)
    denom = tl.zeros((BLOCK_H,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        offs, m2 = _chunk(eids_ptr, k0, end, h, h_mask, num_heads, BLOCK_E)
        x = tl.load(score_ptr + offs, mask=m2, other=float("-inf")).to(acc_dtype)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new).to(acc_dtype)  # heads past num_heads
        denom = denom * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe[None, :]), axis=0)
        m = m_new
    m_safe = tl.where(m == float("-inf"), 0.0, m).to(acc_dtype)
    inv = 1.0 / tl.where(denom > 0, denom, 1.0)  # heads past num_heads and empty rows: no entries
    for k0 in range(start, end, BLOCK_E):
        offs, m2 = _chunk(eids_ptr, k0, end, h, h_mask, num_heads, BLOCK_E)
        x = tl.load(score_ptr + offs, mask=m2, other=float("-inf")).to(acc_dtype)
        y = tl.exp(x - m_safe[None, :]) * inv[None, :]
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m2)


@triton.jit
def _edge_softmax_bwd_kernel(indptr_ptr, eids_ptr, out_ptr, grad_ptr, grad_score_ptr, num_heads,
                             BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr):
    """grad_score = a * (grad - sum over the row of a * grad), per head."""
    acc_dtype = tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = h < num_heads
    start = tl.load(indptr_ptr + r)
    end = tl.load(indptr_ptr + r + 1)
    total = tl.zeros((BLOCK_H,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        offs, m2 = _chunk(eids_ptr, k0, end, h, h_mask, num_heads, BLOCK_E)
        a = tl.load(out_ptr + offs, mask=m2, other=0.0).to(acc_dtype)
        g = tl.load(grad_ptr + offs, mask=m2, other=0.0).to(acc_dtype)
        total += tl.sum(a * g, axis=0)
    for k0 in range(start, end, BLOCK_E):
        offs, m2 = _chunk(eids_ptr, k0, end, h, h_mask, num_heads, BLOCK_E)
        a = tl.load(out_ptr + offs, mask=m2, other=0.0).to(acc_dtype)
        g = tl.load(grad_ptr + offs, mask=m2, other=0.0).to(acc_dtype)
        tl.store(grad_score_ptr + offs, (a * (g - total[None, :])).to(grad_score_ptr.dtype.element_ty), mask=m2)


# ------------------------------------------------------------------ launch configuration
# (BLOCK_E, BLOCK_H) per program; one head per program when H == 1, else 8 heads.
TILES = ((64, 1), (32, 8))
NUM_WARPS = 2


def tile(num_heads: int) -> tuple[int, int]:
    return TILES[0] if num_heads == 1 else TILES[1]


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
KERNELS = ("_edge_softmax_fwd_kernel", "_edge_softmax_bwd_kernel")


def _spec(kernel: str, t: str, idx: str, block_e: int, block_h: int) -> Specialisation:
    ptrs = ("score_ptr", "out_ptr") if kernel == "_edge_softmax_fwd_kernel" else \
        ("out_ptr", "grad_ptr", "grad_score_ptr")
    sig = {"indptr_ptr": "*i64", "eids_ptr": f"*{idx}", **{p: f"*{t}" for p in ptrs}, "num_heads": "i32",
           "BLOCK_E": "constexpr", "BLOCK_H": "constexpr"}
    return Specialisation("edge_softmax", kernel, sig, {"BLOCK_E": block_e, "BLOCK_H": block_h}, num_warps=NUM_WARPS)


SPECIALISATIONS = [_spec(k, t, idx, be, bh) for k in KERNELS for t in _DT for idx in _IDX for be, bh in TILES]
