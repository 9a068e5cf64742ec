"""Compiled CPU loops of the attention ops (:mod:`dgl_accel.core.attention`): edge softmax over CSR
rows and the fused GAT aggregation, forward and backward, on numpy arrays (float32 or float64; the
caller converts half types to float32 and back, as the native torch path does).

Why: the native path (:mod:`dgl_accel.core.attention.native`) is vectorised torch over edges, so it
materialises E x H x D messages (the GAT forward's ``a * feat[src]`` and the backward's
``p * grad_out[dst]``) and a dozen E x H temporaries.  These loops make one pass per CSR row instead:

* GAT forward, ``prange`` over destinations (in-CSR rows): v's scores and their max per head (a
  buffer of the row's scores), then one pass over v's in-edges summing exp(s - m) feat[u] into an
  accumulator of H x D floats, writing ``out[v]`` and ``lse[v] = m + log(l)``;
* GAT backward, pass A over destinations: p_e = exp(s_e - lse[v]) recomputed, grad_s, its leaky
  derivative and grad_er, with p and grad_s * leaky' kept in an E x 2 x H scratch array (by in-CSR
  position: sequential writes); pass B over sources (out-CSR rows, each entry's in-CSR position
  given): grad_feat and grad_el.  Each output row is written by the one
  task owning it: no atomics, no races;
* edge softmax forward (subtract the row max; numpy's vectorised exp in place; divide by the row
  sum) and backward (a * (grad - sum over the row of a * grad)) in edge-id order, given every
  edge's row: reads and writes sequential, only per-row maxima and sums indexed by row (gathering a
  row's scores through the CSR's edge ids instead costs a cache miss per 16 bytes and measured 2x
  slower; numba's scalar exp cost about 20% more than numpy's in between).

Rows are cut into ``CHUNKS`` ranges of about equal edge counts, one parallel task each (as
``rows_spmm``): real graphs have a few hub rows among many light ones.  Sums run in the arrays' dtype
(float32 for float32, as the native path accumulates).  Each loop has (parallel, serial) twins
(:func:`~dgl_accel.core.jit.runtime.twins`) so DataLoader workers can run them.
"""
from __future__ import annotations

import math

import numpy as np

from .runtime import njit, pick, prange, twins

__all__ = ["CHUNKS", "gat_forward", "gat_attention", "gat_backward", "out_to_in", "partitions", "max_degree",
           "edge_softmax_forward", "edge_softmax_backward"]

CHUNKS = 64  # parallel tasks per call (row ranges of about equal edge counts)
# Sums may be reordered (and multiply-adds fused), so the D-long dot products of the GAT backward
# vectorise; no assumption about infinities or NaN (the online max starts at -inf).
REASSOC = {"reassoc", "contract"}


