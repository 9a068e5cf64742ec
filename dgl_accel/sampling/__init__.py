"""Samplers (transit-parallel engine, neighbour sampling, random walks) for dgl.dataloading."""

# Neighbour sampling (uniform / weighted neighbour choice and the multi-layer block sampler).
from .choice import neighbor_choice, weighted_neighbor_choice  # noqa: E402,F401
from .neighbor import NeighborSampler  # noqa: E402,F401
from .walks import multi_dimensional_random_walk, node2vec_random_walk, random_walk  # noqa: F401
