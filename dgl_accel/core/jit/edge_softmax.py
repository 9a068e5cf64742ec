"""Compiled CPU loops of the edge softmax (:mod:`dgl_accel.core.attention.edge_softmax`) on numpy arrays
(float32 or float64; the caller converts half types to float32 and back, as the native torch path does).

Forward (subtract the row max; numpy's vectorised exp; divide by the row sum) and backward in edge-id
order, given every edge's row: sequential reads and writes, only per-row maxima and sums indexed by
row (gathering through the CSR's edge ids measured 2x slower).  Each of a few edge ranges reduces into
its own per-row arrays, merged after (:func:`partitions`); sums run in the arrays' dtype.  Each loop
has (parallel, serial) twins (:func:`~dgl_accel.core.jit.runtime.twins`) so DataLoader workers can run them.
"""
from __future__ import annotations

import numpy as np

from .attention_common import CHUNKS
from .runtime import njit, pick, prange, twins

__all__ = ["partitions", "edge_softmax_forward", "edge_softmax_backward"]


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


_softmax_shift_parallel, _softmax_shift_serial = twins(_softmax_shift_impl, noalias=True)


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


_softmax_normalise_parallel, _softmax_normalise_serial = twins(_softmax_normalise_impl, noalias=True)


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


_softmax_bwd_parallel, _softmax_bwd_serial = twins(_softmax_bwd_impl, noalias=True)


# ------------------------------------------------------------------ entry points (numpy in, numpy out)
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