@njit(cache=True)
def _bounds(indptr, nch):
    """Row range boundaries [nch + 1] cutting the CSR into ``nch`` ranges of about equal entries."""
    n = indptr.shape[0] - 1
    bounds = np.searchsorted(indptr, np.arange(nch + 1) * (indptr[n] // nch + 1))
    bounds = np.minimum(bounds, n)  # searchsorted may answer n + 1 past the last row pointer
    bounds[0] = 0
    bounds[nch] = n
    return bounds


def _gat_fwd_impl(indptr, indices, feat, el, er, slope, out, lse, max_degree):
    """out[v, h] = sum_e softmax_e(leaky(el[u, h] + er[v, h])) feat[u, h] over v's in-edges: the
    row's scores and their max first (16 bytes read per edge), then exp and the weighted sum of
    feature rows, branch-free (an online softmax's rescaling branch measured 20-30% slower)."""
    H = feat.shape[1]
    D = feat.shape[2]
    bounds = _bounds(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        m = np.empty(H, dtype=out.dtype)  # max, sum, accumulator and the row's scores: one set per task
        lsum = np.empty(H, dtype=out.dtype)
        acc = np.empty((H, D), dtype=out.dtype)
        sbuf = np.empty((max_degree, H), dtype=out.dtype)
        sl = slope[0]
        for v in range(bounds[ch], bounds[ch + 1]):
            start = indptr[v]
            n = indptr[v + 1] - start
            for h in range(H):
                m[h] = -np.inf
                lsum[h] = 0
                for d in range(D):
                    acc[h, d] = 0
            for j in range(n):
                u = indices[start + j]
                for h in range(H):
                    s = el[u, h] + er[v, h]
                    if not s > 0:
                        s = s * sl
                    sbuf[j, h] = s
                    m[h] = max(m[h], s)
            for j in range(n):
                for h in range(H):
                    p = math.exp(sbuf[j, h] - m[h])
                    sbuf[j, h] = p
                    lsum[h] += p
            for j in range(n):
                u = indices[start + j]
                for h in range(H):
                    p = sbuf[j, h]
                    for d in range(D):
                        acc[h, d] += p * feat[u, h, d]
            for h in range(H):
                den = lsum[h]
                if den > 0:
                    for d in range(D):
                        out[v, h, d] = acc[h, d] / den
                    lse[v, h] = m[h] + math.log(den)
                else:  # no in-edges: out 0 and lse -inf as the native path (never read by backward)
                    for d in range(D):
                        out[v, h, d] = 0
                    lse[v, h] = -np.inf


_gat_fwd_parallel, _gat_fwd_serial = twins(_gat_fwd_impl, fastmath=REASSOC)


def _gat_attention_impl(indptr, indices, eids, el, er, slope, lse, a):
    """a[e, h] = exp(leaky(el[u, h] + er[v, h]) - lse[v, h]) for every in-edge e = (u -> v)."""
    H = el.shape[1]
    bounds = _bounds(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        for v in range(bounds[ch], bounds[ch + 1]):
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                e = eids[k]
                for h in range(H):
                    s = el[u, h] + er[v, h]
                    if not s > 0:
                        s = s * sl
                    a[e, h] = math.exp(s - lse[v, h])


_gat_attention_parallel, _gat_attention_serial = twins(_gat_attention_impl, fastmath=REASSOC)


def _gat_bwd_dst_impl(indptr, indices, eids, feat, el, er, slope, out, lse, grad_out, grad_attn, has_attn,
                      scratch, grad_er):
    """Pass A over destinations: for the in-CSR entry k of edge e, scratch[k, 0] = p_e and
    scratch[k, 1] = grad_s (plus the softmax backward of ``grad_attn``) times leaky'(raw);
    grad_er[v] = the latter's sum over v's in-edges.  Stored by CSR position: sequential writes."""
    H = feat.shape[1]
    D = feat.shape[2]
    bounds = _bounds(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        dv = np.empty(H, dtype=grad_er.dtype)
        tot = np.empty(H, dtype=grad_er.dtype)
        ger = np.empty(H, dtype=grad_er.dtype)
        for v in range(bounds[ch], bounds[ch + 1]):
            for h in range(H):
                t = grad_out[v, h, 0] * out[v, h, 0]
                for d in range(1, D):
                    t += grad_out[v, h, d] * out[v, h, d]
                dv[h] = t  # <grad_out[v], out[v]> = sum_e p_e <grad_out[v], feat[u]>
                tot[h] = 0
                ger[h] = 0
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                for h in range(H):
                    raw = el[u, h] + er[v, h]
                    s = raw if raw > 0 else raw * sl
                    p = math.exp(s - lse[v, h])
                    t = grad_out[v, h, 0] * feat[u, h, 0]
                    for d in range(1, D):
                        t += grad_out[v, h, d] * feat[u, h, d]
                    gs = p * (t - dv[h])
                    scratch[k, 0, h] = p
                    if has_attn:  # leaky' after the attention's term, in the second loop
                        scratch[k, 1, h] = gs
                        tot[h] += p * grad_attn[eids[k], h]
                    else:
                        gs = gs if raw > 0 else gs * sl
                        scratch[k, 1, h] = gs
                        ger[h] += gs
            if has_attn:
                for k in range(indptr[v], indptr[v + 1]):
                    u = indices[k]
                    e = eids[k]
                    for h in range(H):
                        p = scratch[k, 0, h]  # + the segment softmax backward: p * (ga - sum_row(p * ga))
                        gs = scratch[k, 1, h] + p * grad_attn[e, h] - p * tot[h]
                        if not el[u, h] + er[v, h] > 0:
                            gs = gs * sl
                        scratch[k, 1, h] = gs
                        ger[h] += gs
            for h in range(H):
                grad_er[v, h] = ger[h]


_gat_bwd_dst_parallel, _gat_bwd_dst_serial = twins(_gat_bwd_dst_impl, fastmath=REASSOC)


def _gat_bwd_src_impl(indptr, indices, to_in, scratch, grad_out, grad_feat, grad_el):
    """Pass B over sources: grad_feat[u] = sum p_e grad_out[v], grad_el[u] = sum of grad_s * leaky'
    over u's out-edges; ``to_in[k]``: the in-CSR position of the out-CSR entry k (where pass A
    stored the edge's p and grad)."""
    H = grad_out.shape[1]
    D = grad_out.shape[2]
    bounds = _bounds(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        acc = np.empty((H, D), dtype=grad_feat.dtype)
        gl = np.empty(H, dtype=grad_el.dtype)
        for u in range(bounds[ch], bounds[ch + 1]):
            for h in range(H):
                gl[h] = 0
                for d in range(D):
                    acc[h, d] = 0
            for k in range(indptr[u], indptr[u + 1]):
                v = indices[k]
                q = to_in[k]
                for h in range(H):
                    p = scratch[q, 0, h]
                    gl[h] += scratch[q, 1, h]
                    for d in range(D):
                        acc[h, d] += p * grad_out[v, h, d]
            for h in range(H):
                grad_el[u, h] = gl[h]
                for d in range(D):
                    grad_feat[u, h, d] = acc[h, d]


_gat_bwd_src_parallel, _gat_bwd_src_serial = twins(_gat_bwd_src_impl, fastmath=REASSOC)


@njit(cache=True)
def _edge_range(part, nparts, num_edges):
    step = (num_edges + nparts - 1) // nparts
    return min(part * step, num_edges), min((part + 1) * step, num_edges)


@njit(cache=True)
def _merge_sums(parts):
    """parts[0] += parts[1] + parts[2] + ... (the partial per-row sums of the edge ranges), in order."""
    for p in range(1, parts.shape[0]):
        for r in range(parts.shape[1]):
            for h in range(parts.shape[2]):
                parts[0, r, h] += parts[p, r, h]


def _softmax_shift_impl(group, score, num_rows, nparts, out):
    """out[e] = score[e] - max over e's row of score, per column, in edge order: reads and writes
    are sequential, only the per-row maxima (small, cache-resident) are indexed by row.  Each of
    ``nparts`` edge ranges reduces into its own rows, merged after."""
    E = score.shape[0]
    H = score.shape[1]
    mx = np.empty((nparts, num_rows, H), dtype=out.dtype)
    for p in prange(nparts):
        for r in range(num_rows):
            for h in range(H):
                mx[p, r, h] = -np.inf
        lo, hi = _edge_range(p, nparts, E)
        for e in range(lo, hi):
            r = group[e]
            for h in range(H):
                mx[p, r, h] = max(mx[p, r, h], score[e, h])
    for r in prange(num_rows):
        for p in range(1, nparts):
            for h in range(H):
                mx[0, r, h] = max(mx[0, r, h], mx[p, r, h])
    for p in prange(CHUNKS):
        lo, hi = _edge_range(p, CHUNKS, E)
        for e in range(lo, hi):
            r = group[e]
            for h in range(H):
                out[e, h] = score[e, h] - mx[0, r, h]


_softmax_shift_parallel, _softmax_shift_serial = twins(_softmax_shift_impl)


def _softmax_normalise_impl(group, ex, num_rows, nparts):
    """ex[e] /= sum over e's row of ex, per column, in edge order (partial sums as above)."""
    E = ex.shape[0]
    H = ex.shape[1]
    den = np.zeros((nparts, num_rows, H), dtype=ex.dtype)
    for p in prange(nparts):
        lo, hi = _edge_range(p, nparts, E)
        for e in range(lo, hi):
            r = group[e]
            for h in range(H):
                den[p, r, h] += ex[e, h]
    _merge_sums(den)
    for p in prange(CHUNKS):
        lo, hi = _edge_range(p, CHUNKS, E)
        for e in range(lo, hi):
            r = group[e]
            for h in range(H):
                ex[e, h] = ex[e, h] / den[0, r, h]


_softmax_normalise_parallel, _softmax_normalise_serial = twins(_softmax_normalise_impl)


def _softmax_bwd_impl(group, a, grad, num_rows, nparts, out):
    """out[e] = a[e] grad[e] - a[e] * sum over e's row of a grad, per column, in edge order."""
    E = a.shape[0]
    H = a.shape[1]
    tot = np.empty((nparts, num_rows, H), dtype=out.dtype)
    for p in prange(nparts):
        for r in range(num_rows):
            for h in range(H):
                tot[p, r, h] = 0
        lo, hi = _edge_range(p, nparts, E)
        for e in range(lo, hi):
            r = group[e]
            for h in range(H):
                tot[p, r, h] += a[e, h] * grad[e, h]
    _merge_sums(tot)
    for p in prange(CHUNKS):
        lo, hi = _edge_range(p, CHUNKS, E)
        for e in range(lo, hi):
            r = group[e]
            for h in range(H):
                x = a[e, h]
                out[e, h] = x * grad[e, h] - x * tot[0, r, h]


_softmax_bwd_parallel, _softmax_bwd_serial = twins(_softmax_bwd_impl)


# ------------------------------------------------------------------ entry points (numpy in, numpy out)
def max_degree(indptr) -> int:
    """The longest row of a CSR (0 without rows): the size of the per-task score buffers."""
    return int((indptr[1:] - indptr[:-1]).max()) if indptr.shape[0] > 1 else 0


def _slope(slope: float, dtype) -> np.ndarray:
    # a one-element array of the data's dtype: a Python float would turn float32 sums into float64
    return np.array([slope], dtype=dtype)


def gat_forward(indptr, indices, feat, el, er, slope: float):
    """(out [num_dst, H, D], lse [num_dst, H]) of the fused GAT aggregation over the in-CSR
    (``indptr`` int64 [num_dst + 1], ``indices`` int64 source ids); ``feat`` [num_src, H, D],
    ``el`` [num_src, H], ``er`` [num_dst, H], one float dtype, C-contiguous."""
    num_dst = indptr.shape[0] - 1
    out = np.empty((num_dst,) + feat.shape[1:], dtype=feat.dtype)
    lse = np.empty((num_dst, feat.shape[1]), dtype=feat.dtype)
    pick(_gat_fwd_parallel, _gat_fwd_serial)(indptr, indices, feat, el, er, _slope(slope, feat.dtype), out, lse,
                                             np.int64(max_degree(indptr)))
    return out, lse


def gat_attention(indptr, indices, eids, el, er, slope: float, lse):
    """The attention [E, H] in edge-id order recomputed from ``lse`` (in-CSR with ``eids``)."""
    a = np.empty((indices.shape[0], el.shape[1]), dtype=el.dtype)
    pick(_gat_attention_parallel, _gat_attention_serial)(indptr, indices, eids, el, er, _slope(slope, el.dtype),
                                                         lse, a)
    return a


def out_to_in(in_eids, out_eids):
    """The in-CSR position of every out-CSR entry (int64), from the two views' edge ids."""
    position = np.empty(in_eids.shape[0], dtype=np.int64)
    position[in_eids] = np.arange(in_eids.shape[0], dtype=np.int64)
    return position[out_eids]


def gat_backward(in_csr, out_csr, feat, el, er, slope: float, out, lse, grad_out, grad_attn=None, to_in=None):
    """(grad_feat, grad_el, grad_er) of the fused GAT op; ``in_csr`` / ``out_csr`` are (indptr,
    indices, eids) int64 triples (in: rows = destinations, indices = sources; out: the reverse),
    ``grad_attn`` [E, H] in edge-id order or None, ``to_in`` :func:`out_to_in` of the two views if the
    caller keeps it.  Temporaries: one E x 2 x H array."""
    dt = feat.dtype
    num_edges, heads = in_csr[1].shape[0], feat.shape[1]
    scratch = np.empty((num_edges, 2, heads), dtype=dt)
    to_in = out_to_in(in_csr[2], out_csr[2]) if to_in is None else to_in
    grad_er = np.empty(er.shape, dtype=dt)
    grad_el = np.empty(el.shape, dtype=dt)
    grad_feat = np.empty(feat.shape, dtype=dt)
    has_attn = grad_attn is not None
    ga = grad_attn if has_attn else np.empty((0, heads), dtype=dt)
    sl = _slope(slope, dt)
    pick(_gat_bwd_dst_parallel, _gat_bwd_dst_serial)(*in_csr, feat, el, er, sl, out, lse, grad_out, ga, has_attn,
                                                     scratch, grad_er)
    pick(_gat_bwd_src_parallel, _gat_bwd_src_serial)(out_csr[0], out_csr[1], to_in, scratch, grad_out, grad_feat,
                                                     grad_el)
    return grad_feat, grad_el, grad_er


def partitions(num_edges: int, num_rows: int, heads: int) -> int:
    """How many edge ranges reduce into their own per-row arrays: 4 while those stay small next to
    the scores (rows x heads x 4 <= edges x heads), else 1.  A function of the sizes only, so the
    parallel and serial twins sum in one order (bit-identical results)."""
    return 4 if 4 * num_rows <= num_edges else 1


def edge_softmax_forward(group, score, num_rows: int):
    """Softmax of ``score`` [E, H] (edge-id order) within each row, per column; ``group`` [E]
    (int64): the row of every edge, in edge-id order."""
    out = np.empty_like(score)
    parts = partitions(score.shape[0], num_rows, score.shape[1])
    pick(_softmax_shift_parallel, _softmax_shift_serial)(group, score, np.int64(num_rows), np.int64(parts), out)
    np.exp(out, out=out)  # numpy's exp is vectorised (AVX2/AVX-512); numba's is a scalar libm call per entry
    pick(_softmax_normalise_parallel, _softmax_normalise_serial)(group, out, np.int64(num_rows), np.int64(parts))
    return out


def edge_softmax_backward(group, a, grad, num_rows: int):
    """a * (grad - sum over the row of a * grad), [E, H] in edge-id order (``group`` as above)."""
    out = np.empty_like(a)
    parts = partitions(a.shape[0], num_rows, a.shape[1])
    pick(_softmax_bwd_parallel, _softmax_bwd_serial)(group, a, grad, np.int64(num_rows), np.int64(parts), out)
    return out
