"""Compiled twin of the unweighted CPU node2vec walk (family ``walks``:
:mod:`dgl_accel.core.sampling.walks.node2vec`), step-major, Philox in registers."""
from __future__ import annotations

import numpy as np

from .runtime import M32, S32, njit, philox, pick, prange, twins

__all__ = ["node2vec"]


@njit(cache=True, inline="always")
def _has_edge(start, deg, indices, a, b):
    """Is a -> b an edge?  Binary search in a's row (rows are sorted)."""
    lo = start[a]
    hi = lo + deg[a]
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < b:
            lo = mid + 1
        else:
            hi = mid
    return lo < start[a] + deg[a] and indices[lo] == b


@njit(cache=True, inline="always")
def _next_edge(start, deg, indices, scale, alt, c, d, pv, pe, wid, blk, k0, k1, inv_c, thr_t, thr_lo, thr_hi,
               nb_accepts, test_nb, inv_p, inv_q, max_trials):
    """The CSR position of one walk's next edge from node ``c`` (degree ``d`` > 0), having come from
    ``pv`` over edge ``pe`` (``pv`` < 0: the first step): rejection trials, then the exact fallback.
    Inlined into the loop over walks; as a function of its own every value visibly belongs to one
    walk, and the early returns replace the loop's flags (the serial twin got 10-15% faster)."""
    two32 = np.int64(1) << 32
    if pv < 0:  # first-order first step: word 0 of block 0
        w0, w1, w2, w3 = philox(k0, k1, wid)
        return start[c] + np.int64((w0 * np.uint64(d)) >> S32)
    sc = scale[pe]
    # block 0 of this step drawn before the loop, later blocks at each even trial: the same words as
    # one draw per even trial (measured 0.29-0.31 s against 0.31-0.48 s serial for the plain form)
    w0, w1, w2, w3 = philox(k0, k1, wid | blk)
    for t in range(max_trials):
        if t % 2 == 0:
            if t > 0:
                w0, w1, w2, w3 = philox(k0, k1, wid | blk | (t >> 1))
            w, u = w0, w1
        else:
            w, u = w2, w3
        r = np.float64(w) * sc
        j = np.int64(r) if inv_c == 1.0 else np.int64(r * inv_c)
        cand = start[c] + j if j < d else alt[pe]
        x = indices[cand]
        is_t = x == pv
        if thr_t >= two32:
            acc = is_t or u < np.uint64(thr_lo)
        else:
            acc = (u < np.uint64(thr_t)) if is_t else (u < np.uint64(thr_lo))
        if test_nb and not is_t and u >= np.uint64(thr_lo) and (thr_hi >= two32 or u < np.uint64(thr_hi)):
            nb = _has_edge(start, deg, indices, pv, x)
            acc = nb if nb_accepts else not nb
        if acc:
            return cand
    # exact fallback: invert this walk's cdf of bias with one word
    st = start[c]
    tot = 0.0
    for k in range(d):
        x = indices[st + k]
        tot += inv_p if x == pv else (1.0 if _has_edge(start, deg, indices, pv, x) else inv_q)
    w0, w1, w2, w3 = philox(k0, k1, wid | blk | 4095)
    uu = np.float64(w0) / 4294967296.0
    cum = 0.0
    for k in range(d):
        x = indices[st + k]
        cum += inv_p if x == pv else (1.0 if _has_edge(start, deg, indices, pv, x) else inv_q)
        key = 1.0 if cum >= tot else cum / tot
        if key > uu:
            return st + k
    return st + d - 1


def _node2vec_impl(start, deg, indices, scale, alt, nodes, first_id, length, seed, inv_c, thr_t, thr_lo, thr_hi,
                   nb_accepts, test_nb, inv_p, inv_q, max_trials, traces, pos):
    """Unweighted node2vec walks with the rules and Philox counters of the CPU node2vec of
    :mod:`dgl_accel.core.sampling.walks.node2vec` (see there).  Step-major (all walks advance one
    step, then the next), not walk-major: consecutive walks are independent, so their cache misses
    overlap; one walk at a time serialises them and ran 1.5x slower than numpy.  Within a step the
    walks run in parallel (``prange``): each draws from its own Philox counters and writes its own
    slots, so the parallel and serial twins give the same walks (DGL's node2vec uses every core,
    and on a quiet 2-core machine the serial loop was only 1.06-1.42x DGL's)."""
    k0 = np.uint64(seed) & M32
    k1 = (np.uint64(seed) >> S32) & M32
    W = nodes.shape[0]
    cur = nodes.copy()
    prev = np.full(W, -1, dtype=np.int64)
    prev_e = np.full(W, -1, dtype=np.int64)
    for i in range(W):
        traces[0, i] = cur[i]
    for s in range(length):
        blk = np.int64(s) << 12
        for i in prange(W):
            c = cur[i]
            if c >= 0:
                d = deg[c]
                if d == 0:
                    cur[i] = -1  # dead end: the rest of the trace stays -1
                else:
                    e = _next_edge(start, deg, indices, scale, alt, c, d, prev[i], prev_e[i],
                                   np.int64(first_id + i) << 32, blk, k0, k1, inv_c, thr_t, thr_lo, thr_hi,
                                   nb_accepts, test_nb, inv_p, inv_q, max_trials)
                    nxt = indices[e]
                    traces[s + 1, i] = nxt
                    pos[s, i] = e
                    prev[i] = c
                    prev_e[i] = e
                    cur[i] = nxt


_node2vec_parallel, _node2vec_serial = twins(_node2vec_impl)


def node2vec(start, deg, indices, scale, alt, nodes, first_id: int, length: int, seed: int, env, max_trials: int):
    """Compiled twin of the unweighted CPU node2vec (``walks.node2vec.node2vec_chunk``): (traces [W, length+1],
    CSR positions [W, length]), int64, -1 after a dead end.  Identical to the numpy path except in
    the exact fallback (after ``max_trials`` rejections), where the cdf is summed per walk (as the
    Triton kernel does) rather than across the pending walks: the last bits can differ there."""
    W = nodes.shape[0]
    # step-major buffers (a step writes contiguous memory), transposed on return
    traces = np.full((length + 1, W), -1, dtype=np.int64)
    pos = np.full((length, W), -1, dtype=np.int64)
    f1 = np.zeros(1, dtype=np.float64)
    i1 = np.zeros(1, dtype=np.int64)
    walk = pick(_node2vec_parallel, _node2vec_serial)
    walk(start, deg, indices, f1 if scale is None else scale, i1 if alt is None else alt, nodes,
         np.int64(first_id), np.int64(length), np.uint64(seed), float(env.inv_c), np.int64(env.thr_t),
         np.int64(env.thr_lo), np.int64(env.thr_hi), bool(env.nb_accepts), bool(env.thr_hi > env.thr_lo),
         1.0 / env.p, 1.0 / env.q, np.int64(max_trials), traces, pos)
    return np.ascontiguousarray(traces.T), np.ascontiguousarray(pos.T)
