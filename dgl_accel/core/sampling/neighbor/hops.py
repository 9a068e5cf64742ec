"""Hop-by-hop neighbour sampling (PyG's layout) on the core's neighbour choice: what
:class:`dgl_accel.pyg.NeighborSampler` returns, computed on the graph's device.  DGL-free and
PyG-free, as the whole core: the PyG adapter wraps the result in PyG's output types.

PyG's layout is not the core's blocks (:func:`dgl_accel.core.sampling.neighbor.sample.sample_layers`,
DGL's message-flow layers, where layer k samples again for every node of layer k-1): hop k samples
the in-edges of the nodes first reached at hop k-1 only (the seeds at hop 0), so every sampled node
has its in-edges drawn at most once, and one node list per node type holds the seeds first, then
each hop's new nodes.  Within a hop the new nodes come in increasing id (the core's relabelling
order; PyG's own sampler lists them in first appearance, an order its contract leaves open).

Relations: relation ``r`` is an in-CSR (rows: its destination type's nodes; indices: its source
type's; ``eids``: each entry's position in the relation's ``edge_index``), with optional weight
tables (:class:`~dgl_accel.core.sampling.neighbor.choice.WeightTables`) for a weighted choice (the rules of
:func:`~dgl_accel.core.sampling.neighbor.choice.weighted_neighbor_choice`, on either path).  Its hop-``k`` choice is
keyed by ``step = k * R + r`` under the call's key, so two relations into one node type draw
independently, and a homogeneous graph (R = 1) draws hop k as the core's layer ``step = k``.

Two paths, the same samples (the core's counter-based draws, compacted and relabelled in the same
order): where the backend picks the Triton path (a CUDA CSR; a CPU one under
``DGL_ACCEL_BACKEND=triton``, interpreted) the choice is
:func:`~dgl_accel.core.sampling.neighbor.sample_device.choose_device` (the seeds are checked by the caller
and later frontiers are the sampler's own, so no range check) and a hop's new nodes come from
:func:`~dgl_accel.core.sampling.neighbor.sample_device.relabel_device` (sorts and searches, no node-sized
array), all in torch ops on the device.  Host reads per relation and hop: the sample count (a
weighted choice more); per node type and hop: two (the relabelling); in all :func:`host_read_bound`.  On the native CPU
path the choice is :func:`~dgl_accel.core.sampling.neighbor.sample.choose_positions` on numpy views, the
gather and relabelling the compiled loops of the DGL adapter's blocks
(:func:`~dgl_accel.core.sampling.neighbor.sample.gather_pairs`,
:func:`~dgl_accel.core.sampling.neighbor.sample.relabel_sources`), on host arrays each relation builds once
(a CUDA graph under ``DGL_ACCEL_BACKEND=native`` takes this path too, its results copied back).

>>> csr = Structure(indptr=torch.tensor([0, 2, 3, 3]), indices=torch.tensor([1, 2, 0]),
...                 eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
>>> out = sample_hops([Relation(csr, 0, 0)], [torch.tensor([0])], [[-1, -1]], key=0, replace=False, num_nodes=[3])
>>> out.nodes[0].tolist(), out.row[0].tolist(), out.col[0].tolist(), out.edge[0].tolist()
([0, 1, 2], [1, 2, 0], [0, 0, 1], [0, 1, 2])
>>> out.num_sampled_nodes, out.num_sampled_edges     # node 1's in-neighbour 0 is no new node
([[1, 2, 0]], [[2, 1]])
>>> [t[0].tolist() for t in induced_hops([Relation(csr, 0, 0)], [torch.tensor([0, 1])])]   # rows, cols, edges
[[1, 0], [0, 1], [0, 2]]

PyG's ``subgraph_type="induced"`` (:func:`induced_hops`) keeps the sampled nodes and replaces the
sampled edges by every edge among them: per relation, the in-edges of each node of its destination
type whose source is a node of its source type (torch-sparse's ``directed=False``), the core's
node-induced subgraph between two node lists (:func:`~dgl_accel.core.sampling.induced.subgraph.induced_between`,
compiled; :func:`~dgl_accel.core.sampling.induced.subgraph_device.induced_between_device` on the Triton path,
two host reads per relation).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ...backend import choose_path, record
from ...csr import Structure
from ..arrays import np64
from ..induced.subgraph import InCSR, induced_between
from ..induced.subgraph_device import induced_between_device
from .sample import choose_positions, gather_pairs, pack_pairs, relabel_sources
from .sample_device import WEIGHTED_EXTRA_READS, choose_device, relabel_device
from .temporal import temporal_positions

__all__ = ["Relation", "Hops", "sample_hops", "induced_hops", "HOST_READS_PER_CHOICE", "HOST_READS_PER_RELABEL",
           "host_read_bound"]

HOST_READS_PER_CHOICE = 1   # choose_device, uniform: the number of chosen edges
HOST_READS_PER_RELABEL = 2  # relabel_device: the distinct sources, the new ones


def host_read_bound(num_relations: int, num_types: int, hops: int, weighted: bool = False) -> int:
    """Host reads of :func:`sample_hops` on the device: per hop, each relation's choice
    (``HOST_READS_PER_CHOICE``, the sample count; weighted: ``WEIGHTED_EXTRA_READS`` more) and each
    node type's relabelling."""
    choice = HOST_READS_PER_CHOICE + (WEIGHTED_EXTRA_READS if weighted else 0)
    return hops * (num_relations * choice + num_types * HOST_READS_PER_RELABEL)


