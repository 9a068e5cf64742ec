"""Compiled twins of the neighbour family (``kernels/sampling.py``): the uniform neighbour choice
of :mod:`dgl_accel.core.sampling.neighbor.choice` and the block relabelling of
:func:`dgl_accel.core.sampling.neighbor.sample.relabel_block`, bit-identical to their numpy paths.

Why: the numpy choice runs ~100 array passes per layer (Philox rounds, Floyd's slots, padding and
gathers) over arrays of a few thousand transits, so it is bound by per-call overhead, and numpy
cannot use the second core (threads measured slower: the GIL is taken between every array op).
DGL's C++ sampler runs one loop per transit on all cores; these loops do the same: one pass per
transit, Philox evaluated in registers, ``prange`` over transits.
"""
from __future__ import annotations

import numpy as np

from .runtime import M32, S32, njit, philox, pick, prange, twins

__all__ = ["uniform_choice_flat", "relabel", "relabel_typed", "gather_pairs"]


def _uniform_choice_impl(indptr, v, offs, fanout, seed, step, num_nodes, replace, out):
    """Fill ``out[offs[i]:offs[i+1]]`` with transit i's chosen CSR positions in slot order."""
    k0 = np.uint64(seed) & M32
    k1 = (np.uint64(seed) >> S32) & M32
    W = (fanout + 3) // 4
    for i in prange(v.shape[0]):
        vi = v[i]
        start = indptr[vi]
        d = indptr[vi + 1] - start
        o = offs[i]
        if fanout == -1 or (not replace and d <= fanout):
            for j in range(offs[i + 1] - o):
                out[o + j] = start + j
            continue
        if d == 0:
            continue
        base = (step * num_nodes + vi) * W
        if replace:
            for w in range(W):
                r = philox(k0, k1, base + w)
                for q in range(min(4, fanout - 4 * w)):
                    out[o + 4 * w + q] = start + np.int64(r[q] % np.uint64(d))
        else:
            # Floyd: slot j draws t in [0, m_j], m_j = d - fanout + j; a repeat of an earlier
            # slot's value takes m_j instead (m_j exceeds every earlier value).
            for w in range(W):
                r = philox(k0, k1, base + w)
                for q in range(min(4, fanout - 4 * w)):
                    j = 4 * w + q
                    m = d - fanout + j
                    t = np.int64(r[q] % np.uint64(m + 1))
                    for p in range(j):
                        if out[o + p] == start + t:
                            t = m
                            break
                    out[o + j] = start + t


def _gather_pairs_impl(pairs, flat, src, eid):
    """(source id, edge id) of the packed int64 pairs at positions ``flat``: one pass instead of a
    gather and two unpacking passes (low 32 bits: source id, high: edge id, both >= 0)."""
    for i in prange(flat.shape[0]):
        v = pairs[flat[i]]
        src[i] = v & 0xFFFFFFFF
        eid[i] = v >> 32


# Parallel over transits / entries (each writes its own slots, so the twins are bit-identical), as
# DGL's C++ sampler runs on every core; the serial twins in DataLoader worker processes.  (The
# relabelling stays serial: its parallel twin measured slower on blocks of this size.)
_uniform_choice_parallel, _uniform_choice_serial = twins(_uniform_choice_impl)
_gather_pairs_parallel, _gather_pairs_serial = twins(_gather_pairs_impl)


@njit(cache=True)
def _relabel(src, dst, n, mark, mapping):
    """Block relabelling (dst ids -> 0..T-1, other sources -> T.. in increasing id) with the
    scratch arrays ``mark`` (bool [n], all False on entry and on exit) and ``mapping``.
    The marking loop races only on writing the same value, which is benign."""
    T = dst.shape[0]
    for i in prange(src.shape[0]):
        mark[src[i]] = True
    for i in range(T):
        mark[dst[i]] = False
        mapping[dst[i]] = i
    new = np.nonzero(mark)[0]
    for k in prange(new.shape[0]):
        mapping[new[k]] = T + k
        mark[new[k]] = False
    local = np.empty(src.shape[0], dtype=np.int64)
    for i in prange(src.shape[0]):
        local[i] = mapping[src[i]]
    return new.astype(np.int64), local


@njit(cache=True)
def _relabel_typed(src, dst, dst_bounds, type_bounds, mark, mapping):
    """:func:`_relabel` for several node types in one pass over one global id space (type t owns
    ids ``type_bounds[t]:type_bounds[t+1]``): per type, its dst ids (``dst[dst_bounds[t]:
    dst_bounds[t+1]]``) -> 0..T_t-1, its other sources -> T_t.. in increasing id."""
    for i in range(src.shape[0]):
        mark[src[i]] = True
    K = type_bounds.shape[0] - 1
    for t in range(K):
        for i in range(dst_bounds[t], dst_bounds[t + 1]):
            mark[dst[i]] = False
            mapping[dst[i]] = i - dst_bounds[t]
    new = np.nonzero(mark)[0].astype(np.int64)  # increasing global ids: grouped by type
    new_bounds = np.searchsorted(new, type_bounds)
    for t in range(K):
        first = new_bounds[t] - (dst_bounds[t + 1] - dst_bounds[t])
        for k in range(new_bounds[t], new_bounds[t + 1]):
            mapping[new[k]] = k - first
            mark[new[k]] = False
    local = np.empty(src.shape[0], dtype=np.int64)
    for i in range(src.shape[0]):
        local[i] = mapping[src[i]]
    return new, new_bounds.astype(np.int64), local


def uniform_choice_flat(indptr: np.ndarray, v: np.ndarray, fanout: int, seed: int, step: int,
                        num_nodes: int, replace: bool, counts: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Compiled twin of :func:`dgl_accel.core.sampling.neighbor.choice.uniform_choice_flat` (counts and their
    exclusive scan ``offs`` computed by the caller): the positions, int64 [offs[-1]]."""
    out = np.empty(int(offs[-1]), dtype=np.int64)
    choose = pick(_uniform_choice_parallel, _uniform_choice_serial)
    choose(indptr, v, offs, np.int64(fanout), np.uint64(seed), np.int64(step), np.int64(num_nodes), bool(replace), out)
    return out


def relabel(src: np.ndarray, dst: np.ndarray, n: int):
    """(new source ids in increasing order, local ids of ``src``), as the numpy path of
    :func:`dgl_accel.core.sampling.neighbor.sample.relabel_block`."""
    mark = np.zeros(n, dtype=np.bool_)
    mapping = np.empty(n, dtype=np.int64)
    return _relabel(src, dst, n, mark, mapping)


def relabel_typed(src: np.ndarray, dst: np.ndarray, dst_bounds: np.ndarray, type_bounds: np.ndarray):
    """(new sources as global ids in increasing order, their bounds per type, local ids of ``src``)
    of :func:`_relabel_typed`; every argument int64."""
    n = int(type_bounds[-1])
    return _relabel_typed(src, dst, dst_bounds, type_bounds, np.zeros(n, dtype=np.bool_), np.empty(n, dtype=np.int64))


def gather_pairs(pairs: np.ndarray, flat: np.ndarray):
    """Compiled twin of ``unpack_pairs(np.take(pairs, flat))`` for int64-packed pairs."""
    src = np.empty(flat.shape[0], dtype=np.int64)
    eid = np.empty(flat.shape[0], dtype=np.int64)
    pick(_gather_pairs_parallel, _gather_pairs_serial)(pairs, flat, src, eid)
    return src, eid
