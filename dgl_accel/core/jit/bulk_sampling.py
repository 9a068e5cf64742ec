"""Compiled twins of the bulk-sampling family (``kernels/bulk_sampling.py``): bulk ITS sampling and
EXTRACT's relabelling, bit-identical to the numpy reference in
:mod:`dgl_accel.core.sampling.bulk.its` (tests compare them).

Why: the numpy reference needs whole-array passes per draw round plus row sorts to find repeats;
one compiled pass per row (Philox in registers, picks kept sorted while drawing, ``prange`` over
rows) does the same work in one sweep on all cores.  Large outputs come from ``alloc`` (the
caller's recycled-buffer pool, see :mod:`dgl_accel.core.sampling.bulk.buffers`).
"""
from __future__ import annotations

import numpy as np

from .runtime import AVAILABLE, M32, S32, njit, philox, pick, prange, twins

__all__ = ["its_sample", "extract_supported", "extract", "relabel_layer", "its_uniform_rows"]

_TWO_M32 = 2.0 ** -32
_CHUNK = 256            # rows per parallel task (one bitmap each)
_BITMAP_BITS = 4096     # rows up to this degree test repeats in a bitmap
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_IDX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_IDX[(((1 << _i) * 0x03F79D71B4CB0A89) & 0xFFFFFFFFFFFFFFFF) >> 58] = _i


