"""Pieces shared by the compiled CPU loops of the attention ops over CSR rows (:mod:`.gat`,
:mod:`.gatv2`, :mod:`.dot`, :mod:`.edge_softmax`; their row ranges: :mod:`.row_ranges`): the parallel
task count ``CHUNKS``, the fastmath flags ``REASSOC``, :func:`max_degree`; for the variants (:mod:`.dot`,
:mod:`.gatv2`) the per-task buffers of a forward, and a destination's softmax in three passes over its scores (reset,
exp and sum, the weighted sum of source rows, the store of ``out[v]`` and ``lse[v] = m + log(l)``).

The helpers are inlined into the loops that call them (``inline="always"``: numba's IR, compiled under
the caller's fastmath flags), so a loop computes exactly what it did with the code written out.
"""
from __future__ import annotations

import math

import numpy as np

from .runtime import njit

__all__ = ["CHUNKS", "REASSOC", "max_degree", "row_dot",
           "grad_term", "softmax_buffers", "softmax_reset", "softmax_exp", "softmax_accumulate",
           "softmax_store"]


CHUNKS = 64  # parallel tasks per call (row ranges of about equal edge counts)
# Sums may be reordered (and multiply-adds fused), so the D-long dot products of the backward passes
# vectorise; no assumption about infinities or NaN (the online max starts at -inf).
REASSOC = {"reassoc", "contract"}


def max_degree(indptr) -> int:
    """The longest row of a CSR (0 without rows): the size of the per-task score buffers."""
    return int((indptr[1:] - indptr[:-1]).max()) if indptr.shape[0] > 1 else 0


@njit(cache=True, inline="always")
def row_dot(x, i, y, j, h):
    """<x[i, h], y[j, h]> over y's last dimension; the first term starts the sum (it stays in the
    arrays' dtype)."""
    t = x[i, h, 0] * y[j, h, 0]
    for d in range(1, y.shape[2]):
        t += x[i, h, d] * y[j, h, d]
    return t


@njit(cache=True, inline="always")
def softmax_buffers(out, max_deg):
    """One task's (max [H], sum [H], accumulator [H, D], the row's scores [max_deg, H]) in out's dtype."""
    heads, dim = out.shape[1], out.shape[2]
    return (np.empty(heads, dtype=out.dtype), np.empty(heads, dtype=out.dtype),
            np.empty((heads, dim), dtype=out.dtype), np.empty((max_deg, heads), dtype=out.dtype))


@njit(cache=True, inline="always")
def softmax_reset(m, lsum, acc):
    """A new destination: max -inf, sum and accumulator 0."""
    for h in range(acc.shape[0]):
        m[h] = -np.inf
        lsum[h] = 0
        for d in range(acc.shape[1]):
            acc[h, d] = 0


@njit(cache=True, inline="always")
def softmax_exp(sbuf, m, lsum, n):
    """The row's n scores (with their max in m) replaced by exp(s - m), their sums into lsum."""
    for j in range(n):
        for h in range(m.shape[0]):
            p = math.exp(sbuf[j, h] - m[h])
            sbuf[j, h] = p
            lsum[h] += p


@njit(cache=True, inline="always")
def softmax_accumulate(acc, sbuf, indices, start, n, x):
    """acc[h] += sbuf[j, h] x[indices[start + j], h] over the row's n entries."""
    for j in range(n):
        u = indices[start + j]
        for h in range(acc.shape[0]):
            p = sbuf[j, h]
            for d in range(acc.shape[1]):
                acc[h, d] += p * x[u, h, d]


@njit(cache=True, inline="always")
def softmax_store(out, lse, v, m, lsum, acc):
    """out[v] = acc / l and lse[v] = m + log(l); a row without entries: out 0, lse -inf (never read
    by backward)."""
    for h in range(acc.shape[0]):
        den = lsum[h]
        if den > 0:
            for d in range(acc.shape[1]):
                out[v, h, d] = acc[h, d] / den
            lse[v, h] = m[h] + math.log(den)
        else:
            for d in range(acc.shape[1]):
                out[v, h, d] = 0
            lse[v, h] = -np.inf


@njit(cache=True, inline="always")
def grad_term(grad_out, v, y, u, h, ga, has_ga, e):
    """t_e = <grad_out[v, h], y[u, h]> (+ grad_attn[e, h] with has_ga) of edge e = (u -> v): with
    p_e = exp(s_e - lse[v, h]), the softmax backward's ds_e = p_e (t_e - c[v, h])."""
    t = row_dot(grad_out, v, y, u, h)
    if has_ga:
        t += ga[e, h]
    return t
