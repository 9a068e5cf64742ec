"""Compiled CPU loops of the attention ops (:mod:`dgl_accel.core.attention`): edge softmax over CSR
rows and the fused GAT aggregation, forward and backward, on numpy arrays (float32 or float64; the
caller converts half types to float32 and back, as the native torch path does).

Why: the native path (:mod:`dgl_accel.core.attention.native`) is vectorised torch over edges, so it
materialises E x H x D messages (the GAT forward's ``a * feat[src]`` and the backward's
``p * grad_out[dst]``) and a dozen E x H temporaries.  These loops make one pass per CSR row instead:

* GAT forward, ``prange`` over destinations (in-CSR rows): one pass over v's in-edges with an online
  softmax per head (running max m, running sum l, an accumulator of D floats rescaled when m grows),
  writing ``out[v]`` and ``lse[v] = m + log(l)``;
* GAT backward, pass A over destinations: p_e = exp(s_e - lse[v]) recomputed, grad_s, its leaky
  derivative and grad_er, with p and grad_s * leaky' kept in E x H scratch arrays (by edge id);
  pass B over sources (out-CSR rows): grad_feat and grad_el.  Each output row is written by the one
  task owning it: no atomics, no races;
* edge softmax forward (max, sum of exp, normalise per row and column) and backward
  (a * (grad - sum over the row of a * grad)), values in edge-id order through ``eids``.

Rows are cut into ``CHUNKS`` ranges of about equal edge counts, one parallel task each (as
``rows_spmm``): real graphs have a few hub rows among many light ones.  Sums run in the arrays' dtype
(float32 for float32, as the native path accumulates).  Each loop has (parallel, serial) twins
(:func:`~dgl_accel.core.jit.runtime.twins`) so DataLoader workers can run them.
"""
from __future__ import annotations

import math

import numpy as np

from .runtime import njit, pick, prange, twins

__all__ = ["CHUNKS", "gat_forward", "gat_attention", "gat_backward", "edge_softmax_forward",
           "edge_softmax_backward"]

CHUNKS = 64  # parallel tasks per call (row ranges of about equal edge counts)


