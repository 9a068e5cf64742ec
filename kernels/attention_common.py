"""``@triton.jit`` pieces shared by the fused attention variants over CSR rows (``dot.py``,
``gatv2.py`` and their ``_heads`` twins): a program's row and head, a chunk of a row's edges, FlashAttention's
online softmax (start, step, store), the attention recompute's store and the backward's per-edge terms;
and the tile shapes of every all-heads module (``gat_heads.py`` too).

Triton inlines a jit function called from a jit kernel, so these cost nothing at run time and the
kernels keep their signatures (the registered specialisations live in the variants' modules; this
module registers none).  Accumulation is in the dtype the callers pick (fp32, fp64 for fp64 inputs);
addresses are int64.
"""
import triton
import triton.language as tl


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
def row_program(indptr_ptr, BLOCK_D: tl.constexpr):
    """(row r, head h, the feature block d, r's entries [start, end)) of this program: grid
    (rows, heads, feature blocks); d is 0..BLOCK_D - 1 on a two-dimensional grid."""
    r = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    start = tl.load(indptr_ptr + r)
    end = tl.load(indptr_ptr + r + 1)
    return r, h, d, start, end


@triton.jit
def edge_chunk(indices_ptr, k0, end, BLOCK_E: tl.constexpr):
    """(entry positions kk, their mask, the other ends int64) of the chunk of BLOCK_E entries from k0."""
    kk = k0 + tl.arange(0, BLOCK_E)
    e_mask = kk < end
    other = tl.load(indices_ptr + kk, mask=e_mask, other=0).to(tl.int64)
    return kk, e_mask, other


@triton.jit
def edge_ids(eids_ptr, kk, e_mask):
    """The chunk's edge ids, int64."""
    return tl.load(eids_ptr + kk, mask=e_mask, other=0).to(tl.int64)


@triton.jit
def weighted_rows(w, x_ptr, rows, d, e_mask, d_mask):
    """sum_i w[i] x[rows[i] + d] over the chunk's BLOCK_E rows (w's dtype): one feature block."""
    x = tl.load(x_ptr + rows[:, None] + d[None, :], mask=e_mask[:, None] & d_mask[None, :], other=0.0)
    return tl.sum(w[:, None] * x.to(w.dtype), axis=0)


@triton.jit
def softmax_start(x_ptr, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr):
    """(running max -inf, running sum 0, BLOCK_D accumulator 0) in x's accumulation dtype."""
    acc_dtype = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    m = tl.max(tl.full((BLOCK_E,), float("-inf"), acc_dtype), axis=0)  # a scalar of acc_dtype
    denom = tl.sum(tl.zeros((BLOCK_E,), acc_dtype), axis=0)
    acc = tl.zeros((BLOCK_D,), acc_dtype)
    return m, denom, acc


@triton.jit
def softmax_step(m, denom, acc, s, e_mask, x_ptr, rows, d, d_mask):
    """One chunk of scores s (masked entries ignored) into the online softmax: (m, denom, acc) rescaled
    to the new max, plus sum_i exp(s_i - m) and sum_i exp(s_i - m) x[rows[i] + d]."""
    s = tl.where(e_mask, s, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, axis=0))  # finite: the chunk has at least one entry
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new)
    denom = denom * alpha + tl.sum(p, axis=0)
    acc = acc * alpha + weighted_rows(p, x_ptr, rows, d, e_mask, d_mask)
    return m_new, denom, acc


@triton.jit
def softmax_store(out_ptr, lse_ptr, vh, dim, d, d_mask, m, denom, acc):
    """out[vh, d] = acc / denom and, from the first feature block, lse[vh] = m + log(denom)."""
    denom = tl.where(denom > 0, denom, 1.0)  # a destination without in-edges: acc = 0, lse = -inf
    tl.store(out_ptr + vh * dim + d, (acc / denom).to(out_ptr.dtype.element_ty), mask=d_mask)
    if tl.program_id(2) == 0:
        tl.store(lse_ptr + vh, m + tl.log(denom))


@triton.jit
def store_attention(a_ptr, eid, num_heads, h, s, lse_v, e_mask):
    """a[eid, h] = exp(s - lse[v, h]) for the chunk's edges."""
    tl.store(a_ptr + eid * num_heads + h, tl.exp(s - lse_v).to(a_ptr.dtype.element_ty), mask=e_mask)