@dataclass(frozen=True, eq=False)
class Relation:
    """One edge type as the sampler sees it: its in-CSR and its endpoint node types (indices)."""

    csr: Structure  # rows: destinations; indices: sources; eids: positions in the edge type's edge_index
    src: int        # the source node type
    dst: int        # the destination node type
    cache: dict = field(default_factory=dict, repr=False)  # the CPU path's host arrays, built on first use
    weights: object = field(default=None, repr=False)      # WeightTables of csr: weighted choice (None: uniform)
    times: object = field(default=None, repr=False)        # temporal.EntryTimes of csr (rows sorted by time)

    def host(self):
        """(indptr, packed (source, edge id) pairs) as numpy arrays, for the CPU path."""
        if "host" not in self.cache:
            self.cache["host"] = (np64(self.csr.indptr), pack_pairs(np64(self.csr.indices), np64(self.csr.eids)))
        return self.cache["host"]

    def host_induced(self) -> InCSR:
        """The CSR as :func:`induced_hops` reads it on the CPU path (one index dtype, int32 where it fits)."""
        if "induced" not in self.cache:
            self.cache["induced"] = InCSR.from_structure(self.csr)
        return self.cache["induced"]


@dataclass(frozen=True, eq=False)
class Hops:
    """The sampled subgraph in PyG's layout (all int64, on the graph's device)."""

    nodes: list[torch.Tensor]            # per node type: the seeds first, then each hop's new nodes
    row: list[torch.Tensor]              # per relation: each sampled edge's source, an index into nodes[src]
    col: list[torch.Tensor]              # per relation: its destination, an index into nodes[dst]
    edge: list[torch.Tensor]             # per relation: its position in the relation's edge_index
    num_sampled_nodes: list[list[int]]   # per node type: the seeds, then the new nodes of each hop
    num_sampled_edges: list[list[int]]   # per relation: the edges of each hop
    batch: list[torch.Tensor] | None = None  # disjoint: per node type, each node's seed (position)


