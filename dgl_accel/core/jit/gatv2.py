"""Compiled CPU loops of the fused GATv2 attention (:mod:`dgl_accel.core.attention.gatv2`) on numpy
arrays (float32 or float64; the caller converts half types to float32 and back).

For destination v, head h and in-edge e = (u -> v): z_e = fs[u, h] + fd[v, h],
s_e = sum_d attn[h, d] leaky(z_e[d]), p_e its softmax over v's in-edges, out[v, h] = sum_e p_e fs[u, h].

* forward, ``prange`` over destinations (in-CSR rows): the row's scores and their max per head in a
  buffer of max-degree x H, then exp and the weighted sum of source rows, ``lse[v] = m + log(l)``;
* backward, with t_e = <grad_out[v], fs[u]> (+ grad_attn_e), c[v, h] = sum over v's in-edges of
  p_e t_e and ds_e = p_e (t_e - c[v]): a pass over destinations sweeps v's edges twice, first summing
  c[v] into the c array (in the arrays' dtype, from p_e recomputed from lse), then writing
  grad_fd[v] = sum_e ds_e attn leaky'(z_e) and each task's share of grad_attn = sum_e ds_e leaky(z_e)
  (one H x D partial per task, summed after); a pass over sources (out-CSR rows) writes
  grad_fs[u] = sum_e p_e grad_out[v] + ds_e attn leaky'(z_e).  p_e and ds_e are kept per edge and
  head between the passes (an E x 2 x H scratch array, written in the in-CSR's order and permuted to
  the out-CSR's for the source pass, as :mod:`.dot` does): one score, exp and t_e per edge and head
  instead of three.  Each output row is written by the one task owning it (no atomics).
"""
from __future__ import annotations

import math

import numpy as np

from .attention_common import (
    CHUNKS,
    REASSOC,
    grad_term,
    max_degree,
    softmax_accumulate,
    softmax_buffers,
    softmax_exp,
    softmax_reset,
    softmax_store,
)
from .row_ranges import bounds_of
from .runtime import njit, pick, prange, twins

__all__ = ["gatv2_forward", "gatv2_attention", "gatv2_backward"]


@njit(cache=True, fastmath=REASSOC)
def _score(fs, fd, attn, u, v, h, sl):
    z = fs[u, h, 0] + fd[v, h, 0]
    s = attn[h, 0] * (z if z > 0 else z * sl)  # the first term: sums stay in the arrays' dtype
    for d in range(1, fs.shape[2]):
        z = fs[u, h, d] + fd[v, h, d]
        s += attn[h, d] * (z if z > 0 else z * sl)
    return s


