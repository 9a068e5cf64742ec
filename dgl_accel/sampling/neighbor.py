"""``NeighborSampler``: DGL's multi-layer neighbour sampler on the counter-based choice primitive.

A drop-in for ``dgl.dataloading.NeighborSampler`` on homogeneous graphs: same constructor
arguments (plus ``seed``), same ``sample_blocks`` contract, and the prefetching / output-device /
``as_edge_prediction_sampler`` machinery inherited from ``dgl.dataloading.BlockSampler``.

Randomness is counter-based (see :mod:`dgl_accel.core.sampling.choice`): call ``n`` of a sampler
built with ``seed=s`` uses the per-call seed ``mix(s, n)`` and ``step`` = layer index (0 = the layer
nearest the output nodes), so two samplers with the same seed produce the same blocks for the same
sequence of calls, on any device and in any batch composition of the transits.  Inside a
``torch.utils.data`` worker the worker id is mixed in too, so workers do not repeat each other.
Each block holds the edges of :func:`dgl_accel.core.sampling.neighbor.sample_neighbors` for its
layer (the DGL-free entry of the same sampling), relabelled.
"""
from __future__ import annotations

import dgl
import torch
from dgl.dataloading import BlockSampler

from ..core.sampling.arrays import np64
from ..core.sampling.checks import (
    check_fanouts,
    check_nodes,
    check_prob,
    excluded_edge_ids,
    expected,
    resolve_seed,
    single_type_seeds,
)
from ..core.sampling.choice import weight_tables
from ..core.sampling.neighbor import choose_positions
from ..graph.structure import in_csr
from .base import CallSeeds
from .blocks import check_homogeneous, make_block, packed_pairs
from .errors import dgl_errors

__all__ = ["NeighborSampler", "HETERO_FIX"]

HETERO_FIX = "use dgl.dataloading.NeighborSampler for heterographs"


@dgl_errors
class NeighborSampler(CallSeeds, BlockSampler):
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

    Duplicated seed nodes are kept, as ``dgl.dataloading.NeighborSampler`` keeps them (the DataLoader
    never passes any): each copy is its own destination node (``dstdata[NID]`` repeats it, and so does
    the start of ``srcdata[NID]``) with its own in-edges; here both copies draw the same neighbours
    (the choice is keyed by node id).  Pass ``torch.unique(seeds)`` for one row per node.

    >>> g = dgl.graph(([1, 2, 0], [0, 0, 1]))
    >>> input_nodes, output_nodes, blocks = NeighborSampler([1, 2], seed=0).sample_blocks(g, torch.tensor([0]))
    >>> blocks[-1].dstdata[dgl.NID].tolist(), blocks[-1].num_edges()
    ([0], 2)
    """

    def __init__(self, fanouts, edge_dir="in", prob=None, replace=False, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, seed=None):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        self.fanouts = check_fanouts(fanouts)
        if edge_dir != "in":
            raise expected("edge_dir='in'", repr(edge_dir), "use dgl.dataloading.NeighborSampler for edge_dir='out'.")
        self.edge_dir = edge_dir
        if prob is not None and not isinstance(prob, str):
            raise expected("prob to be the name of an edata field", type(prob).__name__,
                           "store the weights with g.edata['p'] = w and pass prob='p'.")
        self.prob = prob
        self.replace = bool(replace)
        self.seed = resolve_seed(seed)
        self.calls = 0

    # -------------------------------------------------------------------------------- sampling
    def _next_seed(self) -> int:
        key = self.call_keys(self.calls)[0]
        self.calls += 1
        return key

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        check_homogeneous(g, HETERO_FIX)
        seed_nodes = single_type_seeds(seed_nodes)
        n = g.num_nodes()
        check_nodes(seed_nodes, n, "seed nodes")
        output_nodes = seed_nodes
        csr = in_csr(g)
        indptr = np64(csr.indptr)
        pairs = packed_pairs(g, csr)
        tab = None
        if self.prob is not None:
            if self.prob not in g.edata:
                raise expected(f"g.edata to have the prob field {self.prob!r}", f"fields {list(g.edata.keys())}",
                               f"set g.edata[{self.prob!r}] = weights.")
            p = g.edata[self.prob]
            check_prob(p, g.num_edges(), f"g.edata[{self.prob!r}]")
            tab = weight_tables(csr.indptr, csr.eids, p, indptr, np64(csr.eids))
        excl = excluded_edge_ids(exclude_eids)
        seed = self._next_seed()
        idtype = g.idtype
        cur = np64(seed_nodes)
        out_dev = seed_nodes.device if self.output_device is None else torch.device(self.output_device)
        blocks = []
        for step, fanout in enumerate(reversed(self.fanouts)):
            flat, counts = choose_positions(csr, cur, fanout, seed=seed, step=step, num_nodes=n, replace=self.replace,
                                            tables=tab, host_indptr=indptr)
            block, src_ids = make_block(flat, counts, cur, pairs, excl, n, idtype)
            blocks.insert(0, block)
            cur = src_ids
        if out_dev.type != "cpu":
            blocks = [b.to(out_dev) for b in blocks]
        input_nodes = blocks[0].srcdata[dgl.NID]
        return input_nodes, output_nodes, blocks
