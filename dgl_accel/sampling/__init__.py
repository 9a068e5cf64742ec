"""Samplers for dgl.dataloading: the transit-parallel engine, neighbour sampling, random walks,
layer sampling (FastGCN / LADIES), GraphSAINT subgraph sampling."""
from .bulk import BulkNeighborSampler
from .choice import neighbor_choice, weighted_neighbor_choice
from .engine import choose_neighbors, classify, group_by_transit
from .khop import KHopSamples, khop_sample
from .frontier import frontier_sample, frontier_sample_sequential
from .layer import FastGCNSampler, LADIESSampler
from .neighbor import NeighborSampler
from .saint import SAINTSampler
from .walks import multi_dimensional_random_walk, node2vec_random_walk, random_walk

__all__ = ["NeighborSampler", "BulkNeighborSampler", "SAINTSampler", "LADIESSampler", "FastGCNSampler", "random_walk", "node2vec_random_walk",
           "multi_dimensional_random_walk", "neighbor_choice", "weighted_neighbor_choice", "choose_neighbors",
           "classify", "group_by_transit", "frontier_sample", "frontier_sample_sequential",
           "khop_sample", "KHopSamples"]
