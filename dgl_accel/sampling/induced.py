"""Node-induced subgraphs built straight from a cached in-CSR with vectorised numpy.

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
symmetric simple graphs filter only half the entries (:mod:`dgl_accel.sampling.induced_sym`).
"""
from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import dgl
import numpy as np
import torch

try:  # scipy's compiled row gather; private module, so fall back to numpy if it moves
    from scipy.sparse._sparsetools import csr_row_index as _csr_row_index
except ImportError:  # pragma: no cover
    _csr_row_index = None

try:
    from dgl import heterograph_index
    _FAST_GRAPH = True
except ImportError:  # pragma: no cover
    _FAST_GRAPH = False

from ..graph.structure import cached, in_csr
from ..core import cpu_jit, scratch

__all__ = ["InCSR", "cpu_in_csr", "induced_entries", "induced_subgraph", "marked", "num_threads"]

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


def cpu_in_csr(g) -> InCSR:
    """The parent's in-CSR as numpy arrays (cached per graph; a CPU copy for GPU graphs)."""
    def build(h):
        c = in_csr(h)
        n, E = int(c.num_rows), int(c.indices.numel())
        dt = np.int32 if max(n, E) < 2**31 - 1 else np.int64
        f = lambda t: np.ascontiguousarray(t.detach().cpu().numpy(), dtype=dt)  # noqa: E731
        return InCSR(f(c.indptr), f(c.indices), f(c.eids), n)
    return cached(g, "saint.cpu_in_csr", build)


def _gather_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, nodes: np.ndarray):
    """(int64 row pointer into the gathered arrays, sources, data) of the CSR rows ``nodes``."""
    nodes = nodes.astype(indptr.dtype, copy=False)
    start = indptr[nodes]
    deg = indptr[nodes + 1] - start
    rp = np.zeros(nodes.shape[0] + 1, dtype=np.int64)
    np.cumsum(deg, out=rp[1:])
    total = int(rp[-1])
    if _csr_row_index is not None:
        src = scratch.array("induced.src", total, indices.dtype)
        out = scratch.array("induced.dat", total, data.dtype)
        _csr_row_index(nodes.shape[0], nodes, indptr, indices, data, src, out)
        return rp, src, out
    # numpy fallback: position of every gathered entry = row start + rank inside the row
    posn = np.repeat(start - rp[:-1], deg) + np.arange(total, dtype=np.int64)  # pragma: no cover
    return rp, indices[posn], data[posn]  # pragma: no cover


def _induce_part(indptr, indices, data, nodes, loc):
    """One slice of destination rows: (sub_indptr from 0, local src ids, kept data)."""
    rp, src, dat = _gather_rows(indptr, indices, data, nodes)
    lv = np.take(loc, src, out=scratch.array("induced.lv", src.shape[0], loc.dtype))
    # numpy's nonzero is several times faster on bool than on int32
    keep = np.flatnonzero(np.not_equal(lv, 0, out=scratch.array("induced.mask", src.shape[0], np.bool_)))
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


@contextlib.contextmanager
def marked(nodes: np.ndarray, num_nodes: int):
    """``loc`` with loc[v] = local id + 1 for ``nodes``, 0 elsewhere (one gather gives membership
    and the new id): this thread's zero buffer, back to all zeros on exit (cheaper than a fresh
    n-entry memset per call)."""
    loc = _zeros_buffer(num_nodes)
    loc[nodes] = np.arange(1, nodes.shape[0] + 1, dtype=np.int32)
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
    if cpu_jit.enabled() and total >= cpu_jit.MIN_WORK:  # one compiled pass: gather, filter, relabel fused
        return cpu_jit.induced_entries(indptr, indices, data, nodes, loc, scratch.array("induced.lv", total, np.int32),
                                       scratch.array("induced.dat", total, data.dtype))
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


def _new_graph(indptr: np.ndarray, local_src: np.ndarray, k: int, idtype):
    """A homogeneous DGLGraph with ``k`` nodes from CSC arrays whose edge ``j`` is CSC entry ``j``."""
    np_idt = np.int32 if idtype == torch.int32 else np.int64
    args = (torch.from_numpy(indptr.astype(np_idt, copy=False)),
            torch.from_numpy(local_src.astype(np_idt, copy=False)),
            # numpy, not torch.arange: torch's intra-op pool stalls for ms on a busy 2-core machine
            torch.from_numpy(np.arange(local_src.shape[0], dtype=np_idt)))
    if _FAST_GRAPH:
        try:  # DGL's constructor without the re-validation of dgl.graph (arrays correct by construction)
            gidx = heterograph_index.create_unitgraph_from_csr(1, k, k, *args, ["coo", "csr", "csc"], True)
            return dgl.DGLGraph(gidx, ["_N"], ["_E"])
        except Exception:  # pragma: no cover - only on a DGL whose internals changed
            pass
    # dgl.graph takes CSR (rows = sources); ours is CSC, so give it the transposed view via COO
    dst = np.repeat(np.arange(k, dtype=np_idt), np.diff(indptr))  # pragma: no cover
    return dgl.graph((args[1], torch.from_numpy(dst)), num_nodes=k, idtype=idtype)  # pragma: no cover


def induced_subgraph(g, nodes: np.ndarray, csr: InCSR | None = None):
    """``dgl.node_subgraph(g, nodes)`` for sorted unique int64 ``nodes``, without features.

    Returns ``(subgraph, parent_eids)`` with ``ndata[dgl.NID]`` / ``edata[dgl.EID]`` set; the
    subgraph is on the CPU (the caller moves it)."""
    csr = cpu_in_csr(g) if csr is None else csr
    indptr, local_src, eids = induced_entries(csr.indptr, csr.indices, csr.eids, nodes, csr.num_nodes)
    idtype = g.idtype
    sg = _new_graph(indptr, local_src, int(nodes.shape[0]), idtype)
    np_idt = np.int32 if idtype == torch.int32 else np.int64
    sg.ndata[dgl.NID] = torch.from_numpy(nodes.astype(np_idt, copy=False))
    sg.edata[dgl.EID] = torch.from_numpy(eids.astype(np_idt, copy=False))
    return sg, eids
