"""``NeighborSampler``: DGL's multi-layer neighbour sampler on the counter-based choice primitive.

A drop-in for ``dgl.dataloading.NeighborSampler`` on homogeneous graphs: same constructor
arguments (plus ``seed``), same ``sample_blocks`` contract, and the prefetching / output-device /
``as_edge_prediction_sampler`` machinery inherited from ``dgl.dataloading.BlockSampler``.

Randomness is counter-based (see :mod:`dgl_accel.sampling.choice`): call ``n`` of a sampler built
with ``seed=s`` uses the per-call seed ``mix(s, n)`` and ``step`` = layer index (0 = the layer
nearest the output nodes), so two samplers with the same seed produce the same blocks for the same
sequence of calls, on any device and in any batch composition of the transits.  Inside a
``torch.utils.data`` worker the worker id is mixed in too, so workers do not repeat each other.
"""
from __future__ import annotations

import sys

import dgl
import numpy as np
import torch
from dgl.dataloading import BlockSampler

try:
    from dgl import heterograph_index
    from dgl.frame import Frame
    from dgl.heterograph import DGLBlock
    _FAST_BLOCK = True
except ImportError:  # pragma: no cover
    _FAST_BLOCK = False

from ..graph.structure import cached, in_csr
from ..core import backend
from .engine import neighbor_choice_triton
from ..core import cpu_jit
from .rng import call_seed
from .choice import (
    _np64, _tables, check_fanouts, check_nodes, check_prob, excluded_edge_ids, resolve_seed, single_type_seeds,
    uniform_choice_flat, weighted_choice_np,
)

__all__ = ["NeighborSampler"]

def _check_homogeneous(g) -> None:
    if not isinstance(g, dgl.DGLGraph) or g.is_block or len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        got = (f"node types {list(g.ntypes)} and edge types {list(g.canonical_etypes)}"
               if isinstance(g, dgl.DGLGraph) else type(g).__name__)
        if isinstance(g, dgl.DGLGraph) and g.is_block:
            got = "a block"
        raise ValueError(f"expected a homogeneous graph (got {got}). "
                         f"Fix: use dgl.dataloading.NeighborSampler for heterographs")