@triton.jit
def edge_grad(s, lse, c, t, ga_ptr, ga_on, eid, num_heads, h, e_mask):
    """(p, ds) of a chunk: p_e = exp(s_e - lse) and ds_e = p_e (t_e + grad_attn_e - c), both 0 where
    masked; grad_attn is read at (eid * H + h) * ga_on (ga_on = 0: a one-element zero tensor)."""
    ga = tl.load(ga_ptr + (eid * num_heads + h) * ga_on, mask=e_mask, other=0.0).to(s.dtype)
    p = tl.where(e_mask, tl.exp(s - lse), 0.0)
    return p, p * (t + ga - c)


@triton.jit
def row_term_start(lse_v, BLOCK_E: tl.constexpr):
    """Zeros [BLOCK_E] of lse's dtype: per-lane partial sums of c[v, h] = sum over v's in-edges of p_e t_e
    or of sum p_e (summed by :func:`store_row_term`)."""
    return tl.zeros((BLOCK_E,), lse_v.dtype)


@triton.jit
def row_term_chunk(s, lse, t, ga_ptr, ga_on, eid, num_heads, h, e_mask):
    """(p_e, p_e (t_e + grad_attn_e)) of the chunk's edges (0 where masked): their shares of sum_e p_e and
    of c[v, h], summed in the accumulation dtype from the recomputed p_e (the output rounded to a half
    type is too coarse)."""
    return edge_grad(s, lse, 0.0, t, ga_ptr, ga_on, eid, num_heads, h, e_mask)


@triton.jit
def store_row_term(c_ptr, vh, c_parts, p_parts):
    """c[vh] = sum p_e t_e / sum p_e from the per-lane partial sums (sum p_e is 1 up to lse's rounding:
    dividing keeps sum_e ds_e = 0), returned; stored from the first feature block (every block of the
    row computes the same sum): the source pass, launched after, reads it."""
    den = tl.sum(p_parts, axis=0)
    c_v = tl.sum(c_parts, axis=0) / tl.where(den > 0, den, 1.0)
    if tl.program_id(2) == 0:
        tl.store(c_ptr + vh, c_v)
    return c_v


@triton.jit
def dst_terms(lse_ptr, c_ptr, vh, e_mask):
    """(lse[vh], c[vh]) for the chunk's destinations vh (0 where masked), fp32 or fp64 as stored."""
    lse = tl.load(lse_ptr + vh, mask=e_mask, other=0.0)
    c = tl.load(c_ptr + vh, mask=e_mask, other=0.0)
    return lse, c


# ------------------------------------------------------------------ one program per row, every head
# (``dot_heads.py``, ``gatv2_heads.py``): tiles [BLOCK_E, BLOCK_H, BLOCK_D] of
# (a chunk's edges, heads, features), a head's softmax state a [BLOCK_H] vector
@triton.jit
def heads_program(indptr_ptr, num_heads, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """(row r = program 0, heads h, their mask, features d, r's entries [start, end)): grid (rows,)."""
    r = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, BLOCK_H).to(tl.int64)
    return r, h, h < num_heads, tl.arange(0, BLOCK_D), tl.load(indptr_ptr + r), tl.load(indptr_ptr + r + 1)


@triton.jit
def head_offsets(h, h_mask, d, dim):
    """([BLOCK_H, BLOCK_D] offsets h * dim + d within a node's [H, dim] row, their mask)."""
    return h[:, None] * dim + d[None, :], h_mask[:, None] & (d < dim)[None, :]


@triton.jit
def node_heads(x_ptr, node, num_heads, dim, hd, hd_mask, acc_like):
    """x[node] as a [BLOCK_H, BLOCK_D] tile in the dtype of ``acc_like`` (0 where masked)."""
    x = tl.load(x_ptr + node * (num_heads * dim) + hd, mask=hd_mask, other=0.0)
    return x.to(acc_like.dtype)


@triton.jit
def edges_heads(x_ptr, nodes, num_heads, dim, hd, hd_mask, e_mask, acc_like):
    """x[nodes[i]] for the chunk's BLOCK_E nodes as a [BLOCK_E, BLOCK_H, BLOCK_D] tile (0 where masked)."""
    x = tl.load(x_ptr + nodes[:, None, None] * (num_heads * dim) + hd[None, :, :],
                mask=e_mask[:, None, None] & hd_mask[None, :, :], other=0.0)
    return x.to(acc_like.dtype)


