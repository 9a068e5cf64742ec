"""The relations of a heterograph as segments of one CSR, so a sampling layer makes one neighbour
choice (one kernel launch on the Triton path, one compiled loop on the CPU) for every relation
instead of one per relation (issue 17).

Relation ``r``'s in-CSR rows sit at stacked rows ``row_offsets[r]:row_offsets[r+1]``, its entries
at stacked positions shifted by its first entry, and its edge ids at ``edge_offsets[r] + id`` in
the stacked ``eids`` (so one weight tensor, the relations' weights concatenated, serves weighted
choice too).  The draws of a transit are keyed by its stacked row: relation ``r``'s transit ``v``
at layer ``step`` draws as the homogeneous choice does for node ``row_offsets[r] + v`` of a graph
with ``row_offsets[-1]`` nodes, so relations into one node type draw independently.

>>> a = Structure(torch.tensor([0, 2, 3]), torch.tensor([1, 0, 0]), torch.tensor([0, 1, 2]), 2, 2,
...               torch.device("cpu"))
>>> b = Structure(torch.tensor([0, 0, 1, 1]), torch.tensor([1]), torch.tensor([0]), 3, 2, torch.device("cpu"))
>>> s = stack_relations([a, b])
>>> s.csr.indptr.tolist(), s.csr.eids.tolist(), s.row_offsets.tolist()
([0, 2, 3, 3, 4, 4], [0, 1, 2, 3], [0, 2, 5])
>>> [(c.tolist(), u.tolist(), e.tolist()) for c, u, e in
...  choose_relations(s, [np.array([0]), np.array([1, 2])], [-1, -1], seed=0, step=0, replace=False)]
[([2], [1, 0], [0, 1]), ([1, 0], [1], [0])]
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...backend import choose_path
from ...csr import Structure
from ...jit import neighbor as jit_neighbor
from ...jit import runtime
from ..arrays import np64, offsets
from ..output import SampledLayer, TypedLayer, TypedSamplerOutput
from .relations_device import sample_typed_layers_device
from .sample import choose_positions, drop_excluded, gather_pairs, pack_pairs, relabel_sources

__all__ = ["StackedRelations", "stack_relations", "stacked_weights", "choose_relations", "relabel_types",
           "sample_typed_layers"]


@dataclass(frozen=True, eq=False)
class StackedRelations:
    """Relations' in-CSRs stacked as one (see the module docstring)."""

    csr: Structure            # stacked rows, entries and edge ids (``edge_offsets[r] + id``)
    host_indptr: np.ndarray   # csr.indptr as int64 numpy (the CPU choice reads it)
    pairs: np.ndarray         # packed (source id, relation's own edge id) per stacked entry
    row_offsets: np.ndarray   # int64 [R + 1]
    edge_offsets: np.ndarray  # int64 [R + 1]: relation r's edge ids start at edge_offsets[r]


def stack_relations(csrs: Sequence[Structure]) -> StackedRelations:
    """Stack the in-CSRs of several relations (one device, rows = each relation's destinations)."""
    if not csrs:
        raise ValueError("expected at least one relation to stack, got none. Fix: pass every relation's in-CSR.")
    device = csrs[0].device
    starts = offsets(np.array([c.num_edges for c in csrs], dtype=np.int64))
    rows = offsets(np.array([c.num_rows for c in csrs], dtype=np.int64))
    ids = starts  # a relation's edge ids are 0..E-1, so id offsets are entry offsets
    pieces = [c.indptr[:-1] + int(starts[r]) for r, c in enumerate(csrs)]
    indptr = torch.cat(pieces + [torch.tensor([int(starts[-1])], dtype=torch.int64, device=device)])
    idtype = torch.int64 if any(c.indices.dtype == torch.int64 for c in csrs) else csrs[0].indices.dtype
    indices = torch.cat([c.indices.to(idtype) for c in csrs])
    eids = torch.cat([c.eids.to(torch.int64) + int(ids[r]) for r, c in enumerate(csrs)])
    csr = Structure(indptr, indices, eids, int(rows[-1]), max(c.num_cols for c in csrs), device)
    pairs = pack_pairs(np.concatenate([np64(c.indices) for c in csrs]), np.concatenate([np64(c.eids) for c in csrs]))
    return StackedRelations(csr, np64(indptr), pairs, rows, ids)