def _gatv2_fwd_impl(indptr, indices, fs, fd, attn, slope, out, lse, max_deg):
    H = fs.shape[1]
    bounds = bounds_of(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        m, lsum, acc, sbuf = softmax_buffers(out, max_deg)
        for v in range(bounds[ch], bounds[ch + 1]):
            start = indptr[v]
            n = indptr[v + 1] - start
            softmax_reset(m, lsum, acc)
            for j in range(n):
                u = indices[start + j]
                for h in range(H):
                    s = _score(fs, fd, attn, u, v, h, sl)
                    sbuf[j, h] = s
                    m[h] = max(m[h], s)
            softmax_exp(sbuf, m, lsum, n)
            softmax_accumulate(acc, sbuf, indices, start, n, fs)
            softmax_store(out, lse, v, m, lsum, acc)


_gatv2_fwd_parallel, _gatv2_fwd_serial = twins(_gatv2_fwd_impl, fastmath=REASSOC, noalias=True)


def _gatv2_attention_impl(indptr, indices, eids, fs, fd, attn, slope, lse, a):
    H = fs.shape[1]
    bounds = bounds_of(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        for v in range(bounds[ch], bounds[ch + 1]):
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                for h in range(H):
                    a[eids[j], h] = math.exp(_score(fs, fd, attn, u, v, h, sl) - lse[v, h])


_gatv2_attention_parallel, _gatv2_attention_serial = twins(_gatv2_attention_impl, fastmath=REASSOC, noalias=True)


def _gatv2_bwd_dst_impl(indptr, indices, eids, fs, fd, attn, slope, lse, c, grad_out, ga, has_ga, grad_fd,
                        grad_attn_parts, pd):
    """c[v], grad_fd[v] and the task's share of grad_attn; per in-CSR position j, pd[j, 0] = p_e and
    pd[j, 1] = ds_e (t_e kept there in between) for the source pass; ``grad_attn`` read by edge id."""
    H = fs.shape[1]
    D = fs.shape[2]
    bounds = bounds_of(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        gw = grad_attn_parts[ch]
        den = np.empty(H, dtype=c.dtype)
        for h in range(H):
            for d in range(D):
                gw[h, d] = 0
        for v in range(bounds[ch], bounds[ch + 1]):
            grad_fd[v] = 0
            c[v] = 0
            den[:] = 0
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                for h in range(H):
                    t = grad_term(grad_out, v, fs, u, h, ga, has_ga, eids[j])
                    p = math.exp(_score(fs, fd, attn, u, v, h, sl) - lse[v, h])
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
                    ds = pd[j, 0, h] * (pd[j, 1, h] - c[v, h])
                    pd[j, 1, h] = ds
                    for d in range(D):
                        z = fs[u, h, d] + fd[v, h, d]
                        if z > 0:
                            grad_fd[v, h, d] += ds * attn[h, d]
                            gw[h, d] += ds * z
                        else:
                            grad_fd[v, h, d] += ds * sl * attn[h, d]
                            gw[h, d] += ds * sl * z


_gatv2_bwd_dst_parallel, _gatv2_bwd_dst_serial = twins(_gatv2_bwd_dst_impl, fastmath=REASSOC, noalias=True)


def _gatv2_bwd_src_impl(indptr, indices, fs, fd, attn, slope, grad_out, grad_fs, pd):
    """grad_fs[u] from the destination pass's p_e and ds_e permuted to the out-CSR's order (``pd[j]``
    position j's): no exp, no score."""
    H = fs.shape[1]
    D = fs.shape[2]
    bounds = bounds_of(indptr, CHUNKS)
    sl = slope[0]
    for ch in prange(CHUNKS):
        for u in range(bounds[ch], bounds[ch + 1]):
            grad_fs[u] = 0
            for j in range(indptr[u], indptr[u + 1]):
                v = indices[j]
                for h in range(H):
                    p = pd[j, 0, h]
                    ds = pd[j, 1, h]
                    for d in range(D):
                        z = fs[u, h, d] + fd[v, h, d]
                        g = ds * attn[h, d]
                        grad_fs[u, h, d] += p * grad_out[v, h, d] + (g if z > 0 else g * sl)


_gatv2_bwd_src_parallel, _gatv2_bwd_src_serial = twins(_gatv2_bwd_src_impl, fastmath=REASSOC, noalias=True)


# ------------------------------------------------------------------ entry points (numpy in, numpy out)
def _slope(slope: float, dtype) -> np.ndarray:
    return np.array([slope], dtype=dtype)  # keeps float32 sums in float32


def gatv2_forward(indptr, indices, fs, fd, attn, slope: float):
    """(out [num_dst, H, D], lse [num_dst, H]) over the in-CSR (``indptr``, ``indices`` int64);
    ``fs`` [num_src, H, D], ``fd`` [num_dst, H, D], ``attn`` [H, D], one float dtype, C-contiguous."""
    num_dst = indptr.shape[0] - 1
    out = np.empty((num_dst,) + fs.shape[1:], dtype=fs.dtype)
    lse = np.empty((num_dst, fs.shape[1]), dtype=fs.dtype)
    pick(_gatv2_fwd_parallel, _gatv2_fwd_serial)(indptr, indices, fs, fd, attn, _slope(slope, fs.dtype), out, lse,
                                                 np.int64(max_degree(indptr)))
    return out, lse


def gatv2_attention(indptr, indices, eids, fs, fd, attn, slope: float, lse):
    """The attention [E, H] in edge-id order, recomputed from ``lse`` over the in-CSR."""
    a = np.empty((indices.shape[0], fs.shape[1]), dtype=fs.dtype)
    pick(_gatv2_attention_parallel, _gatv2_attention_serial)(indptr, indices, eids, fs, fd, attn,
                                                             _slope(slope, fs.dtype), lse, a)
    return a


def gatv2_backward(in_csr, out_csr, fs, fd, attn, slope: float, lse, grad_out, grad_attn=None):
    """(grad_fs, grad_fd, grad_attn_vector [H, D]); ``in_csr`` the (indptr, indices, eids) int64
    triple, ``out_csr`` the out-CSR's (indptr, indices, in-CSR position of each entry), ``grad_attn``
    [E, H] (edge-id order) or None."""
    dt = fs.dtype
    c = np.empty(lse.shape, dtype=dt)  # the row terms: written by the destination pass
    has_ga = grad_attn is not None
    ga = grad_attn if has_ga else np.empty((0, fs.shape[1]), dtype=dt)
    sl = _slope(slope, dt)
    grad_fs, grad_fd = np.empty(fs.shape, dtype=dt), np.empty(fd.shape, dtype=dt)
    parts = np.empty((CHUNKS,) + attn.shape, dtype=dt)
    pd = np.empty((in_csr[1].shape[0], 2, fs.shape[1]), dtype=dt)  # p_e, ds_e (in the in-CSR's order)
    pick(_gatv2_bwd_dst_parallel, _gatv2_bwd_dst_serial)(*in_csr, fs, fd, attn, sl, lse, c, grad_out, ga, has_ga,
                                                         grad_fd, parts, pd)
    pick(_gatv2_bwd_src_parallel, _gatv2_bwd_src_serial)(out_csr[0], out_csr[1], fs, fd, attn, sl, grad_out, grad_fs,
                                                         np.take(pd, out_csr[2], axis=0))
    return grad_fs, grad_fd, parts.sum(axis=0)
