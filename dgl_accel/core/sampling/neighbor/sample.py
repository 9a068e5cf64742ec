"""The neighbour family's DGL-free entry points: sample in-neighbours of seed nodes on a CSR view.

Family ``neighbor``: kernels ``kernels/sampling.py`` (the neighbour-choice kernels), launcher
:mod:`.launchers`, CPU twin :mod:`.choice` (the specification), compiled twin
:mod:`dgl_accel.core.jit.neighbor`; the DGL adapter is :class:`dgl_accel.sampling.NeighborSampler`.

* :func:`sample_neighbors`: one layer of neighbour sampling as COO arrays (what
  ``NeighborSampler`` computes for each block);
* :func:`sample_layers`: multi-layer neighbour sampling with each layer relabelled, a
  :class:`~..output.SamplerOutput` (what ``NeighborSampler`` turns into blocks);
* :func:`choose_neighbors` / :func:`choose_positions`: the choice on the path the backend picks
  (Triton kernel or CPU), padded [T, fanout] or flat;
* :func:`relabel_block` / :func:`pack_pairs`: a block's CSC arrays from chosen positions.

Randomness is counter-based (see :mod:`.choice`): a draw depends on (seed, step, node, slot)
only, so call ``n`` of a ``NeighborSampler`` with sampler seed ``s`` samples, at layer ``step``
(0 = nearest the output), exactly ``sample_neighbors(in_csr(g), frontier, fanout,
seed=call_seed(s, n, worker), step=step)``.
"""
from __future__ import annotations

import sys

import numpy as np
import torch

from ...backend import choose_path, record
from ...csr import Structure
from ...jit import neighbor as jit_neighbor
from ...jit import runtime
from ..arrays import np64, offsets
from ..checks import check_fanout, check_fanouts, check_int, check_nodes, check_seed
from ..output import SampledLayer, SamplerOutput
from .choice import neighbor_choice, uniform_choice_flat, weight_tables, weighted_choice_np
from .launchers import neighbor_choice_triton
from .sample_device import sample_layers_device, sample_neighbors_device

__all__ = ["sample_neighbors", "sample_layers", "choose_neighbors", "choose_positions", "relabel_block",
           "drop_excluded",
           "relabel_sources", "pack_pairs", "gather_pairs", "unpack_pairs"]


def sample_neighbors(csr: Structure, seeds: torch.Tensor, fanout: int, *, seed, replace: bool = False,
                     prob: torch.Tensor | None = None, step: int = 0):
    """In-neighbours of every seed node: ``(src, dst, eids)`` of the sampled edges, grouped by seed
    in the given order (``dst`` repeats each seed once per sampled edge), on the CSR's device.

    csr : in-edges grouped by destination (e.g. ``dgl_accel.graph.in_csr(g)``).
    seeds : 1-D integer tensor of node ids (rows of ``csr``).
    fanout : edges per seed (all when it has fewer and ``replace`` is False); -1 = all in-edges.
    seed : Philox key in [0, 2^64) (see :mod:`..checks` for the seed rule); ``step`` separates the
        draws of several layers under one key.
    prob : optional non-negative weight per edge (edge-id order); zero-weight edges are never chosen.

    On the Triton path (a CUDA CSR) everything stays on the device (:mod:`.sample_device`: the
    same samples, two host reads, more with ``prob``, whose tables are built once per weight tensor).

    >>> from dgl_accel.core.csr import Structure
    >>> csr = Structure(indptr=torch.tensor([0, 2, 3, 3]), indices=torch.tensor([1, 2, 0]),
    ...                 eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
    >>> src, dst, eids = sample_neighbors(csr, torch.tensor([0, 1, 2]), 1, seed=0)
    >>> dst.tolist()        # node 2 has no in-edge
    [0, 1]
    >>> sample_neighbors(csr, torch.tensor([0]), -1, seed=0)[0].tolist()
    [1, 2]
    """
    check_nodes(seeds, csr.num_rows, "seeds")
    fanout, seed, step = check_fanout(fanout), check_seed(seed), check_int(step, "step")
    tables = None if prob is None else weight_tables(csr.indptr, csr.eids, prob)
    if choose_path(csr.indptr) == "triton":
        record("neighbor_choice", "triton", csr.indptr.device)
        return sample_neighbors_device(csr, seeds, fanout, seed=seed, step=step, replace=bool(replace),
                                       weights=None if tables is None else tables.on(csr.device))
    cur = np64(seeds)
    flat, counts = choose_positions(csr, cur, fanout, seed=seed, step=step, num_nodes=csr.num_rows,
                                    replace=bool(replace), tables=tables)
    pos = torch.from_numpy(flat).to(csr.device)
    dst = torch.from_numpy(np.repeat(cur, counts)).to(device=csr.device, dtype=csr.indices.dtype)
    return csr.indices[pos], dst, csr.eids[pos]


