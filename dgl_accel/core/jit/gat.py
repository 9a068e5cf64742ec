"""Compiled CPU loops of the fused GAT aggregation (:mod:`dgl_accel.core.attention.gat`), forward and
backward, on numpy arrays (float32 or float64; the caller converts half types to float32 and back, as
the native torch path does).

Why: the native path (``native`` in :mod:`dgl_accel.core.attention.gat_paths`) is vectorised torch over
edges: E x H x D messages and a dozen E x H temporaries.  These loops make one pass per CSR row instead:

* forward, ``prange`` over destinations (in-CSR rows): v's scores and their max per head (a
  buffer of the row's scores), then one pass over v's in-edges summing exp(s - m) feat[u] into an
  accumulator of H x D floats, writing ``out[v]`` and ``lse[v] = m + log(l)``;
* backward, pass A over destinations: p_e = exp(s_e - lse[v]) and g_e = <grad_out[v], feat[u]>
  recomputed (times the dropout weight), delta[v] = sum_e p_e g_e and grad_er, p_e and g_e kept
  per edge and head (two E x H scratch arrays, freed on return); pass B over sources (out-CSR rows)
  reads them for grad_feat and grad_el (one exp and one D-long dot per edge and head in all: the
  exps were most of the backward with many narrow heads).  Each output row is written by the one task
  owning it: no atomics, no races;
* attention dropout (``core/attention/dropout.py``): a hash of (edge id, head key) recomputed
  where needed, or a uint8 mask [E, H] drawn as DGL's ``nn.Dropout`` (:func:`edge_drop`).

Rows are cut into ``CHUNKS`` ranges of about equal edge counts, one parallel task each (hub rows).
Sums run in the arrays' dtype.  Each loop has (parallel, serial) twins
(:func:`~dgl_accel.core.jit.runtime.twins`) so DataLoader workers can run them.
"""
from __future__ import annotations

import math

import numpy as np

from . import runtime
from .attention_common import CHUNKS, REASSOC, max_degree
from .row_ranges import bounds_of
from .runtime import M32, NOALIAS, S32, njit, pick, prange, twins

__all__ = ["gat_forward", "gat_attention", "gat_backward", "one_pass", "drop_weight", "edge_drop"]

# The GAT backward passes without "contract": with it LLVM fused the per-edge multiply-adds
# differently in the parallel and the serial twin (results 1 ulp apart, no longer bit-identical).
REASSOC_ONLY = {"reassoc"}


_C1, _C2 = np.uint64(0x85EBCA6B), np.uint64(0xC2B2AE35)  # murmur3's fmix32 multipliers
_S16, _S13 = np.uint64(16), np.uint64(13)


@njit(cache=True, inline="always")
def _fmix32(x):
    x = x ^ (x >> _S16)
    x = (x * _C1) & M32
    x = x ^ (x >> _S13)
    x = (x * _C2) & M32
    return x ^ (x >> _S16)


@njit(cache=True, inline="always")
def drop_weight(key, e, thr, scale):
    """The dropout weight of edge ``e`` under a head's ``key``: ``scale`` where
    fmix32(fmix32(lo(e) + key) ^ hi(e)) >= ``thr``, else 0 (``core/attention/dropout.py``'s mask)."""
    ue = np.uint64(e)
    bits = _fmix32(_fmix32(((ue & M32) + key) & M32) ^ (ue >> S32))
    return scale if bits >= thr else scale * 0


@njit(cache=True, inline="always")
def edge_drop(keep, keys, h, e, m, thr, scale):
    """The dropout weight of edge ``e``, head ``h``: row ``m`` of the drawn mask ``keep`` where it has rows
    (``m`` = e for a mask in edge-id order, the in-CSR position for one in CSR order), else the hash of ``e``."""
    if keep.shape[0] > 0:
        return scale if keep[m, h] else scale * 0
    return drop_weight(keys[h], e, thr, scale)


