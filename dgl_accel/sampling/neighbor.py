"""``NeighborSampler``: DGL's multi-layer neighbour sampler on the counter-based choice primitive.

A drop-in for ``dgl.dataloading.NeighborSampler`` on homogeneous graphs and heterographs (the
latter in :mod:`.neighbor_hetero`): same constructor
arguments (plus ``seed``), same ``sample_blocks`` contract, and the prefetching / output-device /
``as_edge_prediction_sampler`` machinery inherited from ``dgl.dataloading.BlockSampler``.

Randomness is counter-based (see :mod:`dgl_accel.core.sampling.neighbor.choice`): call ``n`` of a sampler
built with ``seed=s`` uses the per-call seed ``mix(s, n)`` and ``step`` = layer index (0 = the layer
nearest the output nodes), so two samplers with the same seed produce the same blocks for the same
sequence of calls, on any device and in any batch composition of the transits.  Inside a
``torch.utils.data`` worker the worker id is mixed in too, so workers do not repeat each other.
The sampling is the core's (:func:`dgl_accel.core.sampling.neighbor.sample.sample_layers`, a typed
:class:`~dgl_accel.core.sampling.output.SamplerOutput`, built on the device for a CUDA graph); this
adapter reads the graph's fields and turns the layers into blocks.
"""
from __future__ import annotations

import dgl
import torch
from dgl.dataloading import BlockSampler

from ..core.sampling.arrays import np64
from ..core.sampling.checks import (
    check_fanouts,
    check_int,
    excluded_edge_ids,
    expected,
    single_type_seeds,
)
from ..core.sampling.neighbor.choice import weight_tables
from ..core.sampling.neighbor.sample import sample_layers
from ..core.sampling.seeds import CallSeeds
from ..graph.structure import in_csr
from .blocks import blocks_from_output, check_homogeneous, packed_pairs
from .errors import dgl_errors
from .neighbor_hetero import check_layer_fanouts, hetero_blocks, layer_fanouts

__all__ = ["NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler", "HETERO_FIX"]

HETERO_FIX = "use dgl.dataloading.NeighborSampler for heterographs"