class NeighborSampler(BlockSampler):
    """Sample a fixed number of in-neighbours per node and layer, building DGL blocks (MFGs).

    Parameters follow ``dgl.dataloading.NeighborSampler``:

    fanouts : list[int]
        Neighbours per node for each layer, input layer first; -1 = all in-neighbours.
    edge_dir : "in" only (sample in-edges, messages flow to the seeds).
    prob : str, optional
        Name of an ``edata`` field of non-negative per-edge weights; zero-weight edges are never
        chosen (so a boolean mask works too).
    replace : bool
        Sample with replacement (each node then gets exactly ``fanout`` edges when it has any
        positive-weight in-edge; repeated edges appear repeatedly in the block).
    prefetch_node_feats, prefetch_labels, prefetch_edge_feats, output_device :
        As in ``dgl.dataloading.BlockSampler``.
    seed : int, optional
        Sampler seed in [0, 2^64); default ``torch.randint(2**62, ())`` at construction, so
        ``torch.manual_seed`` makes runs reproducible.

    Block layout, as ``dgl.to_block(frontier, seeds)``: ``dstdata[NID]`` = the seeds in the given
    order; ``srcdata[NID]`` = the seeds first, then the other sampled sources in increasing id
    (DGL orders those by first appearance; both are valid DGL blocks); ``edata[EID]`` = original
    edge ids, edges grouped by destination in seed order.  Blocks are built directly in CSC form
    (what in-edge message passing uses), so no format conversion happens later.

    ``exclude_eids`` (from ``as_edge_prediction_sampler(exclude=...)``): sampled edges whose id is
    excluded are dropped after the choice, so they never appear in a block.  (DGL removes them
    before choosing; here a node whose chosen edges include excluded ones ends up with fewer than
    ``fanout`` edges.)

    Seed nodes must be unique, as for DGL's sampler (the DataLoader guarantees it).
    """

    def __init__(self, fanouts, edge_dir="in", prob=None, replace=False, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, seed=None):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        self.fanouts = check_fanouts(fanouts)
        if edge_dir != "in":
            raise ValueError(f"expected edge_dir='in' (got {edge_dir!r}). "
                             f"Fix: use dgl.dataloading.NeighborSampler for edge_dir='out'.")
        self.edge_dir = edge_dir
        if prob is not None and not isinstance(prob, str):
            raise ValueError(f"expected prob to be the name of an edata field (got {type(prob).__name__}). "
                             f"Fix: store the weights with g.edata['p'] = w and pass prob='p'.")
        self.prob = prob
        self.replace = bool(replace)
        self.seed = resolve_seed(seed)
        self.calls = 0

    # -------------------------------------------------------------------------------- sampling
    def _next_seed(self) -> int:
        info = torch.utils.data.get_worker_info()
        s = call_seed(self.seed, self.calls, 0 if info is None else info.id + 1)
        self.calls += 1
        return s

    def _uniform_choice(self, csr, indptr, cur, fanout, seed, step, n):
        """(CSR positions of the chosen neighbours, grouped by transit in slot order; per-transit
        counts): the Triton kernel (compiled on CUDA, interpreted under DGL_ACCEL_BACKEND=triton) or
        the numpy path; both give the same positions."""
        path = backend.choose_path(csr.indptr)
        backend.record("neighbor_choice", path, csr.indptr.device)
        if path == "triton" and fanout >= 0:
            transits = torch.from_numpy(cur).to(csr.indptr.device)
            pos = neighbor_choice_triton(csr.indptr, transits, fanout, seed=seed, step=step, num_nodes=n,
                                         replace=self.replace).cpu().numpy()
            valid = pos >= 0
            return pos[valid], np.count_nonzero(valid, axis=1)
        return uniform_choice_flat(indptr, cur, fanout, seed, step, n, self.replace)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        _check_homogeneous(g)
        seed_nodes = single_type_seeds(seed_nodes)
        n = g.num_nodes()
        check_nodes(seed_nodes, n, "seed nodes")
        output_nodes = seed_nodes
        csr = in_csr(g)
        indptr = _np64(csr.indptr)
        pairs = _pairs(g, csr)
        tab = None
        if self.prob is not None:
            if self.prob not in g.edata:
                raise ValueError(f"expected g.edata to have the prob field {self.prob!r} (got fields "
                                 f"{list(g.edata.keys())}). Fix: set g.edata[{self.prob!r}] = weights.")
            p = g.edata[self.prob]
            check_prob(p, g.num_edges(), f"g.edata[{self.prob!r}]")
            tab = _tables(csr.indptr, csr.eids, p, indptr, _np64(csr.eids))
        excl = excluded_edge_ids(exclude_eids)
        seed = self._next_seed()
        idtype = g.idtype
        cur = _np64(seed_nodes)
        out_dev = seed_nodes.device if self.output_device is None else torch.device(self.output_device)
        blocks = []
        for step, fanout in enumerate(reversed(self.fanouts)):
            if tab is None:
                flat, counts = self._uniform_choice(csr, indptr, cur, fanout, seed, step, n)
            else:
                pos = weighted_choice_np(indptr, tab, cur, fanout, seed, step, n, self.replace)
                valid = pos >= 0
                flat, counts = pos[valid], np.count_nonzero(valid, axis=1)
            block, src_ids = _make_block(flat, counts, cur, pairs, excl, n, idtype)
            blocks.insert(0, block)
            cur = src_ids
        if out_dev.type != "cpu":
            blocks = [b.to(out_dev) for b in blocks]
        input_nodes = blocks[0].srcdata[dgl.NID]
        return input_nodes, output_nodes, blocks


def _pairs(g, csr) -> np.ndarray:
    """(source id, edge id) of every CSR position packed in one array element, so the sampled
    positions are gathered with one random access each instead of two: two int32 in one int64 when
    both ids fit (8 bytes per entry, half the cache footprint), else one complex128 (16 bytes)."""
    def build(_):
        idx, eids = csr.indices.numpy(), csr.eids.numpy()
        narrow = sys.byteorder == "little" and (idx.size == 0 or max(int(idx.max()), int(eids.max())) < 2**31)
        pairs = np.empty((idx.size, 2), dtype=np.int32 if narrow else np.int64)
        pairs[:, 0] = idx
        pairs[:, 1] = eids
        return pairs.view(np.int64 if narrow else np.complex128).reshape(-1)
    return cached(g, "accel_neighbor_pairs_v2", build)