def sample_layers(csr: Structure, seeds: torch.Tensor, fanouts: list[int], *, seed, replace: bool = False,
                  tables=None, exclude: torch.Tensor | None = None, host=None) -> SamplerOutput:
    """Multi-layer neighbour sampling from ``seeds`` (fanouts input layer first, as DGL's): layer
    ``step`` (0 = nearest the seeds) samples :func:`sample_neighbors`'s edges of the previous
    layer's sources, minus the edge ids in ``exclude``, relabelled (:class:`~..output.SampledLayer`:
    the destinations first, then the new sources in increasing id).

    ``tables`` (:func:`.choice.weight_tables`) makes the choice weighted.  On the Triton path (a
    CUDA CSR) every layer is built on the device (:func:`.sample_device.sample_layers_device`:
    the same samples, bounded host reads).
    ``host``: ``(indptr, pack_pairs(indices, eids))`` as numpy arrays, when the caller caches them.

    >>> csr = Structure(indptr=torch.tensor([0, 2, 3, 3]), indices=torch.tensor([1, 2, 0]),
    ...                 eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
    >>> out = sample_layers(csr, torch.tensor([0]), [1, -1], seed=0)
    >>> out.layers[-1].src_nodes.tolist(), out.layers[-1].eids.tolist()
    ([0, 1, 2], [0, 1])
    >>> out.input_nodes.tolist()    # node 1's in-neighbour 0 is already a source
    [0, 1, 2]
    """
    check_nodes(seeds, csr.num_rows, "seed nodes")
    fanouts, seed = check_fanouts(fanouts), check_seed(seed)
    if exclude is not None and not isinstance(exclude, torch.Tensor):
        raise TypeError(f"expected exclude to be a 1-D tensor of edge ids or None (got {type(exclude).__name__}). "
                        "Fix: pass torch.as_tensor(eids).")
    if choose_path(csr.indptr) == "triton":
        for _ in fanouts:  # one choice per layer, as on the CPU path
            record("neighbor_choice", "triton", csr.indptr.device)
        layers = sample_layers_device(csr, seeds, fanouts, seed=seed, replace=bool(replace), exclude=exclude,
                                      weights=None if tables is None else tables.on(csr.device))
        return SamplerOutput(seeds, tuple(SampledLayer(*arrays) for arrays in layers))
    indptr, pairs = host if host is not None else (np64(csr.indptr), pack_pairs(np64(csr.indices), np64(csr.eids)))
    excl = None if exclude is None else np.unique(np64(exclude))
    cur, layers = np64(seeds), []
    for step, fanout in enumerate(reversed(fanouts)):
        flat, counts = choose_positions(csr, cur, fanout, seed=seed, step=step, num_nodes=csr.num_rows,
                                        replace=bool(replace), tables=tables, host_indptr=indptr)
        indptr_b, src_local, new, eid = relabel_block(flat, counts, cur, pairs, excl, csr.num_rows)
        src_nodes = np.concatenate([cur, new])
        layers.insert(0, SampledLayer(*(torch.from_numpy(np.asarray(a, dtype=np.int64))
                                        for a in (cur, src_nodes, indptr_b, src_local, eid))))
        cur = src_nodes
    return SamplerOutput(seeds, tuple(layers))


def choose_neighbors(indptr, transits, fanout, *, seed, step, num_nodes, replace=False):
    """Uniform neighbour choice on the path the backend picks (Triton kernel or native CPU): int64
    [T, fanout] CSR positions, -1 padded, as :func:`.choice.neighbor_choice`.

    >>> choose_neighbors(torch.tensor([0, 2]), torch.tensor([0]), 1, seed=0, step=0, num_nodes=1).shape
    torch.Size([1, 1])
    """
    path = choose_path(indptr, transits)
    record("neighbor_choice", path, transits.device)
    if path == "triton" and fanout >= 0:
        return neighbor_choice_triton(indptr, transits, fanout, seed=seed, step=step, num_nodes=num_nodes,
                                      replace=replace)
    return neighbor_choice(indptr, transits, fanout, seed=seed, step=step, num_nodes=num_nodes, replace=replace)


def choose_positions(csr: Structure, cur: np.ndarray, fanout: int, *, seed: int, step: int, num_nodes: int,
                     replace: bool, tables=None, host_indptr: np.ndarray | None = None):
    """(CSR positions of the chosen neighbours of the transits ``cur`` (int64 array), grouped by
    transit in slot order; per-transit counts), without validation.  Uniform: the Triton kernel
    (compiled on CUDA, interpreted under DGL_ACCEL_BACKEND=triton) or the CPU path, same positions;
    weighted (``tables`` from :func:`.choice.weight_tables`): the CPU path.  ``host_indptr``: the
    CSR's indptr as an int64 numpy array, when the caller has it already."""
    indptr = np64(csr.indptr) if host_indptr is None else host_indptr
    if tables is not None:
        return _valid(weighted_choice_np(indptr, tables, cur, fanout, seed, step, num_nodes, replace))
    path = choose_path(csr.indptr)
    record("neighbor_choice", path, csr.indptr.device)
    if path == "triton" and fanout >= 0:
        transits = torch.from_numpy(cur).to(csr.indptr.device)
        return _valid(neighbor_choice_triton(csr.indptr, transits, fanout, seed=seed, step=step, num_nodes=num_nodes,
                                             replace=replace).cpu().numpy())
    return uniform_choice_flat(indptr, cur, fanout, seed, step, num_nodes, replace)