@dgl_errors
class NeighborSampler(CallSeeds, BlockSampler):
    """Sample a fixed number of in-neighbours per node and layer, building DGL blocks (MFGs).

    Parameters are ``dgl.dataloading.NeighborSampler``'s, in its order and with its defaults (a
    positional call written for DGL means the same here); ours come after them, keyword-only:

    fanouts : list[int | dict]
        Neighbours per node for each layer, input layer first; -1 = all in-neighbours.  On a
        heterograph a layer may be a dict {etype: fanout} naming every edge type (canonical or plain
        names), as in DGL; an int applies to every edge type.  Heterographs (seeds a dict
        {ntype: ids}, ``prob``/``mask`` a field on every edge type, ``exclude_eids`` a dict per edge
        type) are sampled with all relations stacked as one CSR, see :mod:`.neighbor_hetero`.
    edge_dir : "in" only (sample in-edges, messages flow to the seeds).  "out" is refused: DGL
        2.1.0's own out-edge blocks are malformed (``to_block`` adds the sampled destinations as
        destination nodes of the layer, and the next layer's edges point past its destination
        count), so there is no behaviour to reproduce.
    prob : str, optional
        Name of an ``edata`` field of non-negative per-edge weights; zero-weight edges are never
        chosen.
    mask : str, optional
        Name of a boolean ``edata`` field: only edges whose mask is True can be picked, uniformly.
        As in DGL the field is used as the edge weights (a boolean one as 0/1), so it is exclusive
        with ``prob`` (multiply the two instead).
    replace : bool
        Sample with replacement (each node then gets exactly ``fanout`` edges when it has any
        positive-weight in-edge; repeated edges appear repeatedly in the block).
    prefetch_node_feats, prefetch_labels, prefetch_edge_feats, output_device :
        As in ``dgl.dataloading.BlockSampler``.
    fused : bool
        Accepted for DGL's signature and stored; it changes nothing here.  In DGL it picks the CPU
        kernel that samples and builds the block in one pass (requiring unique seeds); this sampler
        always works that way (choice and relabelling per layer straight into a CSC block), on every
        device, and keeps duplicated seeds either way.

    Keyword-only extras:

    seed : int, optional
        Sampler seed in [0, 2^64); default ``torch.randint(2**62, ())`` at construction, so
        ``torch.manual_seed`` makes runs reproducible.

    Block layout, as ``dgl.to_block(frontier, seeds)``: ``dstdata[NID]`` = the seeds in the given
    order; ``srcdata[NID]`` = the seeds first, then the other sampled sources in increasing id;
    ``edata[EID]`` = original edge ids, edges grouped by destination in seed order.  Blocks are built
    directly in CSC form (what in-edge message passing uses), so no format conversion happens later.

    Order of the non-seed sources, a decision against DGL 2.1.0: DGL lists them in first appearance
    in its own edge order, and that order is an implementation detail that differs between DGL's
    own paths (with fanout -1, where there is nothing random, the fused CPU kernel, DGL's default,
    and the unfused one return different source orders for the same seeds:
    ``tests/sampling/test_contract.py``), so DGL code cannot rely on it; what DGL's blocks do
    guarantee (the seeds first, in order, then every other sampled source once) holds here.
    Increasing id is kept because it is the order that all four relabelling twins (numpy, numba,
    bulk, Triton) produce in one pass and that the golden outputs pin, and it reads input
    features in ascending rows.

    ``exclude_eids`` (from ``as_edge_prediction_sampler(exclude=...)``): sampled edges whose id is
    excluded are dropped after the choice, so they never appear in a block, and a node whose chosen
    edges include excluded ones ends up with fewer than ``fanout`` edges even when other in-edges
    were available.  This is DGL 2.1.0's behaviour too (checked in
    ``tests/sampling/test_contract.py``: its CPU kernels, fused or not, drop excluded edges from the
    sampled frontier, and its GPU path applies ``EidExcluder`` to the frontier after sampling), so
    it is kept: excluding first would change the distribution a DGL user's code was tuned on.

    Duplicated seed nodes are kept, as ``dgl.dataloading.NeighborSampler`` keeps them (the DataLoader
    never passes any): each copy is its own destination node (``dstdata[NID]`` repeats it, and so does
    the start of ``srcdata[NID]``) with its own in-edges; here both copies draw the same neighbours
    (the choice is keyed by node id).  Pass ``torch.unique(seeds)`` for one row per node.

    >>> g = dgl.graph(([1, 2, 0], [0, 0, 1]))
    >>> input_nodes, output_nodes, blocks = NeighborSampler([1, 2], seed=0).sample_blocks(g, torch.tensor([0]))
    >>> blocks[-1].dstdata[dgl.NID].tolist(), blocks[-1].num_edges()
    ([0], 2)
    """

    def __init__(self, fanouts, edge_dir="in", prob=None, mask=None, replace=False, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, fused=True, *, seed=None):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        hetero = hasattr(fanouts, "__len__") and any(isinstance(f, dict) for f in fanouts)
        self.fanouts = check_layer_fanouts(fanouts) if hetero else check_fanouts(fanouts)
        if edge_dir != "in":
            raise expected("edge_dir='in'", repr(edge_dir), "use dgl.dataloading.NeighborSampler for edge_dir='out'.")
        self.edge_dir = edge_dir
        for name, field in (("prob", prob), ("mask", mask)):
            if field is not None and not isinstance(field, str):
                raise expected(f"{name} to be the name of an edata field", type(field).__name__,
                               f"store the values with g.edata['{name[0]}'] = values and pass {name}='{name[0]}'.")
        if prob is not None and mask is not None:
            raise expected("at most one of prob and mask (DGL's rule)", f"prob={prob!r} and mask={mask!r}",
                           "multiply the weights by the mask, g.edata['pm'] = p * m, and pass prob='pm'.")
        self.mask = mask
        self.prob = prob or mask  # as DGL: the mask is read as 0/1 weights
        self.replace = bool(replace)
        self.fused = bool(fused)
        self.init_seeds(seed)

    # -------------------------------------------------------------------------------- sampling
    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        if isinstance(g, dgl.DGLGraph) and not g.is_block and (len(g.ntypes) > 1 or len(g.canonical_etypes) > 1):
            return self._sample_hetero(g, seed_nodes, exclude_eids)
        check_homogeneous(g, HETERO_FIX)
        fanouts = [layer_fanouts(g, f)[g.canonical_etypes[0]] if isinstance(f, dict) else f for f in self.fanouts]
        seed_nodes = single_type_seeds(seed_nodes)
        csr = in_csr(g)
        tab = None
        if self.prob is not None:
            kind = "prob" if self.mask is None else "mask"
            if self.prob not in g.edata:
                raise expected(f"g.edata to have the {kind} field {self.prob!r}", f"fields {list(g.edata.keys())}",
                               f"set g.edata[{self.prob!r}] = {'weights' if kind == 'prob' else 'one bool per edge'}.")
            tab = weight_tables(csr.indptr, csr.eids, g.edata[self.prob], name=f"g.edata[{self.prob!r}]")
        excl = excluded_edge_ids(exclude_eids)
        host = (np64(csr.indptr), packed_pairs(g, csr)) if csr.device.type == "cpu" else None
        with self.counted_call() as key:  # only a call that sampled counts (a refused one leaves the sequence)
            out = sample_layers(csr, seed_nodes, fanouts, seed=key, replace=self.replace,
                                tables=tab, exclude=None if excl is None else torch.from_numpy(excl), host=host)
        blocks = blocks_from_output(out, g.idtype)
        out_dev = seed_nodes.device if self.output_device is None else torch.device(self.output_device)
        if out_dev.type != "cpu":
            blocks = [b.to(out_dev) for b in blocks]
        input_nodes = blocks[0].srcdata[dgl.NID]
        return input_nodes, seed_nodes, blocks

    def _sample_hetero(self, g, seed_nodes, exclude_eids):
        """``sample_blocks`` on a graph with several node or edge types (see :mod:`.neighbor_hetero`)."""
        blocks = hetero_blocks(g, seed_nodes, self.fanouts, key=self.next_key(), prob=self.prob,
                               replace=self.replace, exclude_eids=exclude_eids)
        if self.output_device is not None and torch.device(self.output_device).type != "cpu":
            blocks = [b.to(torch.device(self.output_device)) for b in blocks]
        return blocks[0].srcdata[dgl.NID], seed_nodes, blocks


MultiLayerNeighborSampler = NeighborSampler  # DGL's alias


@dgl_errors
class MultiLayerFullNeighborSampler(NeighborSampler):
    """Every in-neighbour in each of ``num_layers`` layers: ``NeighborSampler([-1] * num_layers,
    **kwargs)``, a drop-in for ``dgl.dataloading.MultiLayerFullNeighborSampler`` (same signature).

    >>> g = dgl.graph(([1, 2, 0], [0, 0, 1]))
    >>> MultiLayerFullNeighborSampler(1).sample_blocks(g, torch.tensor([0]))[2][0].num_edges()
    2
    """

    def __init__(self, num_layers, **kwargs):
        super().__init__([-1] * check_int(num_layers, "num_layers", 1, fix="pass the number of GNN layers, e.g. 2."),
                         **kwargs)
