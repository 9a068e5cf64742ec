"""A DGL graph or block seen through the core's :class:`~dgl_accel.core.aggregation.views.GraphViews`.

Everything is cached per graph version (``structure.cached``), under the same names as before the
core moved out, so the samplers, policies and the op share one set of CSR views per graph.
"""
from __future__ import annotations

import weakref

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
    graph ``hg[etype]``, which aggregates like a block); cheap to build per call.

    The graph is held weakly.  Autograd keeps these views (``ctx``) until backward, and a strong
    reference would close a cycle that Python's collector cannot see, through the C++ autograd
    graph: graph -> its frames -> the op's output -> grad_fn -> ctx -> views -> graph.  DGL's
    modules run every layer in ``g.local_scope()``, a new graph object a call, so each training
    step would leak that graph with its features.  What the views fetched stays with them
    (CSR views, edge lists: plain tensors), and if the graph is gone when backward needs something
    new, it is built from a shell around the same structure index (no node or edge data)."""

    # DGL's CPU SpMM reads bf16 and sums it in fp32 (its error on a 5,000-entry hub row is the
    # fp32 sum's, within one bf16 ulp), at half the bytes of the widened input: under autocast
    # 2.2 vs 4.0 ms + the casts (Amazon-CS-sized rows, 64 features, one thread)
    native_dtypes = (torch.float32, torch.float64, torch.bfloat16)

    def __init__(self, graph):
        self._graph_ref = weakref.ref(graph)
        self._index = graph._graph
        self._kind = (type(graph), (graph.srctypes, graph.dsttypes) if graph.is_unibipartite else graph.ntypes,
                      graph.etypes)
        self._shell = None
        self._seen: dict = {}  # name -> what this object fetched (no graph inside)
        self.num_src, self.num_dst, self.num_edges, self.device = graph_facts(graph)
        self._idtype, self._bipartite = graph.idtype, graph.is_block or graph.is_unibipartite

    @property
    def graph(self):
        """The graph, or once it is gone a shell around its structure (see the class docstring)."""
        g = self._graph_ref()
        if g is not None and g._graph is self._index:
            return g
        if self._shell is None:
            cls, ntypes, etypes = self._kind
            self._shell = cls(self._index, ntypes, etypes)
        return self._shell

    def _fetch(self, name: str, build):
        if name not in self._seen:
            self._seen[name] = build()
        return self._seen[name]

    @property
    def idtype(self) -> torch.dtype:
        return self._idtype

    @property
    def bipartite(self) -> bool:
        return self._bipartite  # a block, or a relation hg[etype]

    def cached(self, name, build):
        return self._fetch(name, lambda: cached(self.graph, name, lambda _: build()))

    def csr(self, direction: str):
        return self._fetch(f"csr.{direction}", lambda: in_csr(self.graph, relation=True) if direction == "in"
                           else out_csr(self.graph, relation=True))

    def edges_by_id(self):
        return self._fetch("edges_by_id", lambda: edges_by_id(self.graph))

    def in_degrees(self) -> torch.Tensor:
        return self._fetch("in_degrees", lambda: self.graph.in_degrees())

    def out_degrees(self) -> torch.Tensor:
        return self._fetch("out_degrees", lambda: self.graph.out_degrees())

    def graph_index(self, direction: str):
        """DGL's index of the adjacency (``"in"``) or of its reverse (``"out"``, cached)."""
        if direction == "in":
            return self._index
        return self._fetch("reverse_index", lambda: cached(self.graph, "gspmm.reverse_index",
                                                           lambda g: g._graph.reverse()))

    def native_spmm(self, direction, x, w):
        rows = self.num_dst if direction == "in" else self.num_src
        return dgl_kernels.spmm_sum(self.graph_index(direction), x, w, rows, self.num_edges)

    def native_sddmm(self, x, g, per_feat):
        return dgl_kernels.sddmm(self._index, x, g, per_feat)
