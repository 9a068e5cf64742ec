"""Samplers for dgl.dataloading (the DGL adapter of :mod:`dgl_accel.core.sampling`): neighbour
sampling, bulk (matrix-based) neighbour sampling, layer sampling (FastGCN / LADIES), GraphSAINT
subgraph sampling, shaDow-GNN scopes (k-hop and PPR), random walks and k-hop samples, plus the
DGL-free choice primitives they run on.

One module per sampler family (:mod:`.neighbor`, :mod:`.bulk`, :mod:`.bulk_ladies`, :mod:`.layer`,
:mod:`.saint`, :mod:`.shadow`, :mod:`.walks`, :mod:`.frontier`, :mod:`.khop`), with the shared pieces in
:mod:`.base` (per-call seeds: the core's :class:`~dgl_accel.core.sampling.seeds.CallSeeds`),
:mod:`.lookahead` (the bulk samplers' hook into DGL's DataLoader), :mod:`.blocks` (block / subgraph
building, graph checks) and
:mod:`.errors` (every export raises :class:`DGLSamplingInputError`, a ``ValueError`` and a
``dgl.DGLError`` at once, for bad input).
"""

from ..core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
from ..core.sampling.neighbor import choice, engine
from ..core.sampling.neighbor import sample as core_neighbor
from .bulk import BulkNeighborSampler
from .errors import DGLSamplingInputError, dgl_errors
from .frontier import frontier_sample, frontier_sample_sequential
from .khop import KHopSamples, khop_sample
from .layer import FastGCNSampler, LADIESSampler
from .neighbor import MultiLayerFullNeighborSampler, MultiLayerNeighborSampler, NeighborSampler
from .saint import SAINTSampler
from .shadow import ShaDowKHopSampler, ShaDowPPRSampler, shadow_index
from .walks import multi_dimensional_random_walk, node2vec_random_walk, random_walk

# the DGL-free choice primitives, raising DGLSamplingInputError like every export here
neighbor_choice = dgl_errors(choice.neighbor_choice)
weighted_neighbor_choice = dgl_errors(choice.weighted_neighbor_choice)
classify, group_by_transit = dgl_errors(engine.classify), dgl_errors(engine.group_by_transit)
choose_neighbors = dgl_errors(core_neighbor.choose_neighbors)

__all__ = ["DGLSamplingInputError", "NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler",
           "BulkNeighborSampler", "SAINTSampler", "LADIESSampler",
           "FastGCNSampler", "random_walk", "node2vec_random_walk", "multi_dimensional_random_walk", "neighbor_choice",
           "weighted_neighbor_choice", "choose_neighbors", "classify", "group_by_transit", "frontier_sample",
           "frontier_sample_sequential", "khop_sample", "KHopSamples", "ShaDowKHopSampler", "ShaDowPPRSampler",
           "shadow_index"]