def _hop_edges(rel: Relation, frontier: torch.Tensor, first: int, fanout: int, *, key: int, step: int,
               replace: bool, on_device: bool, limits: torch.Tensor | None = None, strategy: str = "uniform"):
    """(sources as global ids, destinations as local ids, edge ids) of one relation at one hop;
    ``first``: where the frontier starts in its node type's list; ``limits``: temporal sampling,
    each frontier node's time limit (:mod:`.temporal`)."""
    empty = torch.empty(0, dtype=torch.int64, device=frontier.device)
    if fanout == 0 or frontier.numel() == 0:
        return empty, empty, empty
    if limits is not None:
        def choose(virtual, transits):
            if on_device:
                return choose_device(virtual, transits, fanout, key, step, replace, None)
            return choose_positions(virtual, np64(transits), fanout, seed=key, step=step, num_nodes=virtual.num_rows,
                                    replace=replace)
        record("neighbor_choice_temporal", "triton" if on_device else "native", frontier.device)
        flat, counts = temporal_positions(rel.csr, rel.times, frontier.to(rel.csr.device), limits.to(rel.csr.device),
                                          fanout, strategy, choose)
        src, eid = rel.csr.indices[flat].to(frontier.device), rel.csr.eids[flat].to(frontier.device)
        counts = counts.to(frontier.device)
    elif on_device:  # the frontier is the sampler's own: no range check
        record("neighbor_choice", "triton", frontier.device)
        weights = None if rel.weights is None else rel.weights.on(rel.csr.device)
        flat, counts = choose_device(rel.csr, frontier, fanout, key, step, replace, weights)
        src, eid = rel.csr.indices[flat], rel.csr.eids[flat]
    else:
        indptr, pairs = rel.host()
        flat, counts = choose_positions(rel.csr, np64(frontier), fanout, seed=key, step=step,
                                        num_nodes=rel.csr.num_rows, replace=replace, tables=rel.weights,
                                        host_indptr=indptr)
        src, eid, counts = (torch.from_numpy(a).to(frontier.device) for a in (*gather_pairs(pairs, flat), counts))
    # the choice groups edges by frontier node, in order: each one's local id repeats counts[i] times
    local = torch.arange(first, first + frontier.numel(), device=frontier.device)
    dst = torch.repeat_interleave(local, counts, output_size=src.numel())
    return src.to(torch.int64), dst, eid.to(torch.int64)


def _relabel(src: torch.Tensor, nodes: torch.Tensor, num_nodes: int, on_device: bool):
    """(new nodes in increasing id, local ids of ``src``): ``nodes`` keep 0..len-1."""
    if on_device:
        return relabel_device(src, nodes)
    new, local = relabel_sources(np64(src), np64(nodes), num_nodes)
    return torch.from_numpy(new).to(nodes.device), torch.from_numpy(local).to(nodes.device)


