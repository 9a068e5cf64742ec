"""Node-induced subgraphs (GraphSAINT's subgraph construction) from a cached in-CSR with
vectorised numpy: the DGL-free maths of ``dgl_accel.sampling.induced`` (which builds the DGL
subgraph), with the compiled twins in :mod:`dgl_accel.core.jit.induced`.

``g.subgraph(nodes)`` in DGL walks the graph in C++ and then rebuilds a graph object with
validation and a fresh metagraph.  Here the in-edges of the (sorted, unique) node set are gathered
row by row from the cached CSC of the parent (scipy's compiled ``csr_row_index`` copies the rows
in one pass), sources outside the set are dropped through a boolean membership map, and the kept
entries already form the CSC of the subgraph, which DGL's unit-graph constructor takes as is.

Layout of the result (same contract as ``dgl.node_subgraph``): node ``i`` of the subgraph is
``nodes[i]`` (``ndata[dgl.NID]``), every edge of the parent between two chosen nodes appears once
(``edata[dgl.EID]`` = parent edge id).  Edges are numbered grouped by destination (DGL numbers them
in parent-id order); only the numbering differs, the edge set is the same.

Cost is dominated by the filter (numpy's nonzero over a random mask, ~1.7 ns an entry here), so
large node sets are split into row slices run on several threads (:func:`num_threads`), and
symmetric simple graphs filter only half the entries (:class:`HalfCSR`, below).

Symmetric simple graphs: every edge u -> v (u != v) has exactly one reverse v -> u, so the
induced subgraph is determined by its edges with ``src < dst``.  Gathering and filtering only
those (half the CSR entries: the filter is the expensive pass) and adding the reverses from a
precomputed reverse-edge map halves the work.  The result is a COO: the ``src < dst`` edges
grouped by destination, then their reverses in the same order, then the self-loops of the chosen
nodes (:func:`induced_symmetric_coo`).

>>> csr = InCSR(np.array([0, 1, 2, 3]), np.array([1, 2, 0]), np.array([0, 1, 2]), 3)   # 1->0, 2->1, 0->2
>>> sub_indptr, local_src, eids = induced_entries(csr.indptr, csr.indices, csr.eids, np.array([0, 1]), 3)
>>> sub_indptr.tolist(), local_src.tolist(), eids.tolist()       # only 1 -> 0 has both ends chosen
([0, 1, 1], [1], [0])
"""
from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

try:  # scipy's compiled row gather; private module, so fall back to numpy if it moves
    from scipy.sparse._sparsetools import csr_row_index as _csr_row_index
except ImportError:  # pragma: no cover
    _csr_row_index = None

from ...csr import Structure
from ...jit import induced as jit_induced
from ...jit import runtime
from ...scratch import array as scratch_array

__all__ = ["InCSR", "induced_entries", "induced_between", "marked", "num_threads", "HalfCSR", "half_csr",
           "induced_symmetric_coo"]

_POOL_LOCK = threading.Lock()
_LOCAL = threading.local()


@dataclass(frozen=True, eq=False)
class InCSR:
    """In-edges of the parent grouped by destination, as numpy arrays on the CPU.

    ``indptr`` / ``indices`` / ``eids`` share one integer dtype: int32 when every value fits
    (half the memory traffic of the gathers below), else int64."""

    indptr: np.ndarray   # [n + 1]
    indices: np.ndarray  # [E] source of each CSR position
    eids: np.ndarray     # [E] parent edge id of each CSR position
    num_nodes: int

    def positions(self) -> np.ndarray:
        """``arange(E)`` in the index dtype: pass as ``data`` to get CSR positions back."""
        return np.arange(self.indices.shape[0], dtype=self.indptr.dtype)

    @classmethod
    def from_structure(cls, c: Structure) -> InCSR:
        """The CPU numpy copy of a graph's in-CSR view (``in_csr(g)``)."""
        n, E = int(c.num_rows), int(c.indices.numel())
        dt = np.int32 if max(n, E) < 2**31 - 1 else np.int64
        host = [np.ascontiguousarray(t.detach().cpu().numpy(), dtype=dt) for t in (c.indptr, c.indices, c.eids)]
        return cls(*host, n)


