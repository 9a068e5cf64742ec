"""Samplers for dgl.dataloading (the DGL adapter of :mod:`dgl_accel.core.sampling`): neighbour
sampling, bulk (matrix-based) neighbour sampling, layer sampling (FastGCN / LADIES), GraphSAINT
subgraph sampling, random walks and k-hop samples, plus the DGL-free choice primitives they run on.

One module per sampler family (:mod:`.neighbor`, :mod:`.bulk`, :mod:`.bulk_ladies`, :mod:`.layer`,
:mod:`.saint`, :mod:`.walks`, :mod:`.frontier`, :mod:`.khop`), with the shared pieces in
:mod:`.base` (per-call seeds) and :mod:`.blocks` (block / subgraph building, graph checks).
"""
from ..core.sampling.choice import neighbor_choice, weighted_neighbor_choice
from ..core.sampling.engine import classify, group_by_transit
from ..core.sampling.neighbor import choose_neighbors
from .bulk import BulkNeighborSampler
from .frontier import frontier_sample, frontier_sample_sequential
from .khop import KHopSamples, khop_sample
from .layer import FastGCNSampler, LADIESSampler
from .neighbor import NeighborSampler
from .saint import SAINTSampler
from .walks import multi_dimensional_random_walk, node2vec_random_walk, random_walk

__all__ = ["NeighborSampler", "BulkNeighborSampler", "SAINTSampler", "LADIESSampler", "FastGCNSampler", "random_walk",
           "node2vec_random_walk", "multi_dimensional_random_walk", "neighbor_choice", "weighted_neighbor_choice",
           "choose_neighbors", "classify", "group_by_transit", "frontier_sample", "frontier_sample_sequential",
           "khop_sample", "KHopSamples"]
