"""Compiled loops of the rectified edge-sum (:mod:`dgl_accel.core.add_relu_sum`, GINE's neighbour
sum): ``out[v] = sum over in-edges e = (u -> v) of relu(x[u] + w[e])`` in one pass per in-CSR row,
and its backward in one pass per out-CSR row (a source's gradient is the sum of its out-edges'
passed gradients; each edge's own gradient is written once), no [E, F] message tensor either way.

Arrays are float32, float64 or bf16 bits (uint16, widened where read, results narrowed once); each
message ``x[u] + w[e]`` is formed in the accumulation dtype (float64 if an operand is float64, else
float32) and summed in CSR order.  Rows are cut into 64 ranges of about equal entry counts, one
parallel task each (:func:`~.row_ranges.bounds_of`).  :func:`add_relu_sum_projected_rows` forms
``w[e]`` itself from the edge features and a linear layer's weight (forward only: no [E, F] tensor
even for ``w``).
"""
from __future__ import annotations

import numpy as np

from .row_ranges import bounds_of
from .runtime import as_float, cast_like, njit, pick, prange, twins

__all__ = ["add_relu_sum_rows", "add_relu_sum_grad_rows", "add_relu_sum_projected_rows", "add_relu_sum_edges",
           "add_relu_sum_grad_edges"]


def _forward_impl(indptr, indices, eids, x, w, out, acc_like):
    """out[r, f] = sum over row r's entries k of max(x[indices[k], f] + w[eids[k], f], 0)."""
    num_feat = out.shape[1]
    zero = acc_like[0]
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(num_feat, dtype=acc_like.dtype)  # one per range: no allocation per row
        for r in range(bounds[ch], bounds[ch + 1]):
            for f in range(num_feat):
                acc[f] = 0
            for k in range(indptr[r], indptr[r + 1]):
                c = indices[k]
                e = eids[k]
                for f in range(num_feat):
                    m = as_float(x[c, f]) + as_float(w[e, f])
                    acc[f] += m if not m <= 0 else zero  # relu, NaN kept (torch's)
            for f in range(num_feat):
                out[r, f] = cast_like(acc[f], out)


_forward_parallel, _forward_serial = twins(_forward_impl)


def _backward_impl(indptr, indices, eids, x, w, grad, grad_x, grad_w, acc_like):
    """Over the out-CSR (row u = a source, entries its out-edges to v = indices[k], e = eids[k]):
    g = grad[v, f] where x[u, f] + w[e, f] > 0, else 0; grad_w[e, f] = g (when grad_w has rows),
    grad_x[u, f] = the sum of g over u's entries (when grad_x has rows)."""
    num_feat = grad.shape[1]
    want_x = grad_x.shape[0] != 0
    want_w = grad_w.shape[0] != 0
    zero = acc_like[0]
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(num_feat, dtype=acc_like.dtype)
        for u in range(bounds[ch], bounds[ch + 1]):
            for f in range(num_feat):
                acc[f] = 0
            for k in range(indptr[u], indptr[u + 1]):
                v = indices[k]
                e = eids[k]
                for f in range(num_feat):
                    m = as_float(x[u, f]) + as_float(w[e, f])
                    g = as_float(grad[v, f]) if m > 0 else zero  # relu's gradient: where its output > 0
                    acc[f] += g
                    if want_w:
                        grad_w[e, f] = cast_like(g, grad_w)
            if want_x:
                for f in range(num_feat):
                    grad_x[u, f] = cast_like(acc[f], grad_x)


_backward_parallel, _backward_serial = twins(_backward_impl)


def _projected_impl(indptr, indices, eids, x, a, wt, b, out, acc_like):
    """out[r, f] = sum over row r's entries k of max(x[c, f] + b[f] + sum_d a[e, d] wt[d, f], 0)
    (c = indices[k], e = eids[k]): the edge features' product formed per edge, never stored."""
    num_feat = out.shape[1]
    zero = acc_like[0]
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(num_feat, dtype=acc_like.dtype)
        m = np.empty(num_feat, dtype=acc_like.dtype)
        for r in range(bounds[ch], bounds[ch + 1]):
            for f in range(num_feat):
                acc[f] = 0
            for k in range(indptr[r], indptr[r + 1]):
                c = indices[k]
                e = eids[k]
                for f in range(num_feat):
                    m[f] = b[f]
                for d in range(a.shape[1]):
                    ad = as_float(a[e, d])
                    for f in range(num_feat):
                        m[f] += ad * wt[d, f]
                for f in range(num_feat):
                    v = as_float(x[c, f]) + m[f]
                    acc[f] += v if not v <= 0 else zero
            for f in range(num_feat):
                out[r, f] = cast_like(acc[f], out)


