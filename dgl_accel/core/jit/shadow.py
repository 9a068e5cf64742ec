"""Compiled twin of the batch of per-target induced subgraphs
(:func:`dgl_accel.core.sampling.shadow.scope.induced_batch`): the entries of
:func:`dgl_accel.core.sampling.induced.subgraph.induced_entries` for every set, in the same order, gather,
filter and relabel fused in one pass as :mod:`.induced` does for one set.

Serial: a parallel twin (chunks of sets, each row filtered into slots reserved at the scan of the
degrees, then packed) measured slower on 512 k-hop scopes of fb100_Cornell5 (2M gathered entries:
45 + 19 ms against 33 ms on the shared 2-core machine): the reserved slots double the memory
traffic of a pass that is bound by it.  A branch-free filter (always write, advance on a kept
source) measured the same (40 vs 38 ms on 4.2M entries): few entries are kept, so the branch
predicts well.  Symmetric simple graphs filter half the entries (:func:`induced_batch_symmetric`).

:func:`khop_sets`: the per-target k-hop sets of :func:`dgl_accel.core.sampling.shadow.scope.khop_node_sets`
(its numpy path draws with the neighbour choice of ``choice.py``; the same Philox words and Floyd
rule here, in registers), parallel over chunks of targets.
"""
from __future__ import annotations

import numpy as np

from .runtime import M32, S32, njit, philox, pick, prange, twins

__all__ = ["induced_batch", "induced_batch_symmetric", "khop_sets"]


@njit(cache=True)
def _induced_batch(indptr, indices, eids, nodes, offs, loc, sub_indptr, local, kept):
    """Set t: mark its nodes in ``loc`` (batch position + 1), keep each row's marked sources,
    unmark.  Returns the number of kept entries."""
    o = 0
    for t in range(offs.shape[0] - 1):
        a, b = offs[t], offs[t + 1]
        for i in range(a, b):
            loc[nodes[i]] = i + 1
        for i in range(a, b):
            sub_indptr[i] = o
            v = nodes[i]
            for e in range(indptr[v], indptr[v + 1]):
                lv = loc[indices[e]]
                if lv != 0:
                    local[o] = lv - 1
                    kept[o] = eids[e]
                    o += 1
        for i in range(a, b):
            loc[nodes[i]] = 0
    sub_indptr[nodes.shape[0]] = o
    return o


@njit(cache=True)
def _induced_batch_symmetric(indptr, indices, eids, rev_eids, loop_eid, nodes, offs, loc, src, dst, eid, reid,
                             ecount):
    """Per set, the layout of :func:`.induced.induced_symmetric`: kept ``src < dst`` half edges
    (by destination, CSR order), their reverses, then the set's self-loops; ``ecount[t]``: the
    set's edge count.  Returns the total."""
    o = 0
    for t in range(offs.shape[0] - 1):
        a, b = offs[t], offs[t + 1]
        for i in range(a, b):
            loc[nodes[i]] = i + 1
        start = o
        for i in range(a, b):
            v = nodes[i]
            for e in range(indptr[v], indptr[v + 1]):
                lv = loc[indices[e]]
                if lv != 0:
                    src[o] = lv - 1
                    dst[o] = i
                    eid[o] = eids[e]
                    reid[o] = rev_eids[e]
                    o += 1
        h = o - start
        for j in range(h):
            src[o + j] = dst[start + j]
            dst[o + j] = src[start + j]
            eid[o + j] = reid[start + j]
        o += h
        if loop_eid.shape[0]:
            for i in range(a, b):
                le = loop_eid[nodes[i]]
                if le >= 0:
                    src[o] = i
                    dst[o] = i
                    eid[o] = le
                    o += 1
        ecount[t] = o - start
        for i in range(a, b):
            loc[nodes[i]] = 0
    return o


def induced_batch(indptr: np.ndarray, indices: np.ndarray, eids: np.ndarray, nodes: np.ndarray, offs: np.ndarray):
    """(sub_indptr int64 [N + 1], local sources int64, parent edge ids int64) of the disjoint union
    of the sets' induced subgraphs; ``nodes`` int64 [N], ``offs`` int64 [T + 1]."""
    work = int(np.sum(indptr[nodes + 1] - indptr[nodes], dtype=np.int64)) if nodes.shape[0] else 0
    # batch positions + 1 fit int32 unless the batch has 2^31 nodes
    loc = np.zeros(indptr.shape[0] - 1, dtype=np.int32 if nodes.shape[0] < 2**31 - 1 else np.int64)
    sub_indptr = np.empty(nodes.shape[0] + 1, dtype=np.int64)
    local = np.empty(work, dtype=np.int64)
    kept = np.empty(work, dtype=np.int64)
    o = _induced_batch(indptr, indices, eids, nodes, offs, loc, sub_indptr, local, kept)
    return sub_indptr, local[:o].copy(), kept[:o].copy()


