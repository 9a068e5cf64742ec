"""Compiled twins of the node-induced subgraph filters (:mod:`dgl_accel.core.sampling.induced.subgraph`):
the same entries in the same order as the numpy paths, gather, filter and relabel fused in one
pass."""
from __future__ import annotations

import numpy as np

from .runtime import njit

__all__ = ["induced_entries", "induced_symmetric", "induced_coo"]


@njit(cache=True)
def _induced(indptr, indices, data, nodes, loc, local, kept, sub_indptr):
    """Node-induced CSC: rows ``nodes`` of (indptr, indices), sources kept where ``loc`` (local
    id + 1, 0 = not chosen) is set; writes ``local``/``kept``/``sub_indptr``, returns the count."""
    k = nodes.shape[0]
    o = 0
    for i in range(k):
        sub_indptr[i] = o
        v = nodes[i]
        for e in range(indptr[v], indptr[v + 1]):
            # branch-free: always write, advance only for chosen sources (about a quarter of
            # the entries in a GraphSAINT subgraph: a branch would mispredict constantly)
            lv = loc[indices[e]]
            local[o] = lv - 1
            kept[o] = data[e]
            o += lv != 0
    sub_indptr[k] = o
    return o


@njit(cache=True)
def _induced_coo(indptr, indices, data, rows, loc, src, dst, kept):
    """``_induced``'s entries as a COO (source position, row position, data), int64, written in the
    same branch-free pass: no row pointer to expand afterwards, no widening copies."""
    o = 0
    for i in range(rows.shape[0]):
        v = rows[i]
        for e in range(indptr[v], indptr[v + 1]):
            lv = loc[indices[e]]
            src[o] = lv - 1
            dst[o] = i
            kept[o] = data[e]
            o += lv != 0
    return o


@njit(cache=True)
def _induced_symmetric(indptr, indices, eids, rev_eids, loop_eid, nodes, loc, src, dst, eid, reid):
    """COO of the subgraph of a symmetric simple graph from its ``src < dst`` half (see
    :class:`dgl_accel.core.sampling.induced.subgraph.HalfCSR`): kept half edges, their reverses, then
    self-loops.  Reverse ids come from ``rev_eids`` (aligned with the half CSR) into ``reid``:
    sequential reads, where a lookup by edge id would miss the cache on every kept edge."""
    k = nodes.shape[0]
    o = 0
    for i in range(k):
        v = nodes[i]
        for e in range(indptr[v], indptr[v + 1]):
            lv = loc[indices[e]]
            src[o] = lv - 1
            dst[o] = i
            eid[o] = eids[e]
            reid[o] = rev_eids[e]
            o += lv != 0
    for j in range(o):
        src[o + j] = dst[j]
        dst[o + j] = src[j]
        eid[o + j] = reid[j]
    t = 2 * o
    if loop_eid.shape[0]:
        for i in range(k):
            le = loop_eid[nodes[i]]
            if le >= 0:
                src[t] = i
                dst[t] = i
                eid[t] = le
                t += 1
    return t


def induced_symmetric(half, nodes, loc, work: int, np_idt):
    """Compiled twin of :func:`dgl_accel.core.sampling.induced.subgraph.induced_symmetric_coo`: (src, dst) in
    ``np_idt`` and int64 parent edge ids, in the same order."""
    size = 2 * work + nodes.shape[0]
    src = np.empty(size, dtype=np_idt)
    dst = np.empty(size, dtype=np_idt)
    eid = np.empty(size, dtype=np.int64)
    loops = half.loop_eid if half.loop_eid is not None else np.empty(0, dtype=np.int64)
    reid = np.empty(work, dtype=np.int64)
    t = _induced_symmetric(half.indptr, half.indices, half.eids, half.rev_eids, loops, nodes, loc, src, dst, eid,
                           reid)
    return src[:t], dst[:t], eid[:t]


def induced_entries(indptr, indices, data, nodes, loc, local_buf, kept_buf):
    """Compiled twin of the filter in :func:`dgl_accel.core.sampling.induced.subgraph.induced_entries` (same
    entries in the same order): ``loc`` marks the chosen nodes, the buffers hold every gathered
    entry.  Returns (int64 sub_indptr, int32 local ids, kept data) as fresh arrays."""
    sub_indptr = np.empty(nodes.shape[0] + 1, dtype=np.int64)
    o = _induced(indptr, indices, data, nodes, loc, local_buf, kept_buf, sub_indptr)
    return sub_indptr, local_buf[:o].copy(), kept_buf[:o].copy()


def induced_coo(indptr, indices, data, rows, loc, work: int):
    """Compiled twin of :func:`dgl_accel.core.sampling.induced.subgraph.induced_between` (same entries in
    the same order): ``loc`` marks the sources, ``work`` is the rows' gathered entries.  Returns int64
    (source positions, row positions, kept data); views of ``work``-sized arrays unless under half is kept."""
    src, dst, kept = (np.empty(work, dtype=np.int64) for _ in range(3))
    o = _induced_coo(indptr, indices, data, rows, loc, src, dst, kept)
    if 2 * o < work:  # do not hold on to mostly unused memory
        return src[:o].copy(), dst[:o].copy(), kept[:o].copy()
    return src[:o], dst[:o], kept[:o]
