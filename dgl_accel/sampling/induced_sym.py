"""Node-induced subgraphs of symmetric simple graphs from half the adjacency.

In a symmetric graph without parallel edges every edge u -> v (u != v) has exactly one reverse
v -> u, so the induced subgraph is determined by its edges with ``src < dst``.  Gathering and
filtering only those (half the CSR entries: the filter is the expensive pass, see
:mod:`dgl_accel.sampling.induced`) and adding the reverses from a precomputed reverse-edge map
halves the work.  The result is built in COO form (DGL's ``g.subgraph`` also hands back one
format; the others are created on demand).

Edge layout of the result: the ``src < dst`` edges grouped by destination, then their reverses in
the same order, then the self-loops of the chosen nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

import dgl
import numpy as np
import torch

try:
    from dgl import heterograph_index
    _FAST_GRAPH = True
except ImportError:  # pragma: no cover
    _FAST_GRAPH = False

from ..graph.structure import cached
from ..core import cpu_jit
from .induced import InCSR, cpu_in_csr, induced_entries, marked

__all__ = ["HalfCSR", "half_csr", "induced_subgraph_symmetric"]


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


def _build(csr: InCSR) -> HalfCSR | None:
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


def half_csr(g) -> HalfCSR | None:
    """The graph's :class:`HalfCSR` (cached), or None unless it is symmetric without parallel edges."""
    return cached(g, "saint.half_csr", lambda h: _build(cpu_in_csr(h)))


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


def induced_subgraph_symmetric(g, nodes: np.ndarray, half: HalfCSR):
    """As :func:`dgl_accel.sampling.induced.induced_subgraph` for a graph with a :class:`HalfCSR`."""
    k = int(nodes.shape[0])
    idtype = g.idtype
    np_idt = np.int32 if idtype == torch.int32 else np.int64
    src = None
    if cpu_jit.enabled() and k:
        nodes_c = nodes.astype(half.indptr.dtype, copy=False)
        work = int(np.sum(half.indptr[nodes_c + 1] - half.indptr[nodes_c], dtype=np.int64))
        if work >= cpu_jit.MIN_WORK:  # one compiled pass builds the whole COO
            with marked(nodes_c, half.num_nodes) as loc:
                src, dst, eids = cpu_jit.induced_symmetric(half, nodes_c, loc, work, np_idt)
    if src is None:
        src, dst, eids = _symmetric_coo(half, nodes, k, np_idt)
    st, dt = torch.from_numpy(src), torch.from_numpy(dst)
    sg = None
    if _FAST_GRAPH:
        try:  # DGL's constructor without dgl.graph's re-validation (arrays correct by construction)
            gidx = heterograph_index.create_unitgraph_from_coo(1, k, k, st, dt, ["coo", "csr", "csc"])
            sg = dgl.DGLGraph(gidx, ["_N"], ["_E"])
        except Exception:  # pragma: no cover - only on a DGL whose internals changed
            sg = None
    if sg is None:  # pragma: no cover
        sg = dgl.graph((st, dt), num_nodes=k, idtype=idtype)
    sg.ndata[dgl.NID] = torch.from_numpy(nodes.astype(np_idt, copy=False))
    sg.edata[dgl.EID] = torch.from_numpy(eids.astype(np_idt, copy=False))
    return sg, eids