def induced_batch_symmetric(half, nodes: np.ndarray, offs: np.ndarray):
    """(src, dst, parent edge ids, edges per set), int64, of the sets' induced subgraphs in a
    symmetric simple graph from its :class:`~dgl_accel.core.sampling.induced.subgraph.HalfCSR` ``half``."""
    work = int(np.sum(half.indptr[nodes + 1] - half.indptr[nodes], dtype=np.int64)) if nodes.shape[0] else 0
    size = 2 * work + nodes.shape[0]
    loc = np.zeros(half.num_nodes, dtype=np.int32 if nodes.shape[0] < 2**31 - 1 else np.int64)
    src, dst, eid = (np.empty(size, dtype=np.int64) for _ in range(3))
    reid = np.empty(size, dtype=np.int64)
    ecount = np.zeros(offs.shape[0] - 1, dtype=np.int64)
    loops = half.loop_eid if half.loop_eid is not None else np.empty(0, dtype=np.int64)
    o = _induced_batch_symmetric(half.indptr, half.indices, half.eids, half.rev_eids, loops, nodes, offs, loc, src,
                                 dst, eid, reid, ecount)
    return src[:o], dst[:o], eid[:o], ecount


def _khop_impl(indptr, indices, targets, fanouts, replace, seed, n, bounds, out, counts):
    """Target t: hop k draws fanouts[k] positions of every node first reached at hop k - 1
    (counter id (t * L + k) * n + v, the rules of ``_uniform_choice_impl`` in :mod:`.neighbor`),
    new nodes join; row t of ``out`` gets the set in increasing id, ``counts[t]`` its size."""
    k0 = np.uint64(seed) & M32
    k1 = (np.uint64(seed) >> S32) & M32
    L = fanouts.shape[0]
    cap = out.shape[1]
    fmax = 1
    for k in range(L):
        fmax = max(fmax, fanouts[k])
    for c in prange(bounds.shape[0] - 1):
        mark = np.zeros(n, dtype=np.bool_)
        members = np.empty(cap, dtype=np.int64)
        front = np.empty(cap, dtype=np.int64)
        nxt = np.empty(cap, dtype=np.int64)
        chosen = np.empty(fmax, dtype=np.int64)
        for t in range(bounds[c], bounds[c + 1]):
            s = targets[t]
            mark[s] = True
            members[0] = s
            m = 1
            front[0] = s
            nf = 1
            for k in range(L):
                f = fanouts[k]
                W = (f + 3) // 4
                nn = 0
                for i in range(nf):
                    v = front[i]
                    start = indptr[v]
                    d = indptr[v + 1] - start
                    if d == 0:
                        continue
                    if not replace and d <= f:
                        take = d
                        for j in range(d):
                            chosen[j] = j
                    else:
                        take = f
                        base = ((s * L + k) * n + v) * W
                        for w in range(W):
                            r = philox(k0, k1, base + w)
                            for q in range(min(4, f - 4 * w)):
                                j = 4 * w + q
                                if replace:
                                    chosen[j] = np.int64(r[q] % np.uint64(d))
                                else:  # Floyd: slot j draws in [0, d - f + j]; a repeat takes d - f + j
                                    mj = d - f + j
                                    x = np.int64(r[q] % np.uint64(mj + 1))
                                    for p in range(j):
                                        if chosen[p] == x:
                                            x = mj
                                            break
                                    chosen[j] = x
                    for j in range(take):
                        u = indices[start + chosen[j]]
                        if not mark[u]:
                            mark[u] = True
                            nxt[nn] = u
                            nn += 1
                for i in range(nn):
                    members[m + i] = nxt[i]
                m += nn
                front, nxt = nxt, front
                nf = nn
            srt = np.sort(members[:m])
            for i in range(m):
                out[t, i] = srt[i]
                mark[srt[i]] = False
            counts[t] = m


_khop_parallel, _khop_serial = twins(_khop_impl)


def khop_sets(indptr: np.ndarray, indices: np.ndarray, targets: np.ndarray, fanouts: list, replace: bool, seed: int,
              chunks: int):
    """Compiled twin of the numpy path of ``khop_node_sets`` (fanouts >= 0): (nodes int64 [T, cap]
    -1 padded, counts int64 [T]), row t's set in increasing id; cap = min(n, 1 + sum of the
    fanout products), the largest a set can be."""
    n = indptr.shape[0] - 1
    cap, width = 1, 1
    for f in fanouts:
        width *= f
        cap += width
        if cap >= n:
            break
    cap = max(1, min(cap, n))
    T = targets.shape[0]
    out = np.full((T, cap), -1, dtype=np.int64)
    counts = np.zeros(T, dtype=np.int64)
    chunks = max(1, min(chunks, T))
    bounds = np.linspace(0, T, chunks + 1).astype(np.int64)
    pick(_khop_parallel, _khop_serial)(indptr, indices, targets, np.asarray(fanouts, dtype=np.int64), bool(replace),
                                       np.uint64(seed), np.int64(n), bounds, out, counts)
    return out, counts