def sample_hops(rels: Sequence[Relation], seeds: Sequence[torch.Tensor], fanouts: Sequence[Sequence[int]], *,
                key: int, replace: bool, num_nodes: Sequence[int], disjoint: bool = False,
                seed_time: torch.Tensor | None = None, strategy: str = "uniform") -> Hops:
    """Sample ``len(fanouts[0])`` hops from ``seeds`` (one 1-D id tensor per node type, checked by
    the caller; duplicates stay, each copy its own node with its own in-edges) over ``rels``;
    ``fanouts[r][k]``: relation r's fanout at hop k (-1 = every in-edge, 0 = none); ``key``: the
    call's Philox key; ``num_nodes``: per node type.

    ``disjoint``: one subgraph per seed (PyG's ``disjoint=True``): seed i of a node type starts
    subgraph i, a sampled source joins its destination's subgraph, and a node is new where it is
    new to that subgraph, so a node reached from two seeds is listed twice; ``batch`` holds each
    node's subgraph.  Inside, a node is the key ``subgraph * num_nodes + id``, relabelled as
    :func:`relabel_device` does (sorts, no node-sized array): the new nodes of a hop come in
    increasing (subgraph, id).

    ``seed_time`` (temporal sampling, which is disjoint): the time of each subgraph (seed ``i`` of
    any node type starts subgraph ``i``); a node of subgraph ``b`` draws only in-edges of time at
    most ``seed_time[b]``, by ``strategy`` (:mod:`.temporal`; every relation carries ``times``)."""
    disjoint = disjoint or seed_time is not None
    device = rels[0].csr.device if rels else seeds[0].device
    on_device = bool(rels) and choose_path(rels[0].csr.indptr) == "triton"
    nodes = [s.to(device=device, dtype=torch.int64) for s in seeds]
    if disjoint:
        num_nodes = [max(int(n), 1) for n in num_nodes]  # key arithmetic: a type without nodes has no keys
        nodes = [torch.arange(n.numel(), device=device) * num_nodes[t] + n for t, n in enumerate(nodes)]
    seed_time = None if seed_time is None else seed_time.to(device)
    frontier, first = list(nodes), [0] * len(nodes)
    counts = [[int(n.numel())] for n in nodes]
    row, col, edge = ([[] for _ in rels] for _ in range(3))
    for k in range(len(fanouts[0]) if rels else 0):
        by_src: list[list] = [[] for _ in nodes]  # (relation, global sources) per source node type
        for r, rel in enumerate(rels):
            at = frontier[rel.dst] % num_nodes[rel.dst] if disjoint else frontier[rel.dst]
            limits = None if seed_time is None else seed_time[frontier[rel.dst] // num_nodes[rel.dst]]
            src, dst, eid = _hop_edges(rel, at, first[rel.dst], fanouts[r][k], key=key, step=k * len(rels) + r,
                                       replace=replace, on_device=on_device, limits=limits, strategy=strategy)
            if disjoint:  # the source joins its destination's subgraph
                src = nodes[rel.dst][dst] // num_nodes[rel.dst] * num_nodes[rel.src] + src
            by_src[rel.src].append((r, src))
            col[r].append(dst)
            edge[r].append(eid)
        for t, pieces in enumerate(by_src):
            srcs = [s for _, s in pieces]
            if disjoint:
                new, local = relabel_device(_joined(srcs, device), nodes[t], distinct=True)
            else:
                new, local = _relabel(_joined(srcs, device), nodes[t], num_nodes[t], on_device)
            for (r, _), part in zip(pieces, torch.split(local, [s.numel() for s in srcs])):
                row[r].append(part)
            first[t], frontier[t] = nodes[t].numel(), new
            nodes[t] = torch.cat([nodes[t], new])
            counts[t].append(int(new.numel()))
    batch = None
    if disjoint:
        batch = [n // num_nodes[t] for t, n in enumerate(nodes)]
        nodes = [n % num_nodes[t] for t, n in enumerate(nodes)]
    num_edges = [[int(c.numel()) for c in col[r]] for r in range(len(rels))]
    return Hops(nodes, [_joined(p, device) for p in row], [_joined(p, device) for p in col],
                [_joined(p, device) for p in edge], counts, num_edges, batch)


def induced_hops(rels: Sequence[Relation], nodes: Sequence[torch.Tensor]):
    """(row, col, edge), one int64 tensor per relation on the graph's device: every edge of relation
    ``r`` from a node of ``nodes[rel.src]`` into a node of ``nodes[rel.dst]`` (the node lists of
    :func:`sample_hops`, not disjoint; the seeds may repeat), ``col`` the destination's position,
    ``row`` the source's first position, ``edge`` the edge id; grouped by destination in list order,
    each destination's in-edges in CSR order (a repeated seed gets its in-edges at each position)."""
    device = rels[0].csr.device if rels else nodes[0].device
    on_device = bool(rels) and choose_path(rels[0].csr.indptr) == "triton"
    row, col, edge = [], [], []
    for rel in rels:
        dst, src = nodes[rel.dst].to(device), nodes[rel.src].to(device)
        record("induced_hops", "triton" if on_device else "native", device)
        if on_device:
            r, c, e = induced_between_device(rel.csr, dst, src)
        else:
            h = rel.host_induced()
            arrays = induced_between(h.indptr, h.indices, h.eids, np64(dst), np64(src), int(rel.csr.num_cols))
            r, c, e = (torch.from_numpy(a).to(device) for a in arrays)
        row.append(r)
        col.append(c)
        edge.append(e)
    return row, col, edge


def _joined(parts: list, device) -> torch.Tensor:
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64, device=device)