def _valid(pos: np.ndarray):
    """Padded positions [T, F] (-1 = empty slot) -> (flat valid positions, counts per row)."""
    valid = pos >= 0
    return pos[valid], np.count_nonzero(valid, axis=1)


# ----------------------------------------------------------------------------------- blocks
def pack_pairs(indices: np.ndarray, eids: np.ndarray) -> np.ndarray:
    """(source id, edge id) of every CSR position packed in one array element, so sampled positions
    are gathered with one random access each instead of two: two int32 in one int64 when both ids
    fit (8 bytes per entry, half the cache footprint), else one complex128 (16 bytes).

    >>> unpack_pairs(pack_pairs(np.array([5, 6]), np.array([0, 1]))[[1]])
    (array([6]), array([1]))
    """
    narrow = sys.byteorder == "little" and (indices.size == 0 or max(int(indices.max()), int(eids.max())) < 2**31)
    pairs = np.empty((indices.size, 2), dtype=np.int32 if narrow else np.int64)
    pairs[:, 0] = indices
    pairs[:, 1] = eids
    return pairs.view(np.int64 if narrow else np.complex128).reshape(-1)


def gather_pairs(pairs: np.ndarray, flat: np.ndarray):
    """(source ids, edge ids) of the :func:`pack_pairs` entries at positions ``flat``: the compiled
    one-pass loop for int64-packed pairs from :data:`~dgl_accel.core.jit.runtime.MIN_WORK` entries,
    else a gather and :func:`unpack_pairs` (same values).

    >>> [a.tolist() for a in gather_pairs(pack_pairs(np.array([5, 6]), np.array([0, 1])), np.array([1, 1, 0]))]
    [[6, 6, 5], [1, 1, 0]]
    """
    if pairs.dtype == np.int64 and runtime.worth(flat.shape[0]):
        return jit_neighbor.gather_pairs(pairs, flat)
    return unpack_pairs(np.take(pairs, flat))


def unpack_pairs(se: np.ndarray):
    """(source ids, edge ids) of gathered :func:`pack_pairs` entries."""
    if se.dtype == np.int64:  # two int32 (little-endian: source id low, edge id high), both >= 0
        return se & np.int64(0xFFFFFFFF), se >> np.int64(32)
    se = se.view(np.int64).reshape(-1, 2)
    return se[:, 0], se[:, 1]


def relabel_block(flat: np.ndarray, counts: np.ndarray, dst: np.ndarray, pairs: np.ndarray, excl, n: int):
    """CSC arrays of the block with destinations ``dst`` (unique ids) and in-edges at CSR positions
    ``flat`` (grouped by destination, ``counts[i]`` of them for ``dst[i]``), minus the edge ids in
    ``excl`` (sorted int64 array, or None): ``(indptr, local source ids, new sources, edge ids)``.

    Relabelling: dst ids keep 0..T-1; the other sources (``new``) get T.. in increasing id order.

    >>> pairs = pack_pairs(np.array([7, 3, 9]), np.array([0, 1, 2]))
    >>> [a.tolist() for a in relabel_block(np.array([0, 1, 2]), np.array([2, 1]), np.array([3, 5]), pairs, None, 10)]
    [[0, 2, 3], [2, 0, 3], [7, 9], [0, 1, 2]]
    """
    src, eid = gather_pairs(pairs, flat)
    counts, src, eid = drop_excluded(counts, src, eid, excl)
    new, src_local = relabel_sources(src, dst, n)
    return offsets(counts), src_local, new, eid


def drop_excluded(counts: np.ndarray, src: np.ndarray, eid: np.ndarray, excl):
    """(counts, src, eid) of edges grouped by transit (``counts[i]`` for transit i) without the edge
    ids in ``excl`` (sorted int64 array, or None).

    >>> [a.tolist() for a in drop_excluded(np.array([2, 1]), np.array([4, 5, 6]), np.array([0, 1, 2]), np.array([1]))]
    [[1, 1], [4, 6], [0, 2]]
    """
    if excl is not None and excl.size and eid.size:
        keep = ~np.isin(eid, excl)
        if not keep.all():
            row = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)[keep]
            return np.bincount(row, minlength=counts.shape[0]), src[keep], eid[keep]
    return counts, src, eid


def relabel_sources(src: np.ndarray, dst: np.ndarray, n: int):
    """(new sources, local ids of ``src``) of a block whose destinations are ``dst`` (unique ids
    among ``n``): dst ids keep 0..T-1, the other sources get T.. in increasing id order.

    >>> [a.tolist() for a in relabel_sources(np.array([7, 3, 9, 7]), np.array([3]), 10)]
    [[7, 9], [1, 0, 2, 1]]
    """
    T = dst.shape[0]
    if runtime.worth(src.shape[0]):
        return jit_neighbor.relabel(src, dst, n)
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
    return new, mapping[src]
