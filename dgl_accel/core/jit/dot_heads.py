"""The backward of the fused dot-product attention's compiled CPU loops (:mod:`.dot`) with every head
of a row at once, for many narrow heads (:func:`covers`): the CPU twin of ``kernels/dot_heads.py``.

:mod:`.dot`'s loops take q, k, val [N, H, D] and reduce each head's D-long dot product on its own: at
8 heads of 8 features (UniMP's TransformerConv) a head's row is one short vector, each dot a
horizontal sum, and numba compiles them to scalar code.  Here the arrays are laid out heads-minor,
[N, D, H] (a transposed copy each way per call), and the head count and widths are compile-time
constants (a loop pair per (H, DK, DV), compiled on first use and cached on disk), so
``for d: for h: s[h] += q[v, d, h] k[u, d, h]`` is D vector multiply-adds across the heads, no
horizontal sum; numba's superword vectoriser (off by default, ``runtime.twins(slp=True)``) packs them,
and the heads' exps with them (``runtime.exp32``: no libm call).  The rows gathered by index (k and
val, then q and grad_out) are prefetched :data:`AHEAD` edges ahead (``runtime.prefetch_row``).
The math, the passes and their order are :mod:`.dot`'s backward (its docstring), and each sum runs in
the same order as there (tests compare the two loop sets).

Where it pays (Amazon-CS, 505k edges, one thread, the whole backward interleaved with :mod:`.dot`'s):
8 x 8 159 against 211 ms, 8 x 16 150 / 196, 16 x 8 230 / 293; not at 4 x 8 (75 / 67), 4 x 16 (108 /
96), 1 x 16 (38 / 30) nor 8 x 32 (420 / 405), which keep :mod:`.dot`'s loops.  The forward keeps them
everywhere (heads-minor: 63 against 56 ms at 8 x 8): its one pass over each row's edges gains less
from packed dots than the transposes cost.
"""
from __future__ import annotations

import functools

import numpy as np

from .attention_common import CHUNKS, REASSOC
from .row_ranges import bounds_of
from .runtime import exp32, pick, prange, prefetch_row, twins

__all__ = ["MIN_HEADS", "MAX_ROW", "covers", "backward"]

MIN_HEADS = 8       # fewer heads: a vector across heads too short to pay for the transposes (measured)
MAX_ROW = 128       # H x max(DK, DV) at most: wider rows vectorise well enough in :mod:`.dot`'s loops
AHEAD = 8           # rows gathered by index are prefetched this many entries ahead (runtime.prefetch_row)


def covers(heads: int, key_dim: int, val_dim: int) -> bool:
    """Whether (H, DK, DV) takes these loops (else :mod:`.dot`'s)."""
    return heads >= MIN_HEADS and heads * max(key_dim, val_dim) <= MAX_ROW