def _gat_fwd_impl(indptr, indices, eids, feat, el, er, params, keys, keep, thr, drop, by_pos, out, lse, max_degree):
    """out[v, h] = sum_e w_e softmax_e(leaky(el[u, h] + er[v, h])) feat[u, h] over v's in-edges (w_e the
    dropout weight, 1 without ``drop``; ``by_pos``: a drawn mask in in-CSR order): the row's scores and their
    max first (16 bytes read per edge),
    then exp and the weighted sum of feature rows, branch-free (an online softmax's rescaling branch
    measured 20-30% slower)."""
    H = feat.shape[1]
    D = feat.shape[2]
    bounds = bounds_of(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        m = np.empty(H, dtype=out.dtype)  # max, sum, accumulator and the row's scores: one set per task
        lsum = np.empty(H, dtype=out.dtype)
        acc = np.empty((H, D), dtype=out.dtype)
        sbuf = np.empty((max_degree, H), dtype=out.dtype)
        sl = params[0]
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
                    if drop:
                        e = eids[start + j]
                        p = p * edge_drop(keep, keys, h, e, start + j if by_pos else e, thr, params[1])
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


_gat_fwd_parallel, _gat_fwd_serial = twins(_gat_fwd_impl, fastmath=REASSOC, noalias=True)


def _gat_attention_impl(indptr, indices, eids, el, er, params, keys, keep, thr, drop, lse, a):
    """a[e, h] = w_e exp(leaky(el[u, h] + er[v, h]) - lse[v, h]) for every in-edge e = (u -> v)."""
    H = el.shape[1]
    bounds = bounds_of(indptr, CHUNKS)
    sl = params[0]
    for ch in prange(CHUNKS):
        for v in range(bounds[ch], bounds[ch + 1]):
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                e = eids[k]
                for h in range(H):
                    s = el[u, h] + er[v, h]
                    if not s > 0:
                        s = s * sl
                    p = math.exp(s - lse[v, h])
                    a[e, h] = p * edge_drop(keep, keys, h, e, e, thr, params[1]) if drop else p


_gat_attention_parallel, _gat_attention_serial = twins(_gat_attention_impl, fastmath=REASSOC, noalias=True)


@njit(cache=True, inline="always")
def _row_sums(dl, pgl, pl, h, p, g, raw, sl):
    """One edge's share of v's sums for head h: dl += p g (delta), pgl += p g leaky', pl += p leaky'."""
    pg = p * g
    dl[h] += pg
    if raw > 0:
        pgl[h] += pg
        pl[h] += p
    else:
        pgl[h] += pg * sl
        pl[h] += p * sl


@njit(cache=True, inline="always")
def _edge_terms(u, v, h, e, m, feat, el, er, params, lse, grad_out, grad_attn, has_attn, keys, keep, thr, drop):
    """(p_e, w_e, g_e = w_e (<grad_out[v, h], feat[u, h]> + grad_attn[e, h]), raw score) of one edge
    and head (``m``: its row of a drawn mask, :func:`edge_drop`), in pass A or the one pass."""
    D = feat.shape[2]
    raw = el[u, h] + er[v, h]
    s = raw if raw > 0 else raw * params[0]
    p = math.exp(s - lse[v, h])
    t = grad_out[v, h, 0] * feat[u, h, 0]
    for d in range(1, D):
        t += grad_out[v, h, d] * feat[u, h, d]
    if has_attn:
        t += grad_attn[e, h]
    w = edge_drop(keep, keys, h, e, m, thr, params[1]) if drop else params[1]
    return p, w, w * t, raw


def _gat_bwd_dst_impl(indptr, indices, eids, feat, el, er, params, lse, grad_out, grad_attn, has_attn, keys, keep, thr,
                      drop, delta, grad_er, pe, ge):
    """Pass A over destinations, one pass over v's in-edges: delta[v, h] = sum_e p_e g_e
    (:func:`_edge_terms`) and grad_er[v, h] = sum_e p_e (g_e - delta) leaky'_e, summed as
    sum_e p_e g_e leaky'_e - delta sum_e p_e leaky'_e (no second pass); p_e, g_e kept in pe, ge [E, H]."""
    H = feat.shape[1]
    bounds = bounds_of(indptr, CHUNKS)
    sl = params[0]
    for ch in prange(CHUNKS):
        dl = np.empty(H, dtype=grad_er.dtype)
        pgl = np.empty(H, dtype=grad_er.dtype)
        pl = np.empty(H, dtype=grad_er.dtype)
        for v in range(bounds[ch], bounds[ch + 1]):
            dl[:] = 0
            pgl[:] = 0
            pl[:] = 0
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                e = eids[k]
                for h in range(H):
                    p, _, g, raw = _edge_terms(u, v, h, e, e, feat, el, er, params, lse, grad_out, grad_attn,
                                               has_attn, keys, keep, thr, drop)
                    pe[e, h], ge[e, h] = p, g
                    _row_sums(dl, pgl, pl, h, p, g, raw, sl)
            for h in range(H):
                delta[v, h] = dl[h]
                grad_er[v, h] = pgl[h] - dl[h] * pl[h]


_gat_bwd_dst_parallel, _gat_bwd_dst_serial = twins(_gat_bwd_dst_impl, fastmath=REASSOC_ONLY, noalias=True)


def _gat_bwd_src_impl(indptr, indices, eids, feat, el, er, params, lse, grad_out, grad_attn, has_attn, keys, keep, thr,
                      drop, delta, grad_feat, grad_el, halves, attn_l, attn_r, grad_er, part_l, part_r, pe, ge):
    """Pass B over sources (out-CSR rows): grad_feat[u, h] = sum over u's out-edges of p_e w_e
    grad_out[v, h] and grad_el[u, h] = sum of p_e (g_e - delta[v, h]) leaky'(raw_e), with pass A's
    p_e, g_e (pe, ge) and delta; w_e (the dropout weight) and raw_e recomputed: no exp, no D-long dot.
    With ``halves`` (el, er = <feat, attn_l/r>) also grad_el attn_l + grad_er attn_r into grad_feat[u],
    sums of grad_el/er feat into part_l/r[ch].
    Row u reads feat only at u, each entry before writing it: grad_feat may be feat (``gat_layer``)."""
    H = feat.shape[1]
    D = feat.shape[2]
    bounds = bounds_of(indptr, CHUNKS)
    sl = params[0]
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
                    p, g = pe[e, h], ge[e, h]
                    raw = el[u, h] + er[v, h]
                    w = edge_drop(keep, keys, h, e, e, thr, params[1]) if drop else params[1]
                    gs = p * (g - delta[v, h])
                    gl[h] += gs if raw > 0 else gs * sl
                    pw = p * w
                    for d in range(D):
                        acc[h, d] += pw * grad_out[v, h, d]
            for h in range(H):
                grad_el[u, h] = gl[h]
                if halves:
                    gr = grad_er[u, h] if u < grad_er.shape[0] else gl[h] * 0
                    for d in range(D):
                        f = feat[u, h, d]  # the last read of feat[u, h, d], before grad_feat[u, h, d] is written
                        part_l[ch, h, d] += gl[h] * f
                        part_r[ch, h, d] += gr * f
                        acc[h, d] += gl[h] * attn_l[h, d] + gr * attn_r[h, d]
                for d in range(D):
                    grad_feat[u, h, d] = acc[h, d]


_gat_bwd_src_parallel, _gat_bwd_src_serial = twins(_gat_bwd_src_impl, fastmath=REASSOC_ONLY)


@njit(cache=True, fastmath=REASSOC_ONLY, **NOALIAS)  # its three outputs are fresh arrays
def _gat_bwd_one_pass(indptr, indices, eids, feat, el, er, params, lse, grad_out, grad_attn, has_attn, keys, keep,
                      thr, drop, by_pos, max_degree, grad_feat, grad_el, grad_er):
    """Both passes in one, for one thread: over v's in-edges, p_e and g_e (:func:`_edge_terms`) into a
    row buffer, delta[v] and grad_er[v]; then again over the buffer, grad_el[u] += p_e (g_e - delta)
    leaky'_e and grad_feat[u] += p_e w_e grad_out[v] (``grad_feat``, ``grad_el`` zeroed by the caller).
    No E x H scratch, no out-CSR pass (whose reads of grad_out[v] and the scratch are by edge id)."""
    H = feat.shape[1]
    D = feat.shape[2]
    sl = params[0]
    pb = np.empty((max_degree, H), dtype=grad_er.dtype)
    gb = np.empty((max_degree, H), dtype=grad_er.dtype)
    dl = np.empty(H, dtype=grad_er.dtype)
    pgl = np.empty(H, dtype=grad_er.dtype)
    pl = np.empty(H, dtype=grad_er.dtype)
    for v in range(indptr.shape[0] - 1):
        start = indptr[v]
        dl[:] = 0
        pgl[:] = 0
        pl[:] = 0
        for j in range(indptr[v + 1] - start):
            u = indices[start + j]
            e = eids[start + j]
            for h in range(H):
                p, _, g, raw = _edge_terms(u, v, h, e, start + j if by_pos else e, feat, el, er, params, lse,
                                           grad_out, grad_attn, has_attn, keys, keep, thr, drop)
                pb[j, h], gb[j, h] = p, g
                _row_sums(dl, pgl, pl, h, p, g, raw, sl)
        for h in range(H):
            grad_er[v, h] = pgl[h] - dl[h] * pl[h]
        for j in range(indptr[v + 1] - start):
            u = indices[start + j]
            e = eids[start + j]
            for h in range(H):
                p = pb[j, h]
                gs = p * (gb[j, h] - dl[h])
                grad_el[u, h] += gs if el[u, h] + er[v, h] > 0 else gs * sl
                w = edge_drop(keep, keys, h, e, start + j if by_pos else e, thr, params[1]) if drop else params[1]
                pw = p * w
                for d in range(D):
                    grad_feat[u, h, d] += pw * grad_out[v, h, d]


@njit(cache=True)
def _halves_into(feat, grad_feat, grad_el, grad_er, attn_l, attn_r, part_l, part_r):
    """The score halves' gradient (el, er = <feat, attn_l/r>): grad_el attn_l + grad_er attn_r into
    grad_feat, sums of grad_el feat and grad_er feat into part_l/r [H, D]."""
    for u in range(feat.shape[0]):
        for h in range(feat.shape[1]):
            gl = grad_el[u, h]
            gr = grad_er[u, h] if u < grad_er.shape[0] else gl * 0
            for d in range(feat.shape[2]):
                f = feat[u, h, d]
                part_l[h, d] += gl * f
                part_r[h, d] += gr * f
                grad_feat[u, h, d] += gl * attn_l[h, d] + gr * attn_r[h, d]




# ------------------------------------------------------------------ entry points (numpy in, numpy out)
def one_pass(num_edges: int, num_src: int, dim: int) -> bool:
    """Whether the backward makes one pass (:func:`_gat_bwd_one_pass`): on one thread
    (:func:`~.runtime.one_thread`), where its new grad_feat [num_src, H, dim] is no larger than the two
    passes' E x H scratch (p_e and g_e): dim <= 2 E / num_src.  Wider heads keep the two passes, which
    may write grad_feat into feat's own buffer (``gat_layer``'s memory bound)."""
    return runtime.one_thread() and dim * num_src <= 2 * num_edges


def _params(slope: float, scale: float, dtype) -> np.ndarray:  # in the data's dtype: floats would make sums f64
    return np.array([slope, scale], dtype=dtype)


def _dropout(dropout, heads: int):
    """(keys uint64 [H], keep uint8 [E or 0, H], threshold, whether to drop, scale, whether ``keep`` is in
    in-CSR order) of ``dropout`` = (keys, threshold, scale, a drawn mask [E, H] or None for the hash,
    the mask's order: True for in-CSR positions, False for edge ids) or None."""
    no_mask = np.zeros((0, heads), dtype=np.uint8)
    if dropout is None:
        return np.zeros(heads, dtype=np.uint64), no_mask, np.uint64(0), False, 1.0, False
    keys, thr, scale, keep, by_pos = dropout
    return (np.asarray(keys, dtype=np.uint64), no_mask if keep is None else keep, np.uint64(thr), True, scale,
            keep is not None and by_pos)


def gat_forward(indptr, indices, eids, feat, el, er, slope: float, dropout=None):
    """(out [num_dst, H, D], lse [num_dst, H]) of the fused GAT aggregation over the in-CSR
    (``indptr`` int64 [num_dst + 1], ``indices`` int64 source ids, ``eids`` int64 edge ids); ``feat``
    [num_src, H, D], ``el`` [num_src, H], ``er`` [num_dst, H], one float dtype, C-contiguous;
    ``dropout``: (per-head keys, threshold, scale, drawn mask or None, the mask in in-CSR order) of the
    attention dropout, or None."""
    num_dst = indptr.shape[0] - 1
    keys, keep, thr, drop, scale, by_pos = _dropout(dropout, feat.shape[1])
    out = np.empty((num_dst,) + feat.shape[1:], dtype=feat.dtype)
    lse = np.empty((num_dst, feat.shape[1]), dtype=feat.dtype)
    pick(_gat_fwd_parallel, _gat_fwd_serial)(indptr, indices, eids, feat, el, er, _params(slope, scale, feat.dtype),
                                             keys, keep, thr, drop, by_pos, out, lse, np.int64(max_degree(indptr)))
    return out, lse


def gat_attention(indptr, indices, eids, el, er, slope: float, lse, dropout=None):
    """The attention [E, H] in edge-id order recomputed from ``lse`` (in-CSR with ``eids``), times
    the dropout weights where ``dropout`` is given."""
    keys, keep, thr, drop, scale, by_pos = _dropout(dropout, el.shape[1])
    if by_pos:
        raise ValueError("expected a dropout mask in edge-id order for the attention (got one in in-CSR order)")
    a = np.empty((indices.shape[0], el.shape[1]), dtype=el.dtype)
    pick(_gat_attention_parallel, _gat_attention_serial)(indptr, indices, eids, el, er,
                                                         _params(slope, scale, el.dtype), keys, keep, thr, drop, lse, a)
    return a


def gat_backward(in_csr, out_csr, feat, el, er, slope: float, lse, grad_out, grad_attn=None, dropout=None,
                 halves=None, into_feat: bool = False):
    """(grad_feat, grad_el, grad_er) of the fused GAT op; ``in_csr`` / ``out_csr`` are (indptr,
    indices, eids) int64 triples (in: rows = destinations, indices = sources; out: the reverse),
    ``grad_attn`` [E, H] or None, ``dropout`` as in :func:`gat_forward`.  ``halves`` = (attn_l, attn_r)
    [H, D] (el, er made from them): their gradient is in grad_feat, (grad_attn_l, grad_attn_r) follow;
    ``into_feat``: grad_feat may overwrite ``feat`` (the first result is then ``feat`` itself).

    Where :func:`one_pass` (or with a mask in in-CSR order) one pass over the in-CSR
    (:func:`_gat_bwd_one_pass`; grad_feat a new array).  Else pass A over destinations and pass B over
    sources, one task per row range, with delta [num_dst, H] and pass A's p_e, g_e [E, H] as temporaries
    (pass B reads them instead of a second exp and D-long dot per edge and head)."""
    dt, heads = feat.dtype, feat.shape[1]
    keys, keep, thr, drop, scale, by_pos = _dropout(dropout, heads)
    grad_er = np.empty(er.shape, dtype=dt)
    has_attn = grad_attn is not None
    ga = grad_attn if has_attn else np.empty((0, heads), dtype=dt)
    params = _params(slope, scale, dt)
    common = (feat, el, er, params, lse, grad_out, ga, has_attn, keys, keep, thr, drop)
    a_l, a_r = halves if halves is not None else (np.empty((0, feat.shape[2]), dtype=dt),) * 2
    if by_pos or one_pass(in_csr[1].shape[0], feat.shape[0], feat.shape[2]):
        grad_feat, grad_el = np.zeros(feat.shape, dtype=dt), np.zeros(el.shape, dtype=dt)
        _gat_bwd_one_pass(*in_csr, *common, by_pos, np.int64(max_degree(in_csr[0])), grad_feat, grad_el, grad_er)
        grads = (grad_feat, grad_el, grad_er)
        if halves is None:
            return grads
        parts, parts_r = (np.zeros(feat.shape[1:], dtype=dt) for _ in "lr")
        _halves_into(feat, grad_feat, grad_el, grad_er, a_l, a_r, parts, parts_r)
        return grads + (parts, parts_r)
    delta = np.empty(er.shape, dtype=dt)
    grad_el, grad_feat = np.empty(el.shape, dtype=dt), feat if into_feat else np.empty(feat.shape, dtype=dt)
    pe, ge = (np.empty((in_csr[1].shape[0], heads), dtype=dt) for _ in "pg")
    pick(_gat_bwd_dst_parallel, _gat_bwd_dst_serial)(*in_csr, *common, delta, grad_er, pe, ge)
    parts, parts_r = (np.zeros((CHUNKS if halves is not None else 0,) + feat.shape[1:], dtype=dt) for _ in "lr")
    pick(_gat_bwd_src_parallel, _gat_bwd_src_serial)(*out_csr, *common, delta, grad_feat, grad_el,
                                                     halves is not None, a_l, a_r, grad_er, parts, parts_r, pe, ge)
    grads = (grad_feat, grad_el, grad_er)
    return grads if halves is None else grads + (parts.sum(0), parts_r.sum(0))
