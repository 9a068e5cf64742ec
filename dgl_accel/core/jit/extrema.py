"""Compiled loop of the max/min aggregation (:mod:`dgl_accel.core.extrema`): one pass per CSR row.

Same contract as the Triton kernel and the vectorised torch path: messages in the accumulation
dtype (float32 or float64; bf16 arrays come as their bits, uint16, widened where read and the
results narrowed, exact: a max is one of its inputs), the first entry of a row taken, then a later
one only when strictly larger (``negate``: strictly smaller, the min; ties stay with the first CSR
position); rows without
entries hold ``fill`` and arg -1.  :func:`extrema_values` is the same pass without the positions,
for callers no gradient will reach (half the bytes written, a shorter vectorised loop).
"""
from __future__ import annotations

import numpy as np

from .row_ranges import bounds_of
from .runtime import as_float, cast_like, njit, pick, prange, twins

__all__ = ["extrema_rows", "extrema_values", "extrema_scatter"]


@njit(cache=True, inline="always")
def _first(best, pos, src, s0):
    """The row's first entry (relative position 0), always taken: ``src[s0]``."""
    for f in range(best.shape[0]):
        best[f] = as_float(src[s0, f])
        pos[f] = 0


@njit(cache=True, inline="always")
def _merge1(best, pos, src, s0, k0, negate):
    """Merge the entry at relative position ``k0`` (message ``src[s0]``): taken only where strictly
    larger (``negate``: smaller), so ties keep the earlier position.  Selects, not branches: vectorised."""
    if negate:
        for f in range(best.shape[0]):
            v = as_float(src[s0, f])
            b = best[f]
            pos[f] = k0 if v < b else pos[f]
            best[f] = v if v < b else b
    else:
        for f in range(best.shape[0]):
            v = as_float(src[s0, f])
            b = best[f]
            pos[f] = k0 if v > b else pos[f]
            best[f] = v if v > b else b


@njit(cache=True, inline="always")
def _merge3(best, pos, src, s0, s1, s2, k0, k1, k2, negate):
    """Three :func:`_merge1` in a row (positions k0 < k1 < k2), ``best``/``pos`` loaded and stored once.
    Three, not more: each source row adds two run-time alias checks to the vectorised loop, and LLVM
    gives up on vectorising past eight (four rows ran scalar, 3-5x slower)."""
    if negate:
        for f in range(best.shape[0]):
            b = best[f]
            p = pos[f]
            v = as_float(src[s0, f])
            p = k0 if v < b else p
            b = v if v < b else b
            v = as_float(src[s1, f])
            p = k1 if v < b else p
            b = v if v < b else b
            v = as_float(src[s2, f])
            p = k2 if v < b else p
            b = v if v < b else b
            best[f] = b
            pos[f] = p
    else:
        for f in range(best.shape[0]):
            b = best[f]
            p = pos[f]
            v = as_float(src[s0, f])
            p = k0 if v > b else p
            b = v if v > b else b
            v = as_float(src[s1, f])
            p = k1 if v > b else p
            b = v if v > b else b
            v = as_float(src[s2, f])
            p = k2 if v > b else p
            b = v if v > b else b
            best[f] = b
            pos[f] = p


@njit(cache=True, inline="always")
def _messages(msg, x, w, cols, eids, k, n, op, wide):
    """msg[i] = x[cols[k + i]] times (op 1) or plus (op 2) w[eids[k + i]], i < n (one weight per
    feature if ``wide``)."""
    for i in range(n):
        c = cols[k + i]
        e = eids[k + i]
        if wide:
            for f in range(msg.shape[1]):
                msg[i, f] = as_float(x[c, f]) * as_float(w[e, f]) if op == 1 else as_float(x[c, f]) + as_float(w[e, f])
        else:
            we = as_float(w[e, 0])
            for f in range(msg.shape[1]):
                msg[i, f] = as_float(x[c, f]) * we if op == 1 else as_float(x[c, f]) + we


