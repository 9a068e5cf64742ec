"""Compiled twin of the batch of per-target induced subgraphs
(:func:`dgl_accel.core.sampling.shadow.induced_batch`): the entries of
:func:`dgl_accel.core.sampling.induced.induced_entries` for every set, in the same order, in one
pass (gather, filter and relabel fused, as :mod:`.induced` does for one set)."""
from __future__ import annotations

import numpy as np

from .runtime import njit

__all__ = ["induced_batch"]


@njit(cache=True)
def _induced_batch(indptr, indices, eids, nodes, offs, loc, sub_indptr, local, kept):
    """Set t: mark its nodes in ``loc`` (batch position + 1), keep each row's sources that are
    marked, unmark.  Returns the number of kept entries."""
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


def induced_batch(indptr: np.ndarray, indices: np.ndarray, eids: np.ndarray, nodes: np.ndarray, offs: np.ndarray):
    """(sub_indptr int64 [N + 1], local sources int64, parent edge ids int64) of the disjoint union
    of the sets' induced subgraphs; ``nodes`` int64 [N], ``offs`` int64 [T + 1]."""
    work = int(np.sum(indptr[nodes + 1] - indptr[nodes], dtype=np.int64)) if nodes.shape[0] else 0
    loc = np.zeros(indptr.shape[0] - 1, dtype=np.int64)
    sub_indptr = np.empty(nodes.shape[0] + 1, dtype=np.int64)
    local = np.empty(work, dtype=np.int64)
    kept = np.empty(work, dtype=np.int64)
    o = _induced_batch(indptr, indices, eids, nodes, offs, loc, sub_indptr, local, kept)
    return sub_indptr, local[:o], kept[:o]