def _gather_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, nodes: np.ndarray):
    """(int64 row pointer into the gathered arrays, sources, data) of the CSR rows ``nodes``."""
    nodes = nodes.astype(indptr.dtype, copy=False)
    start = indptr[nodes]
    deg = indptr[nodes + 1] - start
    rp = np.zeros(nodes.shape[0] + 1, dtype=np.int64)
    np.cumsum(deg, out=rp[1:])
    total = int(rp[-1])
    if _csr_row_index is not None:
        src = scratch_array("induced.src", total, indices.dtype)
        out = scratch_array("induced.dat", total, data.dtype)
        _csr_row_index(nodes.shape[0], nodes, indptr, indices, data, src, out)
        return rp, src, out
    # numpy fallback: position of every gathered entry = row start + rank inside the row
    posn = np.repeat(start - rp[:-1], deg) + np.arange(total, dtype=np.int64)  # pragma: no cover
    return rp, indices[posn], data[posn]  # pragma: no cover


def _induce_part(indptr, indices, data, nodes, loc):
    """One slice of destination rows: (sub_indptr from 0, local src ids, kept data)."""
    rp, src, dat = _gather_rows(indptr, indices, data, nodes)
    lv = np.take(loc, src, out=scratch_array("induced.lv", src.shape[0], loc.dtype))
    # numpy's nonzero is several times faster on bool than on int32
    keep = np.flatnonzero(np.not_equal(lv, 0, out=scratch_array("induced.mask", src.shape[0], np.bool_)))
    sub_indptr = np.searchsorted(keep, rp)  # kept entries before each row start
    local = np.take(lv, keep)
    local -= 1
    return sub_indptr, local, np.take(dat, keep)


# Work (gathered CSR entries) per extra thread below which one thread is faster: a hand-off to the
# pool costs ~50 us, a 100k-entry slice ~0.4 ms; measured next to DGL (whose OpenMP threads spin
# after each call) smaller slices gained nothing.
MIN_PARALLEL_WORK = 100_000
_POOL: ThreadPoolExecutor | None = None
_POOL_KEY = None


def _pool(workers: int) -> ThreadPoolExecutor:
    """A process-wide pool, recreated after fork (a forked child does not inherit the threads)."""
    global _POOL, _POOL_KEY
    key = (os.getpid(), workers)
    with _POOL_LOCK:
        if _POOL is None or _POOL_KEY != key:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dgl_accel_induced")
            _POOL_KEY = key
        return _POOL


def num_threads(work: int) -> int:
    """Threads for ``work`` gathered entries: torch's intra-op thread count (the user's setting,
    1 inside DataLoader workers), at most one per MIN_PARALLEL_WORK entries."""
    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1, work // MIN_PARALLEL_WORK))


def induced_entries(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, nodes: np.ndarray,
                    num_nodes: int, threads: int | None = None):
    """CSC of the subgraph induced by ``nodes`` (sorted unique ints) in the CSC ``(indptr, indices)``.

    Returns ``(sub_indptr, local_src, kept_data)``: destination ``i`` (= ``nodes[i]``) has in-edges
    from local sources ``local_src[sub_indptr[i]:sub_indptr[i+1]]`` (int64 indptr, int32 local ids);
    ``kept_data`` is ``data`` at those entries (edge ids, or CSR positions with ``data = positions()``).

    Large inputs are split into row slices of equal work run on ``threads`` threads (default
    :func:`num_threads`): numpy and scipy release the GIL inside these array passes, so the
    slices run in parallel (1.9x measured with two idle cores).
    """
    nodes = nodes.astype(indptr.dtype, copy=False)
    with marked(nodes, num_nodes) as loc:
        return _induce(indptr, indices, data, nodes, loc, threads)


