"""The graph of :class:`dgl_accel.pyg.NeighborSampler`: PyG's ``Data``, ``HeteroData`` or
``(FeatureStore, GraphStore)`` read once into in-CSRs (:class:`dgl_accel.core.sampling.neighbor.hops.Relation`), on the
device the edges live on.

Each edge type's ``edge_index`` (COO, ``[2, E]``, row 0 the sources) is sorted by destination
(stable, :func:`dgl_accel.core.csr.sort_by_row`), so the CSR's ``eids`` are positions in that
``edge_index``: the sampled edge ids are the original ones and the sampler needs no
``edge_permutation`` (PyG's own sampler returns CSC positions and that permutation; NodeLoader and
LinkLoader map either form to the same ``e_id`` and edge attributes).  A graph store is read through
``GraphStore.coo()``: edge ids are positions in that COO, as PyG's ``e_id`` are for graph stores.

>>> import torch
>>> from torch_geometric.data import Data
>>> g = read_graph(Data(edge_index=torch.tensor([[1, 2, 0], [0, 0, 1]]), num_nodes=3))
>>> g.node_types, g.num_nodes, g.rels[0].csr.indptr.tolist(), g.rels[0].csr.eids.tolist()
(None, [3], [0, 2, 3, 3], [0, 1, 2])
"""
from __future__ import annotations

from ..core.extras import missing_extra

try:
    import torch_geometric  # noqa: F401  (first, so that without PyG the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

from dataclasses import dataclass, replace

import torch
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData, remote_backend_utils

from ..core.csr import Structure, sort_by_row
from ..core.sampling.arrays import np64
from ..core.sampling.checks import check_prob, expected
from ..core.sampling.neighbor.choice import WeightTables
from ..core.sampling.neighbor.hops import Relation

__all__ = ["SamplerGraph", "read_graph", "relation_csr", "with_weights"]

DATA_FIX = "pass a torch_geometric.data.Data, a HeteroData or a (FeatureStore, GraphStore) tuple."


@dataclass(frozen=True, eq=False)
class SamplerGraph:
    node_types: list | None   # None: homogeneous (one node type, one relation)
    edge_types: list | None   # None: homogeneous
    num_nodes: list[int]      # per node type
    rels: list[Relation]      # per edge type, in edge_types order


def relation_csr(edge_index, num_src: int, num_dst: int, name: str = "edge_index") -> Structure:
    """The in-CSR of one edge type's COO ``edge_index`` ([2, E] integer tensor, row 0 the sources,
    ids checked against ``num_src`` / ``num_dst``), on its device, ``eids`` its column positions."""
    if isinstance(edge_index, (tuple, list)) and len(edge_index) == 2:
        edge_index = torch.stack([torch.as_tensor(edge_index[0]), torch.as_tensor(edge_index[1])])
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2 \
            or edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        got = f"{edge_index.dtype} of shape {tuple(edge_index.shape)}" if isinstance(edge_index, torch.Tensor) \
            else type(edge_index).__name__
        raise expected(f"{name} to be a [2, num_edges] integer tensor (sources in row 0)", got,
                       "store the edges as torch.stack([src, dst]) (a SparseTensor adj_t is not read here).")
    row, col = edge_index[0], edge_index[1]
    if row.numel():
        lo_r, hi_r, lo_c, hi_c = torch.stack([*torch.aminmax(row), *torch.aminmax(col)]).tolist()  # one read
        if lo_r < 0 or hi_r >= num_src or lo_c < 0 or hi_c >= num_dst:
            raise expected(f"{name} sources in [0, {num_src}) and destinations in [0, {num_dst})",
                           f"sources in [{lo_r}, {hi_r}], destinations in [{lo_c}, {hi_c}]",
                           "set num_nodes (per node type) to cover every node id in the edges.")
    indptr, order = sort_by_row(col, num_dst)
    eids = order.to(row.dtype) if order.numel() < 2**31 else order  # the graph's idtype where it holds them
    return Structure(indptr, row[order], eids, num_dst, num_src, row.device)


def _num_nodes(store, name: str) -> int:
    n = store.num_nodes
    if n is None:
        raise expected(f"a node count for {name}", "None", f"set data[{name!r}].num_nodes (or its features x).")
    return int(n)


