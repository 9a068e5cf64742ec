"""Compiled CPU loops of the fused dot-product attention (:mod:`dgl_accel.core.attention.dot`) on numpy
arrays (float32 or float64; the caller converts half types to float32 and back).

For destination v, head h and in-edge e = (u -> v): s_e = scale <q[v, h], k[u, h]>, p_e its softmax over
v's in-edges, out[v, h] = sum_e p_e val[u, h].

* forward, ``prange`` over destinations (in-CSR rows): the row's scores and their max per head in a
  buffer of max-degree x H, then exp and the weighted sum of value rows into ``out[v]``,
  ``lse[v] = m + log(l)``;
* backward, with t_e = <grad_out[v], val[u]> (+ grad_attn_e), c[v, h] = sum over v's in-edges of
  p_e t_e and ds_e = p_e (t_e - c[v]): a pass over destinations sweeps v's edges twice, first
  recomputing p_e from lse (in the arrays' dtype: the output rounded to a half type is too coarse)
  and summing c[v], then writing grad_q[v] = scale sum_e ds_e k[u]; a pass over sources (out-CSR rows)
  writes grad_k[u] = scale sum_e ds_e q[v] and grad_val[u] = sum_e p_e grad_out[v].  p_e and ds_e
  are kept per edge and head between the passes (an E x 2 x H scratch array, freed on return): one
  exp and two H-long dots per edge and head instead of three of each (at 8 heads of 8 features the
  exps were most of the backward).  The destination pass writes them in its own order, one tight
  gather (``np.take`` by the out-CSR's in-CSR positions) puts them in the out-CSR's, and the source pass reads
  them row after row: each pass reading E-sized scratch in another order than its own (by edge id)
  missed the cache on every edge, a third of the backward.  Each output row is written by the one
  task owning it (no atomics).

The backward of many narrow heads (:func:`.dot_heads.covers`: 8 x 8, UniMP's) takes :mod:`.dot_heads`'
loops instead: the same passes with every head of a row in one vector.

Rows are cut into ``CHUNKS`` ranges of about equal edge counts (:func:`bounds_of`), one task each;
(parallel, serial) twins as every loop here.
"""
from __future__ import annotations

import math

import numpy as np

from . import dot_heads
from .attention_common import (
    CHUNKS,
    REASSOC,
    grad_term,
    max_degree,
    row_dot,
    softmax_accumulate,
    softmax_buffers,
    softmax_exp,
    softmax_reset,
    softmax_store,
)
from .row_ranges import bounds_of
from .runtime import pick, prange, twins

__all__ = ["dot_forward", "dot_attention", "dot_backward"]