_projected_parallel, _projected_serial = twins(_projected_impl)


@njit(cache=True)
def _forward_edges(src, dst, x, w, acc_out, zero):
    """acc_out[dst[e]] += relu(x[src[e]] + w[e]) for e in edge-id order (serial: ``w`` read in its
    own order, as PyG's ``index_add_`` reads its messages)."""
    for e in range(src.shape[0]):
        c = src[e]
        r = dst[e]
        for f in range(acc_out.shape[1]):
            m = as_float(x[c, f]) + as_float(w[e, f])
            acc_out[r, f] += m if not m <= 0 else zero


@njit(cache=True)
def _backward_edges(src, dst, x, w, grad, acc_x, grad_w, zero):
    """The backward in edge-id order (serial): g = grad[dst[e]] where x[src[e]] + w[e] > 0;
    grad_w[e] = g (where grad_w has rows), acc_x[src[e]] += g (where acc_x has rows)."""
    want_x = acc_x.shape[0] != 0
    want_w = grad_w.shape[0] != 0
    for e in range(src.shape[0]):
        u = src[e]
        v = dst[e]
        for f in range(grad.shape[1]):
            m = as_float(x[u, f]) + as_float(w[e, f])
            g = as_float(grad[v, f]) if m > 0 else zero
            if want_x:
                acc_x[u, f] += g
            if want_w:
                grad_w[e, f] = cast_like(g, grad_w)


def add_relu_sum_edges(src, dst, x, w, acc_out) -> None:
    """``acc_out[dst[e]] += relu(x[src[e]] + w[e])`` over the edges in id order (``acc_out`` zeroed,
    in the accumulation dtype): one thread, ``w`` read sequentially (the CSR passes read it by edge
    id, at random where the edge list is not sorted by target)."""
    _forward_edges(src, dst, x, w, acc_out, _acc(x, w, acc_out)[0])


def add_relu_sum_grad_edges(src, dst, x, w, grad, acc_x, grad_w) -> None:
    """The backward of :func:`add_relu_sum_edges`: ``acc_x`` (zeroed, accumulation dtype, or 0 rows)
    and ``grad_w`` (or 0 rows)."""
    _backward_edges(src, dst, x, w, grad, acc_x, grad_w, _acc(x, w, grad)[0])


def _acc(*arrays) -> np.ndarray:
    """[0.0] in the accumulation dtype (float64 if any array is, else float32): the loops' zero."""
    return np.zeros(1, dtype=np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32)


def add_relu_sum_rows(indptr, indices, eids, x, w, out) -> None:
    """``out[r] = sum over row r's entries k of relu(x[indices[k]] + w[eids[k]])`` (numpy arrays:
    int64 CSR, ``x`` [N, F], ``w`` [E, F], ``out`` [R, F], each float32, float64 or bf16 bits),
    every row written (empty rows: 0)."""
    pick(_forward_parallel, _forward_serial)(indptr, indices, eids, x, w, out, _acc(x, w, out))


def add_relu_sum_grad_rows(indptr, indices, eids, x, w, grad, grad_x, grad_w) -> None:
    """The backward of :func:`add_relu_sum_rows` over the OUT-CSR of the same graph (rows: the
    sources): ``grad_x`` [N, F] and ``grad_w`` [E, F] written in full, or skipped where given with
    0 rows."""
    pick(_backward_parallel, _backward_serial)(indptr, indices, eids, x, w, grad, grad_x, grad_w,
                                               _acc(x, w, grad))


def add_relu_sum_projected_rows(indptr, indices, eids, x, a, wt, b, out) -> None:
    """``out[r] = sum over row r's entries k of relu(x[indices[k]] + a[eids[k]] @ wt + b)`` (``a``
    [E, D] edge features, float32/64 or bf16 bits; ``wt`` [D, F] and ``b`` [F] in the accumulation
    dtype, float64 if any operand is, else float32), every row written (empty rows: 0)."""
    pick(_projected_parallel, _projected_serial)(indptr, indices, eids, x, a, wt, b, out, _acc(x, a, wt, out))