def stacked_weights(stack: StackedRelations, weights: Sequence[torch.Tensor]) -> torch.Tensor:
    """One weight per stacked edge id: the relations' weight vectors (each in its edge-id order)
    concatenated, as float64 (the weighted choice's precision)."""
    flat = [w.detach().reshape(-1).to(torch.float64) for w in weights]
    for r, w in enumerate(flat):
        n = int(stack.edge_offsets[r + 1] - stack.edge_offsets[r])
        if w.numel() != n:
            raise ValueError(f"expected {n} weights for relation {r} (one per edge), got {w.numel()}. "
                             "Fix: give each relation one weight per edge, in edge-id order.")
    return torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)


def choose_relations(stack: StackedRelations, transits: Sequence[np.ndarray | None], fanouts: Sequence[int], *,
                     seed: int, step: int, replace: bool, tables=None) -> list:
    """Each relation's chosen in-edges at one layer: ``[(counts per transit, source ids, the
    relation's edge ids)]``, edges grouped by transit in the given order.  ``transits[r]``: int64
    destination ids of relation r (None or empty: none); ``fanouts[r]``: its fanout (-1 = all).
    Relations sharing a fanout share one choice call; ``tables``: weight tables of the stacked CSR
    (:func:`.choice.weight_tables` of :func:`stacked_weights`) for weighted choice."""
    R = len(transits)
    empty = np.empty(0, dtype=np.int64)
    out: list = [(np.zeros(0 if transits[r] is None else transits[r].shape[0], dtype=np.int64), empty, empty)
                 for r in range(R)]
    by_fanout: dict = {}
    for r in range(R):
        if transits[r] is not None and transits[r].size and fanouts[r] != 0:
            by_fanout.setdefault(int(fanouts[r]), []).append(r)
    for fanout, rels in by_fanout.items():
        v = np.concatenate([transits[r] + stack.row_offsets[r] for r in rels])
        flat, counts = choose_positions(stack.csr, v, fanout, seed=seed, step=step, num_nodes=stack.csr.num_rows,
                                        replace=replace, tables=tables, host_indptr=stack.host_indptr)
        src, eid = gather_pairs(stack.pairs, flat)
        t0 = e0 = 0
        for r in rels:
            t1 = t0 + transits[r].shape[0]
            c = counts[t0:t1]
            e1 = e0 + int(c.sum())
            out[r] = (c, src[e0:e1], eid[e0:e1])
            t0, e0 = t1, e1
    return out


def relabel_types(srcs: Sequence[np.ndarray], src_types: Sequence[int], dsts: Sequence[np.ndarray],
                  num_nodes: Sequence[int]):
    """The source side of a typed block: per node type t, its destinations ``dsts[t]`` (unique
    int64 ids) keep local ids 0..T_t-1 and its other sources (from the ``srcs`` arrays whose
    ``src_types`` is t) get T_t.. in increasing id, as :func:`.sample.relabel_sources` does for
    one type.  Returns (new sources per type, local ids per ``srcs`` array).  One compiled pass over
    every type from ``runtime.MIN_WORK`` sources (one call instead of a relabelling, concatenation
    and split per type), else :func:`.sample.relabel_sources` per type; the same arrays.

    >>> new, local = relabel_types([np.array([5, 2]), np.array([1])], [0, 1], [np.array([2]), np.array([])], [9, 3])
    >>> [a.tolist() for a in new], [a.tolist() for a in local]
    ([[5], [1]], [[1, 0], [0]])
    """
    K = len(dsts)
    sizes = np.array([a.shape[0] for a in srcs], dtype=np.int64)
    if not runtime.worth(int(sizes.sum())):
        new, local = [], [None] * len(srcs)
        for t in range(K):
            mine = [i for i, st in enumerate(src_types) if st == t]
            joined = np.concatenate([srcs[i] for i in mine]) if mine else np.empty(0, np.int64)
            n_t, loc = relabel_sources(joined.astype(np.int64, copy=False), np.asarray(dsts[t], np.int64), num_nodes[t])
            new.append(n_t)
            bounds = offsets(np.array([srcs[i].shape[0] for i in mine], dtype=np.int64))
            for j, i in enumerate(mine):
                local[i] = loc[bounds[j]:bounds[j + 1]]
        return new, local
    type_bounds = offsets(np.asarray(num_nodes, dtype=np.int64))
    src = np.concatenate([np.asarray(a, np.int64) + type_bounds[t] for a, t in zip(srcs, src_types)]) \
        if srcs else np.empty(0, np.int64)
    dst = np.concatenate([np.asarray(d, np.int64) + type_bounds[t] for t, d in enumerate(dsts)])
    dst_bounds = offsets(np.array([d.shape[0] for d in dsts], dtype=np.int64))
    new, new_bounds, loc = jit_neighbor.relabel_typed(src, dst, dst_bounds, type_bounds)
    bounds = offsets(sizes)
    return ([new[new_bounds[t]:new_bounds[t + 1]] - type_bounds[t] for t in range(K)],
            [loc[bounds[i]:bounds[i + 1]] for i in range(len(srcs))])