def _extrema_impl(indptr, cols, eids, x, w, op, negate, fill, out, arg, pos_like, acc_like):
    """out[r, f], arg[r, f] for every row r (op 0: x[cols[k]], 1: times w[eids[k]], 2: plus it).
    Rows are cut into 64 ranges of about equal edge counts, one parallel task each.  Positions run
    relative to the row start in ``pos_like``'s dtype (int32 where every one fits: half the bytes of
    int64 to blend); after the first entry, three at a time (:func:`_merge3`), the last one or two
    alone.  A copy reads x's rows in place; ops 1, 2 write their messages into ``msg`` first, with one
    call site of each helper (every inlined copy of a vectorised loop costs seconds of compile time)."""
    num_feat = out.shape[1]
    wide = w.shape[1] != 1
    rel = pos_like.dtype.type
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        best = np.empty(num_feat, dtype=acc_like.dtype)  # one per range: no allocation per row
        pos = np.empty(num_feat, dtype=pos_like.dtype)
        msg = np.empty((3, num_feat), dtype=acc_like.dtype)  # ops 1, 2: the messages of up to three entries
        for r in range(bounds[ch], bounds[ch + 1]):
            lo = indptr[r]
            hi = indptr[r + 1]
            if lo == hi:
                for f in range(num_feat):
                    out[r, f] = cast_like(fill, out)
                    arg[r, f] = -1
                continue
            if op == 0:  # a copy: x's rows themselves
                _first(best, pos, x, cols[lo])
                k = lo + 1
                while k + 3 <= hi:
                    _merge3(best, pos, x, cols[k], cols[k + 1], cols[k + 2], rel(k - lo), rel(k + 1 - lo),
                            rel(k + 2 - lo), negate)
                    k += 3
                for j in range(k, hi):
                    _merge1(best, pos, x, cols[j], rel(j - lo), negate)
            else:  # the messages of up to three entries into msg, then merged from there
                k = lo
                while k < hi:
                    n = 3 if k > lo and k + 3 <= hi else 1
                    _messages(msg, x, w, cols, eids, k, n, op, wide)
                    if n == 3:
                        _merge3(best, pos, msg, 0, 1, 2, rel(k - lo), rel(k + 1 - lo), rel(k + 2 - lo), negate)
                    elif k == lo:
                        _first(best, pos, msg, 0)
                    else:
                        _merge1(best, pos, msg, 0, rel(k - lo), negate)
                    k += n
            for f in range(num_feat):
                out[r, f] = cast_like(best[f], out)
                arg[r, f] = lo + pos[f]


_extrema_parallel, _extrema_serial = twins(_extrema_impl, noalias=True)
_POS32, _POS64 = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64)


def _acc_like(x):
    """An empty array of the accumulation dtype for ``x``: float32 for bf16 bits, else x's own."""
    return np.empty(0, dtype=np.float32 if x.dtype == np.uint16 else x.dtype)


def extrema_rows(indptr, cols, eids, x, w, op: int, negate: bool, fill: float):
    """(out [R, F] in x's dtype, arg [R, F]) of the max (min with ``negate``) aggregation: numpy
    arrays, int64 CSR arrays, ``x`` [N, F] and ``w`` [E, 1|F] (or a [1, 1] dummy for op 0), float32,
    float64 or bf16 bits (uint16).  ``arg`` holds CSR positions, int32 where every one fits (half the
    bytes to write, keep and read back), else int64.  Parallel over row ranges where allowed
    (``runtime.parallel_allowed``)."""
    num_rows = indptr.shape[0] - 1
    fits = indptr[num_rows] <= np.iinfo(np.int32).max
    out = np.empty((num_rows, x.shape[1]), dtype=x.dtype)
    arg = np.empty((num_rows, x.shape[1]), dtype=np.int32 if fits else np.int64)
    acc_like = _acc_like(x)
    pick(_extrema_parallel, _extrema_serial)(indptr, cols, eids, x, w, op, negate, acc_like.dtype.type(fill), out,
                                             arg, _POS32 if fits else _POS64, acc_like)
    return out, arg


@njit(cache=True, inline="always")
def _take3(best, src, s0, s1, s2, negate):
    """:func:`_merge3` without positions: the values alone (the same selects, so the same results)."""
    if negate:
        for f in range(best.shape[0]):
            b = best[f]
            v = as_float(src[s0, f])
            b = v if v < b else b
            v = as_float(src[s1, f])
            b = v if v < b else b
            v = as_float(src[s2, f])
            best[f] = v if v < b else b
    else:
        for f in range(best.shape[0]):
            b = best[f]
            v = as_float(src[s0, f])
            b = v if v > b else b
            v = as_float(src[s1, f])
            b = v if v > b else b
            v = as_float(src[s2, f])
            best[f] = v if v > b else b