def _new_block(indptr_b: np.ndarray, src_local: np.ndarray, num_src: int, num_dst: int, idtype,
               src_nid: np.ndarray, dst_nid: np.ndarray, eid: np.ndarray):
    """A DGLBlock from CSC arrays with its ``srcdata``/``dstdata[dgl.NID]`` and ``edata[dgl.EID]``
    (numpy arrays in ``idtype``'s dtype, shared, not copied).

    Calls DGL's unit-graph constructor directly: ``dgl.create_block`` re-validates the arrays and
    rebuilds a metagraph on every call (~0.3 ms a block); the arrays here are correct by
    construction.  The CSC's edge-id array is left empty, which DGL reads as "edge i is position
    i" (no arange per block), and the id columns go in as ready frames (no per-column frame
    update).  Falls back to ``dgl.create_block`` if DGL's internals differ."""
    indptr_t, indices_t = torch.from_numpy(indptr_b), torch.from_numpy(src_local)
    src_nid_t, dst_nid_t, eid_t = torch.from_numpy(src_nid), torch.from_numpy(dst_nid), torch.from_numpy(eid)
    if _FAST_BLOCK:
        try:
            gidx = heterograph_index.create_unitgraph_from_csr(
                2, num_src, num_dst, indptr_t, indices_t, indices_t.new_empty(0), ["coo", "csr", "csc"], True)
            return DGLBlock(gidx, (["_N"], ["_N"]), ["_E"],
                            [Frame({dgl.NID: src_nid_t}, num_rows=num_src), Frame({dgl.NID: dst_nid_t}, num_rows=num_dst)],
                            [Frame({dgl.EID: eid_t}, num_rows=int(src_local.shape[0]))])
        except Exception:  # pragma: no cover - only on a DGL whose internals changed
            pass
    args = (indptr_t, indices_t, torch.arange(src_local.shape[0], dtype=indices_t.dtype))
    block = dgl.create_block(("csc", args), num_src_nodes=num_src, num_dst_nodes=num_dst, idtype=idtype)
    block.srcdata[dgl.NID], block.dstdata[dgl.NID], block.edata[dgl.EID] = src_nid_t, dst_nid_t, eid_t
    return block


def _make_block(flat: np.ndarray, counts: np.ndarray, dst: np.ndarray, pairs: np.ndarray, excl, n: int,
                idtype):
    """Block with dst = ``dst`` (unique ids) and in-edges at CSR positions ``flat`` (grouped by
    destination, ``counts[i]`` of them for ``dst[i]``).

    Returns the block and its source ids (dst first, then the new sources in increasing id).
    """
    T = dst.shape[0]
    se = np.take(pairs, flat)
    if se.dtype == np.int64:  # two int32 (little-endian: source id low, edge id high), both >= 0
        src = se & np.int64(0xFFFFFFFF)
        eid = se >> np.int64(32)
    else:
        se = se.view(np.int64).reshape(-1, 2)
        src, eid = se[:, 0], se[:, 1]
    if excl is not None and excl.size and eid.size:
        keep = ~np.isin(eid, excl)
        if not keep.all():
            row = np.repeat(np.arange(T, dtype=np.int64), counts)[keep]
            src, eid = src[keep], eid[keep]
            counts = np.bincount(row, minlength=T)
    indptr_b = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr_b[1:])
    # Relabel: dst ids keep 0..T-1; other sources get T.. in increasing id order.
    if src.shape[0] >= cpu_jit.MIN_WORK and cpu_jit.enabled():
        new, src_local = cpu_jit.relabel(src, dst, n)
        return _finish_block(indptr_b, src_local, dst, new, eid, idtype)
    mark = np.zeros(n, dtype=bool)  # a memset: cheap next to the O(E) passes below
    if src.shape[0] * 8 >= n:  # dense marks: O(n), cheaper than sorting when the frontier is large
        mark[src] = True
        mark[dst] = False
        new = np.flatnonzero(mark)
    else:  # few edges: sort them, drop the dst ids by lookup (not np.isin's second sort)
        mark[dst] = True
        new = np.unique(src)
        new = new[~mark[new]]
    mapping = np.empty(n, dtype=np.int64)  # only the entries written below are ever read
    mapping[dst] = np.arange(T, dtype=np.int64)
    mapping[new] = np.arange(T, T + new.shape[0], dtype=np.int64)
    return _finish_block(indptr_b, mapping[src], dst, new, eid, idtype)


def _finish_block(indptr_b, src_local, dst, new, eid, idtype):
    """The block (dst first, then the new sources, as sources; original node and edge ids attached)
    and its source ids, from relabelled CSC arrays: the one assembly step of every CPU/GPU sampler."""
    np_idt = np.int32 if idtype == torch.int32 else np.int64
    src_ids = np.concatenate([dst, new])
    T = dst.shape[0]
    block = _new_block(np.ascontiguousarray(indptr_b, dtype=np_idt), np.ascontiguousarray(src_local, dtype=np_idt),
                       int(src_ids.shape[0]), T, idtype, src_nid=src_ids.astype(np_idt, copy=False),
                       # a copy: ``dst`` is often a view of the caller's seed tensor, and two torch
                       # storages on one buffer break when a DataLoader worker moves the first to
                       # shared memory (the second then reads freed memory)
                       dst_nid=np.array(dst, dtype=np_idt), eid=np.ascontiguousarray(eid, dtype=np_idt))
    return block, src_ids