def _dot_fwd_impl(indptr, indices, q, k, val, scale, out, lse, max_deg):
    H = q.shape[1]
    bounds = bounds_of(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        m, lsum, acc, sbuf = softmax_buffers(out, max_deg)
        sc = scale[0]
        for v in range(bounds[ch], bounds[ch + 1]):
            start = indptr[v]
            n = indptr[v + 1] - start
            softmax_reset(m, lsum, acc)
            for j in range(n):
                u = indices[start + j]
                for h in range(H):
                    s = row_dot(q, v, k, u, h) * sc
                    sbuf[j, h] = s
                    m[h] = max(m[h], s)
            softmax_exp(sbuf, m, lsum, n)
            softmax_accumulate(acc, sbuf, indices, start, n, val)
            softmax_store(out, lse, v, m, lsum, acc)


_dot_fwd_parallel, _dot_fwd_serial = twins(_dot_fwd_impl, fastmath=REASSOC, noalias=True)


def _dot_attention_impl(indptr, indices, eids, q, k, scale, lse, a):
    """a[e, h] = exp(s_e - lse[v, h]) for every in-edge e = (u -> v), in edge-id order."""
    H = q.shape[1]
    bounds = bounds_of(indptr, CHUNKS)
    sc = scale[0]
    for ch in prange(CHUNKS):
        for v in range(bounds[ch], bounds[ch + 1]):
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                for h in range(H):
                    a[eids[j], h] = math.exp(row_dot(q, v, k, u, h) * sc - lse[v, h])


_dot_attention_parallel, _dot_attention_serial = twins(_dot_attention_impl, fastmath=REASSOC, noalias=True)


def _dot_bwd_dst_impl(indptr, indices, eids, q, k, val, scale, lse, c, grad_out, ga, has_ga, grad_q, pd):
    """Per in-CSR position j (edge e = (u -> v)): pd[j, 0] = p_e, then pd[j, 1] = scale p_e (t_e - c[v])
    (t_e kept there in between), c[v] = sum over v's in-edges of p_e t_e, and grad_q[v] = sum over
    them of ds_e k[u]; ``grad_attn`` is read by edge id."""
    H = q.shape[1]
    DK = q.shape[2]
    bounds = bounds_of(indptr, CHUNKS)
    sc = scale[0]
    for ch in prange(CHUNKS):
        den = np.empty(H, dtype=c.dtype)
        for v in range(bounds[ch], bounds[ch + 1]):
            grad_q[v] = 0
            c[v] = 0
            den[:] = 0
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                for h in range(H):
                    t = grad_term(grad_out, v, val, u, h, ga, has_ga, eids[j])
                    p = math.exp(row_dot(q, v, k, u, h) * sc - lse[v, h])
                    pd[j, 0, h] = p
                    pd[j, 1, h] = t
                    c[v, h] += p * t
                    den[h] += p
            for h in range(H):
                if den[h] > 0:  # 1 up to lse's rounding: dividing keeps sum_e ds_e = 0
                    c[v, h] /= den[h]
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                for h in range(H):
                    d_e = pd[j, 0, h] * (pd[j, 1, h] - c[v, h]) * sc
                    pd[j, 1, h] = d_e
                    for d in range(DK):
                        grad_q[v, h, d] += d_e * k[u, h, d]


_dot_bwd_dst_parallel, _dot_bwd_dst_serial = twins(_dot_bwd_dst_impl, fastmath=REASSOC, noalias=True)


def _dot_bwd_src_impl(indptr, indices, q, grad_out, pd, grad_k, grad_val):
    """grad_k[u] = sum over u's out-edges of ds_e q[v]; grad_val[u] = sum p_e grad_out[v] (the
    destination pass's p_e and ds_e, permuted to the out-CSR's order: ``pd[j]`` is position j's)."""
    H = q.shape[1]
    DK = q.shape[2]
    DV = grad_out.shape[2]
    bounds = bounds_of(indptr, CHUNKS)
    for ch in prange(CHUNKS):
        for u in range(bounds[ch], bounds[ch + 1]):
            grad_k[u] = 0
            grad_val[u] = 0
            for j in range(indptr[u], indptr[u + 1]):
                v = indices[j]
                for h in range(H):
                    p = pd[j, 0, h]
                    d_e = pd[j, 1, h]
                    for d in range(DK):
                        grad_k[u, h, d] += d_e * q[v, h, d]
                    for d in range(DV):
                        grad_val[u, h, d] += p * grad_out[v, h, d]


_dot_bwd_src_parallel, _dot_bwd_src_serial = twins(_dot_bwd_src_impl, fastmath=REASSOC, noalias=True)


# ------------------------------------------------------------------ entry points (numpy in, numpy out)
def _scale(scale: float, dtype) -> np.ndarray:
    return np.array([scale], dtype=dtype)  # keeps float32 sums in float32


def dot_forward(indptr, indices, q, k, val, scale: float):
    """(out [num_dst, H, DV], lse [num_dst, H]) over the in-CSR (``indptr``, ``indices`` int64);
    ``q`` [num_dst, H, DK], ``k`` [num_src, H, DK], ``val`` [num_src, H, DV], one float dtype, C-contiguous."""
    num_dst = indptr.shape[0] - 1
    out = np.empty((num_dst,) + val.shape[1:], dtype=val.dtype)
    lse = np.empty((num_dst, q.shape[1]), dtype=val.dtype)
    pick(_dot_fwd_parallel, _dot_fwd_serial)(indptr, indices, q, k, val, _scale(scale, q.dtype), out, lse,
                                             np.int64(max_degree(indptr)))
    return out, lse


def dot_attention(indptr, indices, eids, q, k, scale: float, lse):
    """The attention [E, H] in edge-id order, recomputed from ``lse`` over the in-CSR."""
    a = np.empty((indices.shape[0], q.shape[1]), dtype=q.dtype)
    pick(_dot_attention_parallel, _dot_attention_serial)(indptr, indices, eids, q, k, _scale(scale, q.dtype), lse, a)
    return a


def dot_backward(in_csr, out_csr, q, k, val, scale: float, lse, grad_out, grad_attn=None):
    """(grad_q, grad_k, grad_val); ``in_csr`` the (indptr, indices, eids) int64 triple, ``out_csr``
    the out-CSR's (indptr, indices, in-CSR position of each entry), ``grad_attn`` [E, H] (edge-id
    order) or None."""
    dt = q.dtype
    c = np.empty(lse.shape, dtype=dt)  # the row terms: written by the destination pass
    has_ga = grad_attn is not None
    ga = grad_attn if has_ga else np.empty((0, q.shape[1]), dtype=dt)
    sc = _scale(scale, dt)
    pd = np.empty((in_csr[1].shape[0], 2, q.shape[1]), dtype=dt)
    if dot_heads.covers(q.shape[1], q.shape[2], val.shape[2]):
        return dot_heads.backward(in_csr, out_csr, q, k, val, sc, lse, c, grad_out, ga, has_ga, pd)
    grad_q, grad_k, grad_val = np.empty(q.shape, dtype=dt), np.empty(k.shape, dtype=dt), np.empty(val.shape, dtype=dt)
    pick(_dot_bwd_dst_parallel, _dot_bwd_dst_serial)(*in_csr, q, k, val, sc, lse, c, grad_out, ga, has_ga, grad_q, pd)
    pd_out = np.take(pd, out_csr[2], axis=0)  # the out-CSR's order: the source pass reads it row after row
    pick(_dot_bwd_src_parallel, _dot_bwd_src_serial)(out_csr[0], out_csr[1], q, grad_out, pd_out, grad_k, grad_val)
    return grad_q, grad_k, grad_val