def _values_impl(indptr, cols, eids, x, w, op, negate, fill, out, acc_like):
    """:func:`_extrema_impl`'s values without its positions: the first entry, then three at a time
    (:func:`_take3`, a repeated source for the one or two left over), messages of ops 1, 2 in ``msg``."""
    num_feat = out.shape[1]
    wide = w.shape[1] != 1
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        best = np.empty(num_feat, dtype=acc_like.dtype)
        msg = np.empty((3, num_feat), dtype=acc_like.dtype)
        for r in range(bounds[ch], bounds[ch + 1]):
            lo = indptr[r]
            hi = indptr[r + 1]
            if lo == hi:
                for f in range(num_feat):
                    out[r, f] = cast_like(fill, out)
                continue
            if op == 0:
                c = cols[lo]
                for f in range(num_feat):
                    best[f] = as_float(x[c, f])
                k = lo + 1
                while k < hi:  # the last group repeats its final entry: max(a, a) = a
                    k1 = min(k + 1, hi - 1)
                    k2 = min(k + 2, hi - 1)
                    _take3(best, x, cols[k], cols[k1], cols[k2], negate)
                    k += 3
            else:
                _messages(msg, x, w, cols, eids, lo, 1, op, wide)
                for f in range(num_feat):
                    best[f] = msg[0, f]
                k = lo + 1
                while k < hi:
                    n = min(3, hi - k)
                    _messages(msg, x, w, cols, eids, k, n, op, wide)
                    _take3(best, msg, 0, min(1, n - 1), min(2, n - 1), negate)
                    k += n
            for f in range(num_feat):
                out[r, f] = cast_like(best[f], out)


_values_parallel, _values_serial = twins(_values_impl, noalias=True)


def extrema_values(indptr, cols, eids, x, w, op: int, negate: bool, fill: float):
    """:func:`extrema_rows`'s ``out`` alone (no positions: nothing to send a gradient back with)."""
    num_rows = indptr.shape[0] - 1
    out = np.empty((num_rows, x.shape[1]), dtype=x.dtype)
    acc_like = _acc_like(x)
    pick(_values_parallel, _values_serial)(indptr, cols, eids, x, w, op, negate, acc_like.dtype.type(fill), out,
                                           acc_like)
    return out


@njit(cache=True)
def _extrema_scatter(cols, eids, arg, grad, x, w, op, wide, grad_x, grad_w):
    """Serial (several results may share a source row or edge): in (r, f) order, grad[r, f] (times
    the other operand for op 1) onto grad_x[cols[k], f] and grad_w[eids[k], f if wide else 0],
    k = arg[r, f]."""
    num_feat = arg.shape[1]
    need_x = grad_x.shape[0] > 0
    need_w = grad_w.shape[0] > 0
    if op != 1 and not need_w:  # copy / plus onto x alone (GIN's max): the gradient itself, no edge read
        if need_x:
            for r in range(arg.shape[0]):
                for f in range(num_feat):
                    k = arg[r, f]
                    if k >= 0:
                        grad_x[cols[k], f] += as_float(grad[r, f])
        return
    for r in range(arg.shape[0]):
        for f in range(num_feat):
            k = arg[r, f]
            if k < 0:
                continue
            g = as_float(grad[r, f])
            c = cols[k]
            e = eids[k]
            wf = f if wide else 0
            if need_x:
                grad_x[c, f] += g * as_float(w[e, wf]) if op == 1 else g
            if need_w:
                grad_w[e, wf] += g * as_float(x[c, f]) if op == 1 else g


def extrema_scatter(cols, eids, arg, grad, x, w, op: int, wide: bool, grad_x, grad_w) -> None:
    """The arg-based backward of :func:`extrema_rows` into ``grad_x`` / ``grad_w`` (zeroed arrays of
    the accumulation dtype; an empty [0, 1] array for a gradient not needed; ``grad``, ``x``, ``w``
    may be bf16 bits); ``wide``: one edge operand per feature (else one per edge); ``x``, ``w`` are
    read for op 1 only ([1, 1] dummies otherwise)."""
    _extrema_scatter(cols, eids, arg, grad, x, w, op, wide, grad_x, grad_w)
