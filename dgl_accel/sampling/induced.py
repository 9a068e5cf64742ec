"""Node-induced subgraphs of a DGL graph (GraphSAINT's subgraphs): the DGL adapter of
:mod:`dgl_accel.core.sampling.induced.subgraph` (which documents the construction), with the graph's
numpy in-CSR and half-CSR cached per graph.

Layout of the result (same contract as ``dgl.node_subgraph``): node ``i`` of the subgraph is
``nodes[i]`` (``ndata[dgl.NID]``), every edge of the parent between two chosen nodes appears once
(``edata[dgl.EID]`` = parent edge id); only the edge numbering differs from DGL's.
"""
from __future__ import annotations

import numpy as np

from ..core.sampling.induced import subgraph as core
from ..core.sampling.induced.subgraph import HalfCSR, InCSR
from ..graph.structure import cached, in_csr
from .blocks import new_subgraph, np_idtype

__all__ = ["cpu_in_csr", "half_csr", "induced_subgraph", "induced_subgraph_symmetric"]


def cpu_in_csr(g) -> InCSR:
    """The parent's in-CSR as numpy arrays (cached per graph; a CPU copy for GPU graphs)."""
    return cached(g, "saint.cpu_in_csr", lambda h: InCSR.from_structure(in_csr(h)))


def half_csr(g) -> HalfCSR | None:
    """The graph's :class:`~dgl_accel.core.sampling.induced.subgraph.HalfCSR` (cached), or None unless it is
    symmetric without parallel edges."""
    return cached(g, "saint.half_csr", lambda h: core.half_csr(cpu_in_csr(h)))


def induced_subgraph(g, nodes: np.ndarray, csr: InCSR | None = None):
    """``dgl.node_subgraph(g, nodes)`` for sorted unique int64 ``nodes``, without features.

    Returns ``(subgraph, parent_eids)`` with ``ndata[dgl.NID]`` / ``edata[dgl.EID]`` set; the
    subgraph is on the CPU (the caller moves it).

    >>> import dgl
    >>> sg, eids = induced_subgraph(dgl.graph(([1, 2, 0], [0, 1, 2])), np.array([0, 1]))
    >>> sg.num_nodes(), eids.tolist()
    (2, [0])
    """
    csr = cpu_in_csr(g) if csr is None else csr
    indptr, local_src, eids = core.induced_entries(csr.indptr, csr.indices, csr.eids, nodes, csr.num_nodes)
    return new_subgraph("csc", (indptr, local_src), int(nodes.shape[0]), g.idtype, nodes, eids), eids


def induced_subgraph_symmetric(g, nodes: np.ndarray, half: HalfCSR):
    """As :func:`induced_subgraph` for a graph with a :class:`~dgl_accel.core.sampling.induced.subgraph.HalfCSR`
    (COO built from half the entries; edge layout: kept half edges, reverses, self-loops)."""
    src, dst, eids = core.induced_symmetric_coo(half, nodes, np_idtype(g.idtype))
    return new_subgraph("coo", (src, dst), int(nodes.shape[0]), g.idtype, nodes, eids), eids
