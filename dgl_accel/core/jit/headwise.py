"""Compiled loop of the head-wise aggregation (:mod:`dgl_accel.core.headwise`): one pass per CSR row.

Same contract as ``kernels/headwise.py`` and the vectorised torch path: out[r, f] = the sum over row
r's entries k of x[cols[k], f] (op 0) or x[cols[k], f] * w[eids[k], (f // R) % K] (op 1), in the
arrays' dtype (float32 or float64); rows without entries hold 0.
"""
from __future__ import annotations

import numpy as np

from .row_ranges import bounds_of
from .runtime import pick, prange, twins

__all__ = ["headwise_rows"]


def _headwise_impl(indptr, cols, eids, x, w, op, head_len, out):
    """out[r, :] for every row r, rows cut into 64 ranges of about equal edge counts, one parallel
    task each; features walked as (group, head, position in head) so a weight is read once per head."""
    num_feat = out.shape[1]
    num_heads = w.shape[1]
    groups = num_feat // (num_heads * head_len) if num_heads * head_len > 0 else 0
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(num_feat, dtype=out.dtype)  # one per range: no allocation per row
        for r in range(bounds[ch], bounds[ch + 1]):
            for f in range(num_feat):
                acc[f] = 0
            for k in range(indptr[r], indptr[r + 1]):
                c = cols[k]
                if op == 0:
                    for f in range(num_feat):
                        acc[f] += x[c, f]
                    continue
                e = eids[k]
                xr = x[c]
                for g in range(groups):
                    for h in range(num_heads):
                        we = w[e, h]
                        base = (g * num_heads + h) * head_len
                        # one-dimensional slices: the compiler vectorises this loop (2-D indexing: 6x slower)
                        a = acc[base:base + head_len]
                        b = xr[base:base + head_len]
                        for j in range(head_len):
                            a[j] += b[j] * we
            for f in range(num_feat):
                out[r, f] = acc[f]


_headwise_parallel, _headwise_serial = twins(_headwise_impl, noalias=True)


def headwise_rows(indptr, cols, eids, x, w, op: int, head_len: int):
    """out [R, F] in x's dtype: numpy arrays, int64 CSR arrays, ``x`` [N, F] and ``w`` [E, K] (a [1, 1]
    dummy for op 0) of one dtype, F a multiple of K * ``head_len``.  Parallel over row ranges where
    allowed (``runtime.parallel_allowed``)."""
    num_rows = indptr.shape[0] - 1
    out = np.empty((num_rows, x.shape[1]), dtype=x.dtype)
    pick(_headwise_parallel, _headwise_serial)(indptr, cols, eids, x, w, op, head_len, out)
    return out