@njit(cache=True, inline="always")
def _pick(r, start, deg, uniform, prefix, before, total):
    """Position chosen by the uint32 draw r (the SAMPLE rule of core/sampling/bulk/its.py)."""
    if uniform:
        return start + np.int64((r * np.uint64(deg)) >> S32)
    x = before + np.floor((np.float64(r) * _TWO_M32) * total)
    lo = start
    hi = start + deg - 1
    while lo < hi:  # first position whose inclusive prefix exceeds x
        mid = (lo + hi) >> 1
        if prefix[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def _ctz(x):
    """Index of the lowest set bit of a non-zero uint64 (de Bruijn multiply)."""
    return _DEBRUIJN_IDX[((x & (~x + np.uint64(1))) * _DEBRUIJN) >> np.uint64(58)]


@njit(cache=True, inline="always")
def _lane(w0, w1, w2, w3, q):
    """Word ``q`` (0..3) of one Philox evaluation."""
    return w0 if q == 0 else (w1 if q == 1 else (w2 if q == 2 else w3))


@njit(cache=True, inline="always")
def _row_replace(k0, k1, base, st, d, s, uniform, prefix, b_i, t_i, out, o):
    """With replacement: the picks of draws 0 .. s-1 in draw order."""
    for t in range(0, s, 4):
        w0, w1, w2, w3 = philox(k0, k1, base + (t >> 2))
        for q in range(min(4, s - t)):
            out[o + t + q] = _pick(_lane(w0, w1, w2, w3, q), st, d, uniform, prefix, b_i, t_i)


@njit(cache=True, inline="always")
def _insert_sorted(out, o, cnt, p):
    """Insert ``p`` into the sorted ``out[o:o+cnt]`` unless present; 1 if inserted, else 0."""
    lo = 0
    hi = cnt
    while lo < hi:
        mid = (lo + hi) >> 1
        if out[o + mid] < p:
            lo = mid + 1
        else:
            hi = mid
    if lo < cnt and out[o + lo] == p:
        return 0
    for m in range(cnt, lo, -1):
        out[o + m] = out[o + m - 1]
    out[o + lo] = p
    return 1


@njit(cache=True, inline="always")
def _row_distinct(k0, k1, base, st, d, s, uniform, prefix, b_i, t_i, max_draws, bits, out, o):
    """Without replacement: draws until ``s`` distinct picks, kept in ascending order.  Rows of at
    most ``_BITMAP_BITS`` entries mark picks in ``bits`` (O(1) repeat test, no branchy search) and
    emit them by scanning the set bits (leaving ``bits`` all zero); larger rows keep their picks
    sorted in ``out[o:o+cnt]`` (repeats are rare there)."""
    use_bits = d <= _BITMAP_BITS
    cnt = 0
    t = 0
    while cnt < s and t < max_draws:
        w0, w1, w2, w3 = philox(k0, k1, base + (t >> 2))
        for q in range(4):
            if cnt < s:
                p = _pick(_lane(w0, w1, w2, w3, q), st, d, uniform, prefix, b_i, t_i)
                if not use_bits:
                    cnt += _insert_sorted(out, o, cnt, p)
                    continue
                wi = (p - st) >> 6
                m = np.uint64(1) << np.uint64((p - st) & 63)
                if (bits[wi] & m) == 0:
                    bits[wi] |= m
                    cnt += 1
        t += 4
    if not use_bits:
        return
    m_out = 0
    for wi in range((d + 63) >> 6):
        x = bits[wi]
        if x != 0:
            bits[wi] = 0
            while x != 0:
                out[o + m_out] = st + (wi << 6) + _ctz(x)
                m_out += 1
                x &= x - np.uint64(1)


@njit(cache=True, inline="always")
def _sample_row(k0, k1, base, st, d, npos, s, replace, uniform, prefix, b_i, t_i, max_draws, bits, out, o, c):
    """One row's ``c`` picks into ``out[o:o+c]``: every positive entry when it has at most ``s``
    (without replacement), else the draws (Philox key (k0, k1), counters from ``base``)."""
    if not replace and npos <= s:  # take every positive entry
        if uniform:
            for j in range(c):
                out[o + j] = st + j
        else:
            m = 0
            prev = b_i
            for p in range(st, st + d):
                if prefix[p] > prev:
                    out[o + m] = p
                    m += 1
                prev = prefix[p]
    elif replace:
        _row_replace(k0, k1, base, st, d, s, uniform, prefix, b_i, t_i, out, o)
    else:
        _row_distinct(k0, k1, base, st, d, s, uniform, prefix, b_i, t_i, max_draws, bits, out, o)


def _its_impl(start, deg, npos, labels, k0s, k1s, offs, s, replace, uniform, prefix, before, total, max_draws,
              out):
    R = start.shape[0]
    nchunks = (R + _CHUNK - 1) // _CHUNK
    for ch in prange(nchunks):
        bits = np.zeros(_BITMAP_BITS // 64, dtype=np.uint64)  # one per chunk, left all-zero per row
        for i in range(ch * _CHUNK, min(R, (ch + 1) * _CHUNK)):
            if offs[i + 1] > offs[i]:
                _sample_row(k0s[i], k1s[i], labels[i] << 24, start[i], deg[i], npos[i], s, replace, uniform, prefix,
                            before[i] if not uniform else 0.0, total[i] if not uniform else 0.0, max_draws, bits, out,
                            offs[i], offs[i + 1] - offs[i])


_its_parallel, _its_serial = twins(_its_impl)


def its_sample(rs, s: int, replace: bool, max_draws: int):
    """Same (positions, counts) as :func:`dgl_accel.core.sampling.bulk.its.its_sample_np`
    (``max_draws``: the spec's ``MAX_DRAWS``)."""
    R = rs.num_rows
    npos = rs.positives()
    counts = (np.where(npos > 0, s, 0) if replace else np.minimum(npos, s)).astype(np.int64)
    offs = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    out = np.empty(int(offs[-1]), dtype=np.int64)
    sizes = np.diff(np.asarray(rs.batch_ptr, dtype=np.int64))
    keys = np.array(rs.keys, dtype=np.uint64)
    k0s = np.repeat(keys & M32, sizes)
    k1s = np.repeat(keys >> S32, sizes)
    uniform = rs.prefix is None
    if uniform:
        prefix = np.zeros(1, dtype=np.float64)
        before = total = np.zeros(1, dtype=np.float64)
    else:
        prefix = rs.prefix
        before, total = rs.totals()
    pick(_its_parallel, _its_serial)(
        np.ascontiguousarray(rs.start, dtype=np.int64), np.ascontiguousarray(rs.deg, dtype=np.int64),
        npos.astype(np.int64), np.ascontiguousarray(rs.labels, dtype=np.int64), k0s, k1s, offs, int(s),
        bool(replace), uniform, prefix, before, total, max_draws, out)
    return out, counts


@njit(cache=True)
def _relabel_batch(src, rows, r0, T, e0, e1, n, local, new_out):
    """One minibatch: dst nodes keep their position, new sources get T + rank (ascending id)."""
    nwords = (n + 63) >> 6
    isdst = np.zeros(nwords, dtype=np.uint64)
    seen = np.zeros(nwords, dtype=np.uint64)
    mapping = np.empty(n, dtype=np.int32)  # only entries of this minibatch's nodes are read
    for j in range(T):
        v = rows[r0 + j]
        mapping[v] = j
        isdst[v >> 6] |= np.uint64(1) << np.uint64(v & 63)
    for e in range(e0, e1):
        u = src[e]
        seen[u >> 6] |= np.uint64(1) << np.uint64(u & 63)
    rank = 0
    for wi in range(nwords):
        x = seen[wi] & ~isdst[wi]
        while x != 0:
            u = (wi << 6) + _ctz(x)
            mapping[u] = T + rank
            new_out[e0 + rank] = u
            rank += 1
            x &= x - np.uint64(1)
    for e in range(e0, e1):
        local[e] = mapping[src[e]]
    return rank

def _extract_impl(src, offs, batch_ptr, rows, n, local, new_out, new_counts):
    """EXTRACT relabelling for all minibatches of a layer, one parallel task per minibatch
    (the sources were gathered from the packed (source, edge id) table beforehand)."""
    for b in prange(batch_ptr.shape[0] - 1):
        r0 = batch_ptr[b]
        r1 = batch_ptr[b + 1]
        new_counts[b] = _relabel_batch(src, rows, r0, r1 - r0, offs[r0], offs[r1], n, local, new_out)


_extract_parallel, _extract_serial = twins(_extract_impl)


def extract_supported(canon) -> bool:
    """The compiled pass reads the narrow packed table (source and edge id < 2^31)."""
    return AVAILABLE and canon.pairs.dtype == np.int64


def extract(flat, counts, batch_ptr, rows, canon, alloc=np.empty):
    """(local source ids [E], edge ids [E], new sources per minibatch (list of arrays, ascending),
    row offsets [R + 1]) in the layout of :func:`dgl_accel.core.sampling.neighbor.sample.relabel_block`,
    all minibatches of a layer in one compiled pass (``canon``: a ``Canonical`` adjacency)."""
    R = counts.shape[0]
    offs = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    se = np.take(canon.pairs, flat, out=alloc(flat.shape[0]))  # one random access per pick
    src = np.bitwise_and(se, np.int64(0xFFFFFFFF), out=alloc(se.shape[0]))
    eid = np.right_shift(se, np.int64(32), out=se)
    local, news = relabel_layer(src, offs, batch_ptr, rows, canon.n, alloc)
    return local, eid, news, offs


def relabel_layer(src, offs, batch_ptr, rows, n: int, alloc=np.empty):
    """EXTRACT's relabelling of a layer's sampled sources ``src`` (global ids, row i's at
    ``offs[i]:offs[i+1]``), **in place**: returns (``src`` now holding block-local ids, new sources
    per minibatch (list of arrays, ascending))."""
    k = batch_ptr.shape[0] - 1
    new_out = alloc(src.shape[0])
    new_counts = np.zeros(k, dtype=np.int64)
    pick(_extract_parallel, _extract_serial)(src, offs, np.asarray(batch_ptr, dtype=np.int64),
                                             np.ascontiguousarray(rows, dtype=np.int64), int(n), src, new_out,
                                             new_counts)
    e0 = offs[batch_ptr[:-1]]
    return src, [new_out[e0[b]:e0[b] + new_counts[b]] for b in range(k)]


def _its_uniform_rows_impl(indptr, rows, batch_ptr, k0s, k1s, label_base, s, replace, offs, max_draws, out,
                           pairs, to_pairs, eid_out):
    """The uniform-row ITS of ``_its_impl`` reading A's rows in place: start, degree, Philox key
    (the row's minibatch) and label (label_base + node) are derived here, not materialised.
    With ``to_pairs`` each row's picks are turned into (source id in ``out``, edge id in
    ``eid_out``) from the packed table while still in cache (no position array, no gather pass)."""
    R = rows.shape[0]
    nchunks = (R + _CHUNK - 1) // _CHUNK
    dummy = np.zeros(1, dtype=np.float64)
    for ch in prange(nchunks):
        bits = np.zeros(_BITMAP_BITS // 64, dtype=np.uint64)
        lo_row = ch * _CHUNK
        b = np.searchsorted(batch_ptr, lo_row, side="right") - 1
        for i in range(lo_row, min(R, lo_row + _CHUNK)):
            while i >= batch_ptr[b + 1]:
                b += 1
            o = offs[i]
            c = offs[i + 1] - o
            if c == 0:
                continue
            v = rows[i]
            st = indptr[v]
            d = indptr[v + 1] - st
            _sample_row(k0s[b], k1s[b], (label_base + v) << 24, st, d, d, s, replace, True, dummy, 0.0, 0.0, max_draws,
                        bits, out, o, c)
            if to_pairs:
                for j in range(o, o + c):
                    se = pairs[out[j]]
                    out[j] = se & 0xFFFFFFFF
                    eid_out[j] = se >> 32


_its_uniform_rows_parallel, _its_uniform_rows_serial = twins(_its_uniform_rows_impl)


def its_uniform_rows(indptr, rows, batch_ptr, keys, layer: int, num_nodes: int, s: int, replace: bool,
                     max_draws: int, pairs=None, alloc=np.empty):
    """(positions, counts, offs) of the spec's ITS for the uniform rows ``A[rows]`` (row i of
    minibatch b drawing with ``keys[b]``, label ``layer * num_nodes + rows[i]``, which the caller
    has range-checked).

    With ``pairs`` (the packed (source, edge id) table of
    :func:`dgl_accel.core.sampling.neighbor.sample.pack_pairs`, int64) returns (source ids, edge ids,
    counts, offs) of the same picks instead of their positions."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    R = rows.shape[0]
    deg = indptr[rows + 1] - indptr[rows]  # numpy: a parallel region this small costs more than it saves
    counts = np.where(deg > 0, s, 0) if replace else np.minimum(deg, s)
    offs = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    out = alloc(int(offs[-1]))  # tens of MB: the caller's recycled buffers
    to_pairs = pairs is not None
    eid = alloc(out.shape[0] if to_pairs else 0)
    keys = np.array(keys, dtype=np.uint64)
    pick(_its_uniform_rows_parallel, _its_uniform_rows_serial)(
        indptr, rows, np.asarray(batch_ptr, dtype=np.int64), keys & M32, keys >> S32,
        np.int64(layer) * np.int64(num_nodes), np.int64(s), bool(replace), offs, max_draws, out,
        pairs if to_pairs else np.zeros(1, dtype=np.int64), to_pairs, eid)
    if to_pairs:
        return out, eid, counts, offs
    return out, counts, offs