@functools.cache
def _loops(H: int, DK: int, DV: int):
    """(the backward's destination pass, its source pass), each a (parallel, serial) pair compiled
    with H, DK and DV as constants."""

    def bwd_dst(indptr, indices, eids, q, k, val, scale, lse, c, grad_out, ga, has_ga, grad_q, pd):
        bounds = bounds_of(indptr, CHUNKS)
        sc = scale[0]
        last = indices.shape[0] - AHEAD
        for ch in prange(CHUNKS):
            den = np.empty(H, dtype=c.dtype)
            s = np.empty(H, dtype=c.dtype)
            t = np.empty(H, dtype=c.dtype)
            cv = np.empty(H, dtype=c.dtype)
            gq = np.empty((DK, H), dtype=c.dtype)
            for v in range(bounds[ch], bounds[ch + 1]):
                for h in range(H):
                    cv[h] = 0
                    den[h] = 0
                for j in range(indptr[v], indptr[v + 1]):  # p_e and t_e; c[v] = sum p_e t_e
                    u = indices[j]
                    if j < last:
                        prefetch_row(k, indices[j + AHEAD])
                        prefetch_row(val, indices[j + AHEAD])
                    for h in range(H):
                        s[h] = 0
                        t[h] = 0
                    for d in range(DK):
                        for h in range(H):
                            s[h] += q[v, d, h] * k[u, d, h]
                    for d in range(DV):
                        for h in range(H):
                            t[h] += grad_out[v, d, h] * val[u, d, h]
                    if has_ga:
                        for h in range(H):
                            t[h] += ga[eids[j], h]
                    for h in range(H):
                        s[h] = exp32(s[h] * sc - lse[v, h])
                    for h in range(H):
                        p = s[h]
                        pd[j, 0, h] = p
                        pd[j, 1, h] = t[h]
                        cv[h] += p * t[h]
                        den[h] += p
                for h in range(H):
                    if den[h] > 0:  # 1 up to lse's rounding: dividing keeps sum_e ds_e = 0
                        cv[h] /= den[h]
                    c[v, h] = cv[h]
                for d in range(DK):
                    for h in range(H):
                        gq[d, h] = 0
                for j in range(indptr[v], indptr[v + 1]):  # ds_e; grad_q[v] = sum ds_e k[u]
                    u = indices[j]
                    for h in range(H):
                        s[h] = pd[j, 0, h] * (pd[j, 1, h] - cv[h]) * sc
                        pd[j, 1, h] = s[h]
                    for d in range(DK):
                        for h in range(H):
                            gq[d, h] += s[h] * k[u, d, h]
                for d in range(DK):
                    for h in range(H):
                        grad_q[v, d, h] = gq[d, h]

    def bwd_src(indptr, indices, q, grad_out, pd, grad_k, grad_val):
        bounds = bounds_of(indptr, CHUNKS)
        last = indices.shape[0] - AHEAD
        for ch in prange(CHUNKS):
            gk = np.empty((DK, H), dtype=q.dtype)
            gv = np.empty((DV, H), dtype=q.dtype)
            for u in range(bounds[ch], bounds[ch + 1]):
                gk[:] = 0
                gv[:] = 0
                for j in range(indptr[u], indptr[u + 1]):
                    v = indices[j]
                    if j < last:
                        prefetch_row(q, indices[j + AHEAD])
                        prefetch_row(grad_out, indices[j + AHEAD])
                    for d in range(DK):
                        for h in range(H):
                            gk[d, h] += pd[j, 1, h] * q[v, d, h]
                    for d in range(DV):
                        for h in range(H):
                            gv[d, h] += pd[j, 0, h] * grad_out[v, d, h]
                for d in range(DK):
                    for h in range(H):
                        grad_k[u, d, h] = gk[d, h]
                for d in range(DV):
                    for h in range(H):
                        grad_val[u, d, h] = gv[d, h]

    return tuple(twins(f, fastmath=REASSOC, noalias=True, slp=True) for f in (bwd_dst, bwd_src))


def _minor(x: np.ndarray) -> np.ndarray:
    """[N, H, D] <-> [N, D, H], a C-contiguous copy."""
    return np.ascontiguousarray(x.transpose(0, 2, 1))


def backward(in_csr, out_csr, q, k, val, scale: np.ndarray, lse, c, grad_out, ga, has_ga: bool, pd):
    """:func:`.dot.dot_backward`'s (grad_q, grad_k, grad_val), its scratch arrays passed in."""
    heads, key_dim, val_dim = q.shape[1], q.shape[2], val.shape[2]
    dst_pass, src_pass = _loops(heads, key_dim, val_dim)
    qm, gom = _minor(q), _minor(grad_out)
    grad_q = np.empty((q.shape[0], key_dim, heads), dtype=q.dtype)
    pick(*dst_pass)(*in_csr, qm, _minor(k), _minor(val), scale, lse, c, gom, ga, has_ga, grad_q, pd)
    pd_out = np.take(pd, out_csr[2], axis=0)  # the out-CSR's order: the source pass reads it row after row
    grad_k = np.empty((k.shape[0], key_dim, heads), dtype=q.dtype)
    grad_val = np.empty((val.shape[0], val_dim, heads), dtype=q.dtype)
    pick(*src_pass)(out_csr[0], out_csr[1], qm, gom, pd_out, grad_k, grad_val)
    return _minor(grad_q), _minor(grad_k), _minor(grad_val)
