"""Samplers (transit-parallel engine, neighbour sampling, random walks) for dgl.dataloading."""
