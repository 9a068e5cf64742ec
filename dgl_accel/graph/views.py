"""A DGL graph or block seen through the core's :class:`~dgl_accel.core.aggregation.views.GraphViews`.

Everything is cached per graph version (``structure.cached``), under the same names as before the
core moved out, so the samplers, policies and the op share one set of CSR views per graph.
"""
from __future__ import annotations

import torch

from ..core.aggregation.views import GraphViews
from . import dgl_kernels
from .structure import cached, check_graph, edges_by_id, in_csr, out_csr


def graph_facts(graph):
    """(num_src, num_dst, num_edges, device) after checking the graph once per graph version: DGL's
    Python accessors cost microseconds each, which matters for small graphs called every layer."""
    def build(g):
        check_graph(g, relation=True)
        return g.num_src_nodes(), g.num_dst_nodes(), g.num_edges(), g.device

    return cached(graph, "gspmm.facts", build)


class DGLGraphViews(GraphViews):
    """Views of ``graph`` (checked: homogeneous graph, one-relation block, or a uni-bipartite relation
    graph ``hg[etype]``, which aggregates like a block); cheap to build per call."""

    def __init__(self, graph):
        self.graph = graph
        self.num_src, self.num_dst, self.num_edges, self.device = graph_facts(graph)

    @property
    def idtype(self) -> torch.dtype:
        return self.graph.idtype

    @property
    def bipartite(self) -> bool:
        return self.graph.is_block or self.graph.is_unibipartite  # a block, or a relation hg[etype]

    def cached(self, name, build):
        return cached(self.graph, name, lambda _: build())

    def csr(self, direction: str):
        return in_csr(self.graph, relation=True) if direction == "in" else out_csr(self.graph, relation=True)

    def edges_by_id(self):
        return edges_by_id(self.graph)

    def in_degrees(self) -> torch.Tensor:
        return self.graph.in_degrees()

    def out_degrees(self) -> torch.Tensor:
        return self.graph.out_degrees()

    def graph_index(self, direction: str):
        """DGL's index of the adjacency (``"in"``) or of its reverse (``"out"``, cached)."""
        if direction == "in":
            return self.graph._graph
        return cached(self.graph, "gspmm.reverse_index", lambda g: g._graph.reverse())

    def native_spmm(self, direction, x, w):
        rows = self.num_dst if direction == "in" else self.num_src
        return dgl_kernels.spmm_sum(self.graph_index(direction), x, w, rows, self.num_edges)

    def native_sddmm(self, x, g, per_feat):
        return dgl_kernels.sddmm(self.graph._graph, x, g, per_feat)