def induced_between(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, rows: np.ndarray,
                    sources: np.ndarray, num_sources: int):
    """The entries of the CSC rows ``rows`` whose source is among ``sources``: the edges from one
    node list into another (a relation between two node types, or a list into itself), as an int64
    COO ``(position of the source in sources, position of the row in rows, kept data)``, row after
    row in list order, each row's entries in CSC order.

    Both lists in any order, repeats allowed: a repeated row gathers its entries again, a repeated
    source is found at its first position (torch-sparse's induced neighbour sampling, whose node list
    may repeat a seed).  One compiled pass writes the COO (:func:`dgl_accel.core.jit.induced.induced_coo`);
    without numba, or below ``runtime.MIN_WORK`` entries, :func:`induced_entries`'s numpy passes.

    >>> indptr, indices, eids = np.array([0, 2, 3]), np.array([0, 1, 0]), np.array([0, 1, 2])  # 0->0, 1->0, 0->1
    >>> [a.tolist() for a in induced_between(indptr, indices, eids, np.array([1, 0]), np.array([0, 0]), 2)]
    [[0, 0], [0, 1], [2, 0]]
    """
    rows = rows.astype(indptr.dtype, copy=False)
    with marked(sources.astype(indptr.dtype, copy=False), num_sources, repeats=True) as loc:
        if runtime.enabled() and rows.shape[0]:
            work = int(np.sum(indptr[rows + 1] - indptr[rows], dtype=np.int64))
            if runtime.worth(work):
                return jit_induced.induced_coo(indptr, indices, data, rows, loc, work)
        sub_indptr, local, kept = _induce(indptr, indices, data, rows, loc, None)
    dst = np.repeat(np.arange(rows.shape[0], dtype=np.int64), np.diff(sub_indptr))
    return local.astype(np.int64), dst, kept.astype(np.int64)


@contextlib.contextmanager
def marked(nodes: np.ndarray, num_nodes: int, repeats: bool = False):
    """``loc`` with loc[v] = local id + 1 for ``nodes``, 0 elsewhere (one gather gives membership
    and the new id): this thread's zero buffer, back to all zeros on exit (cheaper than a fresh
    n-entry memset per call).  ``repeats``: ``nodes`` may repeat an id; loc holds its first position."""
    loc = _zeros_buffer(num_nodes)
    ids = np.arange(1, nodes.shape[0] + 1, dtype=np.int32)
    loc[nodes] = ids
    if repeats and not np.array_equal(loc[nodes], ids):  # numpy keeps one write of a repeated index
        uniq, first = np.unique(nodes, return_index=True)
        loc[uniq] = first.astype(np.int32) + 1
    try:
        yield loc
    finally:
        loc[nodes] = 0


def _zeros_buffer(n: int) -> np.ndarray:
    """An all-zero int32 buffer of length n owned by this thread (callers restore the zeros)."""
    bufs = _LOCAL.__dict__.setdefault("zeros", {})
    buf = bufs.get(n)
    if buf is None:
        if len(bufs) > 4:  # a few graphs at a time; drop the rest
            bufs.clear()
        buf = bufs[n] = np.zeros(n, dtype=np.int32)
    return buf


def _induce(indptr, indices, data, nodes, loc, threads):
    # work[i]: gathered entries of rows nodes[:i + 1] (sizes the compiled pass, cuts the thread slices)
    work = np.cumsum(indptr[nodes + 1] - indptr[nodes], dtype=np.int64) if nodes.shape[0] else np.zeros(1, np.int64)
    total = int(work[-1])
    if runtime.worth(total):  # one compiled pass: gather, filter, relabel fused
        return jit_induced.induced_entries(indptr, indices, data, nodes, loc,
                                           scratch_array("induced.lv", total, np.int32),
                                           scratch_array("induced.dat", total, data.dtype))
    if threads is None or threads > 1:
        threads = num_threads(total) if threads is None else threads
    if threads <= 1 or nodes.shape[0] < threads:
        return _induce_part(indptr, indices, data, nodes, loc)
    cuts = np.searchsorted(work, np.arange(1, threads) * (total / threads)).tolist()
    bounds = list(zip([0, *cuts], [*cuts, nodes.shape[0]]))
    pool = _pool(threads - 1)
    futures = [pool.submit(_induce_part, indptr, indices, data, nodes[a:b], loc) for a, b in bounds[1:]]
    parts = [_induce_part(indptr, indices, data, nodes[bounds[0][0]:bounds[0][1]], loc)]
    parts += [f.result() for f in futures]
    sub_indptr = np.empty(nodes.shape[0] + 1, dtype=np.int64)
    off = 0
    for (a, b), (sp, _, _) in zip(bounds, parts):
        np.add(sp[:-1], off, out=sub_indptr[a:b])
        off += int(sp[-1])
    sub_indptr[-1] = off
    return sub_indptr, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])


