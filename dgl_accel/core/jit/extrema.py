"""Compiled loop of the max/min aggregation (:mod:`dgl_accel.core.extrema`): one pass per CSR row.

Same contract as the Triton kernel and the vectorised torch path: messages in the arrays' dtype
(float32 or float64), the first entry of a row taken, then a later one only when strictly larger
(``negate``: strictly smaller, the min; ties stay with the first CSR position); rows without
entries hold ``fill`` and arg -1.
"""
from __future__ import annotations

import numpy as np

from .row_ranges import bounds_of
from .runtime import njit, pick, prange, twins

__all__ = ["extrema_rows", "extrema_scatter"]


@njit(cache=True, inline="always")
def _merge(best, pos, src, row, k, first, negate):
    """Merge entry ``k``'s message ``src[row]`` into the row's running extremum: taken when first,
    else only where strictly larger (``negate``: strictly smaller), so ties keep the first position."""
    num_feat = best.shape[0]
    if first:
        for f in range(num_feat):
            best[f] = src[row, f]
            pos[f] = k
    elif negate:
        for f in range(num_feat):
            v = src[row, f]
            if v < best[f]:
                best[f] = v
                pos[f] = k
    else:
        for f in range(num_feat):
            v = src[row, f]
            if v > best[f]:
                best[f] = v
                pos[f] = k


def _extrema_impl(indptr, cols, eids, x, w, op, negate, fill, out, arg):
    """out[r, f], arg[r, f] for every row r (op 0: x[cols[k]], 1: times w[eids[k]], 2: plus it).
    Rows are cut into 64 ranges of about equal edge counts, one parallel task each."""
    num_feat = out.shape[1]
    wide = w.shape[1] != 1
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        best = np.empty(num_feat, dtype=out.dtype)  # one per range: no allocation per row
        pos = np.empty(num_feat, dtype=np.int64)
        msg = np.empty((1, num_feat), dtype=out.dtype)
        for r in range(bounds[ch], bounds[ch + 1]):
            lo = indptr[r]
            hi = indptr[r + 1]
            if lo == hi:
                for f in range(num_feat):
                    out[r, f] = fill
                    arg[r, f] = -1
                continue
            for k in range(lo, hi):
                c = cols[k]
                if op == 0:  # a copy: x's row itself
                    _merge(best, pos, x, c, k, k == lo, negate)
                    continue
                e = eids[k]
                if wide:  # the message row first: a simple loop the compiler vectorises
                    for f in range(num_feat):
                        msg[0, f] = x[c, f] * w[e, f] if op == 1 else x[c, f] + w[e, f]
                else:
                    we = w[e, 0]
                    for f in range(num_feat):
                        msg[0, f] = x[c, f] * we if op == 1 else x[c, f] + we
                _merge(best, pos, msg, 0, k, k == lo, negate)
            for f in range(num_feat):
                out[r, f] = best[f]
                arg[r, f] = pos[f]


_extrema_parallel, _extrema_serial = twins(_extrema_impl)


def extrema_rows(indptr, cols, eids, x, w, op: int, negate: bool, fill: float):
    """(out [R, F] in x's dtype, arg [R, F] int64) of the max (min with ``negate``) aggregation:
    numpy arrays, int64 CSR arrays, ``x`` [N, F] and ``w`` [E, 1|F] (or a [1, 1] dummy for op 0) of
    one dtype.  Parallel over row ranges where allowed (``runtime.parallel_allowed``)."""
    num_rows = indptr.shape[0] - 1
    out = np.empty((num_rows, x.shape[1]), dtype=x.dtype)
    arg = np.empty((num_rows, x.shape[1]), dtype=np.int64)
    pick(_extrema_parallel, _extrema_serial)(indptr, cols, eids, x, w, op, negate, x.dtype.type(fill), out, arg)
    return out, arg


@njit(cache=True)
def _extrema_scatter(cols, eids, arg, grad, x, w, op, wide, grad_x, grad_w):
    """Serial (several results may share a source row or edge): in (r, f) order, grad[r, f] (times
    the other operand for op 1) onto grad_x[cols[k], f] and grad_w[eids[k], f if wide else 0],
    k = arg[r, f]."""
    num_feat = arg.shape[1]
    need_x = grad_x.shape[0] > 0
    need_w = grad_w.shape[0] > 0
    for r in range(arg.shape[0]):
        for f in range(num_feat):
            k = arg[r, f]
            if k < 0:
                continue
            g = grad[r, f]
            c = cols[k]
            e = eids[k]
            wf = f if wide else 0
            if need_x:
                grad_x[c, f] += g * w[e, wf] if op == 1 else g
            if need_w:
                grad_w[e, wf] += g * x[c, f] if op == 1 else g


def extrema_scatter(cols, eids, arg, grad, x, w, op: int, wide: bool, grad_x, grad_w) -> None:
    """The arg-based backward of :func:`extrema_rows` into ``grad_x`` / ``grad_w`` (zeroed arrays of
    grad's dtype; an empty [0, 1] array for a gradient not needed); ``wide``: one edge operand per
    feature (else one per edge); ``x``, ``w`` are read for op 1 only ([1, 1] dummies otherwise)."""
    _extrema_scatter(cols, eids, arg, grad, x, w, op, wide, grad_x, grad_w)