@njit(cache=True)
def _bounds(indptr, nch):
    """Row range boundaries [nch + 1] cutting the CSR into ``nch`` ranges of about equal entries."""
    n = indptr.shape[0] - 1
    bounds = np.searchsorted(indptr, np.arange(nch + 1) * (indptr[n] // nch + 1))
    bounds = np.minimum(bounds, n)  # searchsorted may answer n + 1 past the last row pointer
    bounds[0] = 0
    bounds[nch] = n
    return bounds


def _gat_fwd_impl(indptr, indices, feat, el, er, slope, out, lse):
    """out[v, h] = sum_e softmax_e(leaky(el[u, h] + er[v, h])) feat[u, h] over v's in-edges, online."""
    H = feat.shape[1]
    D = feat.shape[2]
    bounds = _bounds(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        m = np.empty(H, dtype=out.dtype)  # running max, sum and accumulator: one set per task
        lsum = np.empty(H, dtype=out.dtype)
        acc = np.empty((H, D), dtype=out.dtype)
        sl = slope[0]
        for v in range(bounds[ch], bounds[ch + 1]):
            for h in range(H):
                m[h] = -np.inf
                lsum[h] = 0
                for d in range(D):
                    acc[h, d] = 0
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                for h in range(H):
                    s = el[u, h] + er[v, h]
                    if not s > 0:
                        s = s * sl
                    mo = m[h]
                    if s > mo:  # a new maximum: rescale what was summed so far
                        c = math.exp(mo - s)
                        lsum[h] = lsum[h] * c + 1
                        for d in range(D):
                            acc[h, d] = acc[h, d] * c + feat[u, h, d]
                        m[h] = s
                    else:
                        p = math.exp(s - mo)
                        lsum[h] += p
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


_gat_fwd_parallel, _gat_fwd_serial = twins(_gat_fwd_impl)


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


_gat_attention_parallel, _gat_attention_serial = twins(_gat_attention_impl)


def _gat_bwd_dst_impl(indptr, indices, eids, feat, el, er, slope, out, lse, grad_out, grad_attn, has_attn,
                      p_e, gsl_e, grad_er):
    """Pass A over destinations: p_e, grad_s (plus the softmax backward of ``grad_attn``), times
    leaky'(raw) into ``gsl_e`` (by edge id), and grad_er[v] = its sum over v's in-edges."""
    H = feat.shape[1]
    D = feat.shape[2]
    bounds = _bounds(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        dv = np.empty(H, dtype=grad_er.dtype)
        tot = np.empty(H, dtype=grad_er.dtype)
        for v in range(bounds[ch], bounds[ch + 1]):
            for h in range(H):
                t = grad_out[v, h, 0] * out[v, h, 0]
                for d in range(1, D):
                    t += grad_out[v, h, d] * out[v, h, d]
                dv[h] = t  # <grad_out[v], out[v]> = sum_e p_e <grad_out[v], feat[u]>
                tot[h] = 0
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                e = eids[k]
                for h in range(H):
                    s = el[u, h] + er[v, h]
                    if not s > 0:
                        s = s * sl
                    p = math.exp(s - lse[v, h])
                    t = grad_out[v, h, 0] * feat[u, h, 0]
                    for d in range(1, D):
                        t += grad_out[v, h, d] * feat[u, h, d]
                    p_e[e, h] = p
                    gsl_e[e, h] = p * (t - dv[h])
                    if has_attn:
                        tot[h] += p * grad_attn[e, h]
            for h in range(H):
                dv[h] = 0  # now grad_er[v]'s sum
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                e = eids[k]
                for h in range(H):
                    gs = gsl_e[e, h]
                    if has_attn:  # + the segment softmax backward: p * (ga - sum_row(p * ga))
                        p = p_e[e, h]
                        gs += p * grad_attn[e, h] - p * tot[h]
                    if not el[u, h] + er[v, h] > 0:
                        gs = gs * sl
                    gsl_e[e, h] = gs
                    dv[h] += gs
            for h in range(H):
                grad_er[v, h] = dv[h]


_gat_bwd_dst_parallel, _gat_bwd_dst_serial = twins(_gat_bwd_dst_impl)


def _gat_bwd_src_impl(indptr, indices, eids, p_e, gsl_e, grad_out, grad_feat, grad_el):
    """Pass B over sources: grad_feat[u] = sum p_e grad_out[v], grad_el[u] = sum gsl_e over u's out-edges."""
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
                e = eids[k]
                for h in range(H):
                    p = p_e[e, h]
                    gl[h] += gsl_e[e, h]
                    for d in range(D):
                        acc[h, d] += p * grad_out[v, h, d]
            for h in range(H):
                grad_el[u, h] = gl[h]
                for d in range(D):
                    grad_feat[u, h, d] = acc[h, d]


_gat_bwd_src_parallel, _gat_bwd_src_serial = twins(_gat_bwd_src_impl)


def _softmax_fwd_impl(indptr, eids, score, out):
    """out[e] = exp(score[e] - max) / sum over the row of exp(score - max), per column."""
    H = score.shape[1]
    bounds = _bounds(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        m = np.empty(H, dtype=out.dtype)
        den = np.empty(H, dtype=out.dtype)
        for r in range(bounds[ch], bounds[ch + 1]):
            for h in range(H):
                m[h] = -np.inf
                den[h] = 0
            for k in range(indptr[r], indptr[r + 1]):
                e = eids[k]
                for h in range(H):
                    m[h] = max(m[h], score[e, h])
            for k in range(indptr[r], indptr[r + 1]):
                e = eids[k]
                for h in range(H):
                    x = math.exp(score[e, h] - m[h])
                    out[e, h] = x
                    den[h] += x
            for k in range(indptr[r], indptr[r + 1]):
                e = eids[k]
                for h in range(H):
                    out[e, h] = out[e, h] / den[h]


_softmax_fwd_parallel, _softmax_fwd_serial = twins(_softmax_fwd_impl)


def _softmax_bwd_impl(indptr, eids, a, grad, out):
    """out[e] = a[e] grad[e] - a[e] * sum over the row of a grad, per column."""
    H = a.shape[1]
    bounds = _bounds(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        tot = np.empty(H, dtype=out.dtype)
        for r in range(bounds[ch], bounds[ch + 1]):
            for h in range(H):
                tot[h] = 0
            for k in range(indptr[r], indptr[r + 1]):
                e = eids[k]
                for h in range(H):
                    tot[h] += a[e, h] * grad[e, h]
            for k in range(indptr[r], indptr[r + 1]):
                e = eids[k]
                for h in range(H):
                    out[e, h] = a[e, h] * grad[e, h] - a[e, h] * tot[h]


_softmax_bwd_parallel, _softmax_bwd_serial = twins(_softmax_bwd_impl)


# ------------------------------------------------------------------ entry points (numpy in, numpy out)
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
    pick(_gat_fwd_parallel, _gat_fwd_serial)(indptr, indices, feat, el, er, _slope(slope, feat.dtype), out, lse)
    return out, lse


def gat_attention(indptr, indices, eids, el, er, slope: float, lse):
    """The attention [E, H] in edge-id order recomputed from ``lse`` (in-CSR with ``eids``)."""
    a = np.empty((indices.shape[0], el.shape[1]), dtype=el.dtype)
    pick(_gat_attention_parallel, _gat_attention_serial)(indptr, indices, eids, el, er, _slope(slope, el.dtype),
                                                         lse, a)
    return a


def gat_backward(in_csr, out_csr, feat, el, er, slope: float, out, lse, grad_out, grad_attn=None):
    """(grad_feat, grad_el, grad_er) of the fused GAT op; ``in_csr`` / ``out_csr`` are (indptr,
    indices, eids) int64 triples (in: rows = destinations, indices = sources; out: the reverse),
    ``grad_attn`` [E, H] in edge-id order or None.  Temporaries: two E x H arrays."""
    dt = feat.dtype
    num_edges, heads = in_csr[1].shape[0], feat.shape[1]
    p_e = np.empty((num_edges, heads), dtype=dt)
    gsl_e = np.empty((num_edges, heads), dtype=dt)
    grad_er = np.empty(er.shape, dtype=dt)
    grad_el = np.empty(el.shape, dtype=dt)
    grad_feat = np.empty(feat.shape, dtype=dt)
    has_attn = grad_attn is not None
    ga = grad_attn if has_attn else np.empty((0, heads), dtype=dt)
    sl = _slope(slope, dt)
    pick(_gat_bwd_dst_parallel, _gat_bwd_dst_serial)(*in_csr, feat, el, er, sl, out, lse, grad_out, ga, has_attn,
                                                     p_e, gsl_e, grad_er)
    pick(_gat_bwd_src_parallel, _gat_bwd_src_serial)(*out_csr, p_e, gsl_e, grad_out, grad_feat, grad_el)
    return grad_feat, grad_el, grad_er


def edge_softmax_forward(indptr, eids, score):
    """Softmax of ``score`` [E, H] (edge-id order) within each CSR row, per column."""
    out = np.empty_like(score)
    pick(_softmax_fwd_parallel, _softmax_fwd_serial)(indptr, eids, score, out)
    return out


def edge_softmax_backward(indptr, eids, a, grad):
    """a * (grad - sum over the row of a * grad), [E, H] in edge-id order."""
    out = np.empty_like(a)
    pick(_softmax_bwd_parallel, _softmax_bwd_serial)(indptr, eids, a, grad, out)
    return out
