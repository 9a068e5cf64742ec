"""Hypothesis strategies for DGL graphs, blocks and features.

The graphs are the DGL-free edge lists of :mod:`.tensors` made into DGL graphs (same draws,
same edges); features and edge weights are :mod:`.tensors`' own.  Every generator shuffles node
labels and edge order, so kernels cannot rely on sorted COO, on isolated nodes being the last ids,
or on self-loops coming first.
"""

import dgl
import torch
from hypothesis import strategies as st

from .tensors import (
    IDTYPES,
    EdgeList,
    block_edge_lists,
    edge_lists,
    edge_weights,
    features,
    power_law_edge_lists,
)


def to_dgl(e: EdgeList):
    """The ``DGLGraph`` (a block when ``e.bipartite``) of an :class:`~.tensors.EdgeList`."""
    if e.bipartite:
        return dgl.create_block((e.src, e.dst), num_src_nodes=e.num_src, num_dst_nodes=e.num_dst,
                                idtype=e.src.dtype)
    return dgl.graph((e.src, e.dst), num_nodes=e.num_src, idtype=e.src.dtype)


def graphs(min_nodes=0, max_nodes=64, max_edges=256, idtypes=IDTYPES, self_loops=True, multi_edges=True):
    """Homogeneous `dgl.DGLGraph`: :func:`~.tensors.edge_lists` (its docstring lists the edge cases
    every run hits; tests/testing/test_strategies.py checks they occur)."""
    return edge_lists(min_nodes, max_nodes, max_edges, idtypes, self_loops, multi_edges).map(to_dgl)


def power_law_graphs(min_nodes=1100, max_nodes=2048, max_background_edges=1000,
                     hub_degree=(1025, 1100), max_in_hubs=2, max_out_hubs=2, idtypes=IDTYPES):
    """Zipf-degree `dgl.DGLGraph` with hubs above 1024 in- and out-neighbours:
    :func:`~.tensors.power_law_edge_lists`."""
    return power_law_edge_lists(min_nodes, max_nodes, max_background_edges, hub_degree, max_in_hubs,
                                max_out_hubs, idtypes).map(to_dgl)


def blocks(max_dst=32, max_extra_src=64, max_edges=256, idtypes=IDTYPES):
    """Bipartite message-flow graph (`dgl.create_block`) with num_src >= num_dst:
    :func:`~.tensors.block_edge_lists`."""
    return block_edge_lists(max_dst, max_extra_src, max_edges, idtypes).map(to_dgl)


def any_graph(idtypes=IDTYPES):
    """One of `graphs()`, `power_law_graphs()`, `blocks()` (union of their edge cases).

    Feature rows must be `g.num_src_nodes()` and output rows `g.num_dst_nodes()`, which
    is correct for both graphs and blocks."""
    return st.one_of(graphs(idtypes=idtypes), power_law_graphs(idtypes=idtypes),
                     blocks(idtypes=idtypes))


@st.composite
def graph_and_features(draw, graph_strategy=None, dim=st.integers(1, 32),
                       dtypes=(torch.float32,), non_contiguous=st.booleans()):
    """(g, feat), feat of shape [g.num_src_nodes(), dim]; the graph is from `any_graph()` unless
    `graph_strategy` is given."""
    g = draw(graph_strategy if graph_strategy is not None else any_graph())
    return g, draw(features(g.num_src_nodes(), dim=dim, dtypes=dtypes,
                            non_contiguous=non_contiguous))


__all__ = ["IDTYPES", "graphs", "power_law_graphs", "blocks", "any_graph", "features",
           "edge_weights", "graph_and_features"]