# ------------------------------------------------------------------- symmetric simple graphs
@dataclass(frozen=True, eq=False)
class HalfCSR:
    """The ``src < dst`` entries of the in-CSR, the reverse of every edge, and self-loop ids."""

    indptr: np.ndarray    # [n + 1]
    indices: np.ndarray   # sources (all < their row)
    eids: np.ndarray
    rev: np.ndarray       # [E] by edge id: id of the reverse edge
    rev_eids: np.ndarray  # aligned with ``eids``: id of each half entry's reverse (a sequential read)
    loop_eid: np.ndarray | None  # [n] id of v's self-loop, -1 if none; None: no self-loops at all
    num_nodes: int


def half_csr(csr: InCSR) -> HalfCSR | None:
    """The :class:`HalfCSR` of ``csr``, or None unless the graph is symmetric without parallel edges."""
    n = csr.num_nodes
    src = csr.indices.astype(np.int64)
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(csr.indptr))
    k_uv, k_vu = src * n + dst, dst * n + src
    o_uv, o_vu = np.argsort(k_uv, kind="stable"), np.argsort(k_vu, kind="stable")
    s_uv = k_uv[o_uv]
    if s_uv.shape[0] > 1 and bool((s_uv[1:] == s_uv[:-1]).any()):
        return None  # parallel edges: no one-to-one reverse
    if not np.array_equal(s_uv, k_vu[o_vu]):
        return None  # not symmetric
    rev_pos = np.empty_like(o_uv)
    rev_pos[o_vu] = o_uv  # position p = (u, v) -> position of (v, u)
    eids = csr.eids
    rev = np.empty(eids.shape[0], dtype=eids.dtype)
    rev[eids] = eids[rev_pos]
    loop = src == dst
    loop_eid = None
    if loop.any():
        loop_eid = np.full(n, -1, dtype=np.int64)
        loop_eid[src[loop]] = eids[loop]
    lower = src < dst
    indptr = np.zeros(n + 1, dtype=csr.indptr.dtype)
    np.cumsum(np.bincount(dst[lower], minlength=n), out=indptr[1:])
    half_eids = eids[lower]
    return HalfCSR(indptr, csr.indices[lower], half_eids, rev, rev[half_eids], loop_eid, n)





def _symmetric_coo(half: HalfCSR, nodes: np.ndarray, k: int, np_idt):
    """(src, dst, eids) of the induced subgraph: kept half edges, reverses, self-loops (numpy)."""
    sub_indptr, a_src, a_eid = induced_entries(half.indptr, half.indices, half.eids, nodes, half.num_nodes)
    a_dst = np.repeat(np.arange(k, dtype=np_idt), np.diff(sub_indptr))
    if half.loop_eid is None:
        le = has = np.empty(0, dtype=np.int64)
    else:
        le = np.take(half.loop_eid, nodes)
        has = np.flatnonzero(le >= 0)
    src = np.concatenate([a_src.astype(np_idt, copy=False), a_dst, has.astype(np_idt, copy=False)])
    dst = np.concatenate([a_dst, src[:a_dst.shape[0]], src[2 * a_dst.shape[0]:]])
    eids = np.concatenate([a_eid.astype(np.int64, copy=False), np.take(half.rev, a_eid).astype(np.int64, copy=False),
                           le[has]])
    return src, dst, eids


def induced_symmetric_coo(half: HalfCSR, nodes: np.ndarray, np_idt):
    """(src, dst) in ``np_idt`` and int64 parent edge ids of the subgraph induced by ``nodes``
    (sorted unique) in a symmetric simple graph: kept half edges, their reverses, then self-loops."""
    k = int(nodes.shape[0])
    if runtime.enabled() and k:
        nodes_c = nodes.astype(half.indptr.dtype, copy=False)
        work = int(np.sum(half.indptr[nodes_c + 1] - half.indptr[nodes_c], dtype=np.int64))
        if work >= runtime.MIN_WORK:  # one compiled pass builds the whole COO
            with marked(nodes_c, half.num_nodes) as loc:
                return jit_induced.induced_symmetric(half, nodes_c, loc, work, np_idt)
    return _symmetric_coo(half, nodes, k, np_idt)