@triton.jit
def heads_softmax_start(acc_like, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """(running max -inf [BLOCK_H], running sum 0 [BLOCK_H], accumulator 0 [BLOCK_H, BLOCK_D])."""
    m = tl.full((BLOCK_H,), float("-inf"), acc_like.dtype)
    return m, tl.zeros((BLOCK_H,), acc_like.dtype), tl.zeros((BLOCK_H, BLOCK_D), acc_like.dtype)


@triton.jit
def heads_softmax_step(m, denom, acc, s, eh_mask, x):
    """One chunk's scores s [BLOCK_E, BLOCK_H] (masked entries ignored) and rows x [BLOCK_E, BLOCK_H,
    BLOCK_D] into every head's online softmax."""
    s = tl.where(eh_mask, s, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, axis=0))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new).to(acc.dtype)  # heads past num_heads
    alpha = tl.exp(m - m_safe)
    p = tl.exp(s - m_safe[None, :])
    denom = denom * alpha + tl.sum(p, axis=0)
    return m_new, denom, acc * alpha[:, None] + tl.sum(p[:, :, None] * x, axis=0)


@triton.jit
def heads_softmax_store(out_ptr, lse_ptr, v, num_heads, dim, h, h_mask, hd, hd_mask, m, denom, acc):
    """out[v] = acc / denom ([H, dim]) and lse[v, h] = m + log(denom) (-inf for a row without entries)."""
    denom = tl.where(denom > 0, denom, 1.0)
    tl.store(out_ptr + v * (num_heads * dim) + hd, (acc / denom[:, None]).to(out_ptr.dtype.element_ty), mask=hd_mask)
    tl.store(lse_ptr + v * num_heads + h, m + tl.log(denom), mask=h_mask)


@triton.jit
def heads_edge_grad(s, lse, c, t, ga_ptr, ga_on, eid, num_heads, h, eh_mask):
    """:func:`edge_grad` for [BLOCK_E, BLOCK_H] chunks: (p, ds = p (t + grad_attn - c)), 0 where masked;
    ``lse`` and ``c`` [BLOCK_H] (a destination's) or [BLOCK_E, BLOCK_H] (each edge's)."""
    ga = tl.load(ga_ptr + (eid[:, None] * num_heads + h[None, :]) * ga_on, mask=eh_mask, other=0.0).to(s.dtype)
    p = tl.where(eh_mask, tl.exp(s - lse), 0.0)
    return p, p * (t + ga - c)


@triton.jit
def heads_row_term(c_ptr, v, num_heads, h, h_mask, c_parts, p_parts):
    """c[v, h] = sum p_e t_e / sum p_e for every head (:func:`store_row_term`), stored and returned."""
    c_v = c_parts / tl.where(p_parts > 0, p_parts, 1.0)
    tl.store(c_ptr + v * num_heads + h, c_v, mask=h_mask)
    return c_v


# ------------------------------------------------------------------ the all-heads kernels' tiles
# (``gat_heads.py``, ``gatv2_heads.py``, ``dot_heads.py`` re-export them; each has its own ``maxnreg``)
BLOCK_E = 16
# (BLOCK_H, BLOCK_D) of one program's [heads, features] row, at most 128 entries: 2-4 heads of up to
# 16 or 32 features, 5-8 heads of up to 8 or 16 (the GAT paper's 8 x 8 among them)
SHAPES = ((4, 16), (4, 32), (8, 8), (8, 16))


def tiles(num_heads: int, head_dim: int) -> tuple[int, int] | None:
    """The smallest of ``SHAPES`` covering every head and feature in one program, or None: one
    head (the per-head kernels are that case) or a row too wide for a tile."""
    if num_heads < 2:
        return None
    return next(((bh, bd) for bh, bd in SHAPES if bh >= num_heads and bd >= head_dim), None)


def num_warps(block_h: int, block_d: int) -> int:
    """About 256 tile elements per warp over the [BLOCK_E, BLOCK_H, BLOCK_D] tile, 2 to 8."""
    return max(2, min(8, BLOCK_E * block_h * block_d // 256))