def sample_typed_layers(stack: StackedRelations, rel_types: Sequence[tuple[int, int]], num_nodes: Sequence[int],
                        seeds: Sequence[torch.Tensor], fanouts: Sequence[Sequence[int]], *, seed: int, replace: bool,
                        tables=None, exclude: Sequence[torch.Tensor | None] | None = None) -> TypedSamplerOutput:
    """Multi-layer neighbour sampling on a heterograph, for checked arguments: a
    :class:`~..output.TypedSamplerOutput`, input layer first.

    ``rel_types[r]``: (source type, destination type) of relation r (``stack``'s order);
    ``num_nodes[t]``: nodes of type t; ``seeds[t]``: int64 seed ids of type t; ``fanouts``: per
    layer (input layer first) one fanout per relation; ``tables``: weight tables of the stacked CSR
    (weighted choice); ``exclude[r]``: relation r's edge ids never to sample (or None).  Layer
    ``step`` (0 = nearest the seeds) draws relation r's in-edges of destination v as stacked row
    ``row_offsets[r] + v`` (:mod:`.relations`); each node type's sources are its destinations
    first, then its other sources over all relations in increasing id.  On the Triton path (a CUDA
    CSR) every layer is built on the device (:mod:`.relations_device`: the same samples)."""
    R = len(rel_types)
    exclude = [None] * R if exclude is None else list(exclude)
    if choose_path(stack.csr.indptr) == "triton":
        return sample_typed_layers_device(stack, rel_types, num_nodes, seeds, fanouts, seed=seed, replace=replace,
                                          weights=None if tables is None else tables.on(stack.csr.device),
                                          exclude=exclude)
    excl = [None if x is None else np.unique(np64(x)) for x in exclude]
    cur, layers = [np64(s) for s in seeds], []
    for step, fan in enumerate(reversed(list(fanouts))):
        chosen = choose_relations(stack, [cur[d] for _, d in rel_types], list(fan), seed=seed, step=step,
                                  replace=replace, tables=tables)
        edges = [drop_excluded(*chosen[r], excl[r]) for r in range(R)]
        new, local = relabel_types([np.asarray(e[1], dtype=np.int64) for e in edges], [s for s, _ in rel_types],
                                   cur, num_nodes)
        src = [np.concatenate([cur[t], new[t]]) for t in range(len(cur))]
        dst_t = tuple(torch.from_numpy(np.asarray(c, dtype=np.int64)) for c in cur)
        src_t = tuple(torch.from_numpy(a) for a in src)
        rels = tuple(SampledLayer(dst_t[d], src_t[s], torch.from_numpy(offsets(edges[r][0])),
                                  torch.from_numpy(np.asarray(local[r], dtype=np.int64)),
                                  torch.from_numpy(np.asarray(edges[r][2], dtype=np.int64)))
                     for r, (s, d) in enumerate(rel_types))
        layers.insert(0, TypedLayer(dst_t, src_t, rels))
        cur = src
    return TypedSamplerOutput(tuple(seeds), tuple(layers))