def read_graph(data) -> SamplerGraph:
    """Every edge type of ``data`` as an in-CSR (see the module docstring)."""
    if isinstance(data, Data):
        if "adj_t" in data or "adj" in data:
            raise expected("data.edge_index", "a SparseTensor adjacency (adj_t)",
                           "store the edges as data.edge_index = torch.stack([src, dst]).")
        n = _num_nodes(data, "data")
        edges = data.edge_index if "edge_index" in data else None  # none: a graph without edges, as PyG reads it
        edges = torch.empty(2, 0, dtype=torch.int64) if edges is None else edges
        return SamplerGraph(None, None, [n], [Relation(relation_csr(edges, n, n, "data.edge_index"), 0, 0)])
    if isinstance(data, HeteroData):
        node_types, edge_types = (list(x) for x in data.metadata())
        index = {nt: i for i, nt in enumerate(node_types)}
        nums = [_num_nodes(data[nt], nt) for nt in node_types]
        rels = []
        for et in edge_types:
            store = data[et]
            if "edge_index" not in store:
                raise expected(f"data[{et!r}].edge_index", f"an edge type without it (keys {list(store.keys())})",
                               "store every edge type as edge_index = torch.stack([src, dst]).")
            s, d = index[et[0]], index[et[-1]]
            rels.append(Relation(relation_csr(store.edge_index, nums[s], nums[d], f"data[{et!r}].edge_index"), s, d))
        return _one_device(SamplerGraph(node_types, edge_types, nums, rels))
    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], FeatureStore) \
            and isinstance(data[1], GraphStore):
        return _read_store(*data)
    raise expected("a graph", type(data).__name__, DATA_FIX)


def with_weights(g: SamplerGraph, data, weight_attr: str) -> SamplerGraph:
    """``g`` with weight tables on every relation, from the edge attribute ``weight_attr`` (one
    finite non-negative weight per edge, in ``edge_index`` order: PyG's ``data[weight_attr]``, per
    edge type on a ``HeteroData``), built once here."""
    if not isinstance(data, (Data, HeteroData)):
        raise NotImplementedError(f"dgl_accel.pyg.NeighborSampler does not support weighted sampling "
                                  f"(weight_attr={weight_attr!r}) on (FeatureStore, GraphStore) inputs, as PyG's "
                                  "own sampler does not. Fix: pass a Data or HeteroData, or drop weight_attr.")
    stores = [data] if isinstance(data, Data) else [data[et] for et in g.edge_types]
    names = ["data"] if isinstance(data, Data) else [f"data[{et!r}]" for et in g.edge_types]
    rels = []
    for rel, store, name in zip(g.rels, stores, names):
        if weight_attr not in store:
            raise expected(f"the edge attribute {name}.{weight_attr}", f"{name} without it (keys {list(store.keys())})",
                           f"set {name}.{weight_attr} = one weight per edge (all ones samples that type uniformly).")
        w = store[weight_attr]
        if isinstance(w, torch.Tensor) and w.dim() == 2 and w.shape[1] == 1:
            w = w.reshape(-1)  # an [E, 1] edge attribute, as edge weights are often stored
        check_prob(w, rel.csr.num_edges, f"{name}.{weight_attr}")
        rels.append(replace(rel, weights=WeightTables(np64(rel.csr.indptr), np64(rel.csr.eids), w)))
    return replace(g, rels=rels)


def _read_store(feature_store: FeatureStore, graph_store: GraphStore) -> SamplerGraph:
    """A graph store's edges through ``GraphStore.coo()`` (node counts as PyG's sampler finds them)."""
    attrs = graph_store.get_all_edge_attrs()
    if not attrs:
        raise expected("a graph store with edges", "no edge attributes", "put_edge_index(...) first.")
    if all(a.edge_type is None for a in attrs):  # homogeneous
        size = attrs[0].size
        if size is None:
            raise expected("the edge attribute's size", "None", "put_edge_index(..., size=(num_nodes, num_nodes)).")
        n = int(max(size))
        row, col, _ = graph_store.coo()
        return SamplerGraph(None, None, [n], [Relation(relation_csr((row, col), n, n), 0, 0)])
    edge_types = list(dict.fromkeys(a.edge_type for a in attrs))
    node_types = list(dict.fromkeys(t for et in edge_types for t in (et[0], et[-1])))
    index = {nt: i for i, nt in enumerate(node_types)}
    nums = [int(remote_backend_utils.size(feature_store, graph_store, nt)) for nt in node_types]
    rows, cols, _ = graph_store.coo(edge_types)
    rels = [Relation(relation_csr((rows[et], cols[et]), nums[index[et[0]]], nums[index[et[-1]]], f"edges {et!r}"),
                     index[et[0]], index[et[-1]]) for et in edge_types]
    return _one_device(SamplerGraph(node_types, edge_types, nums, rels))


def _one_device(g: SamplerGraph) -> SamplerGraph:
    devices = {rel.csr.device for rel in g.rels}
    if len(devices) > 1:
        raise expected("every edge type's edge_index on one device", f"devices {sorted(map(str, devices))}",
                       "move the graph to one device first, e.g. data.to('cuda').")
    return g
