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

import copy
from dataclasses import dataclass, replace

import torch
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData, remote_backend_utils

from ..core.csr import Structure, sort_by_row
from ..core.sampling.arrays import np64
from ..core.sampling.checks import check_prob, expected
from ..core.sampling.neighbor.choice import WeightTables
from ..core.sampling.neighbor.hops import Relation
from ..core.sampling.neighbor.temporal import by_time

__all__ = ["SamplerGraph", "read_graph", "relation_csr", "with_weights", "with_times"]

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


def with_times(g: SamplerGraph, data, time_attr: str):
    """(``g`` with every relation's rows sorted by entry time, node times per node type or None)
    for PyG's ``time_attr``, read as PyG reads it: on a ``Data`` a node or an edge attribute; on a
    ``HeteroData`` node attributes (types without one are not constrained) or edge attributes;
    from a feature store the tensors of that name, node-level where the name is ``'time'`` (homogeneous)
    or they belong to node types.  An entry's time is its source node's or its edge's."""
    node_time, edge_time = _read_times(g, data, time_attr)
    rels = []
    for r, rel in enumerate(g.rels):
        if node_time is not None:
            t = node_time[rel.src]
            entry = _unconstrained(node_time, rel.csr.num_edges) if t is None else t[rel.csr.indices.long()]
        else:
            entry = edge_time[r][rel.csr.eids.long()]
        csr, times = by_time(rel.csr, entry.to(rel.csr.device))
        rels.append(Relation(csr, rel.src, rel.dst, times=times))
    return replace(g, rels=rels), node_time


def _read_times(g: SamplerGraph, data, time_attr: str):
    """(node times per node type, or None; edge times per relation, or None): exactly one is set."""
    if isinstance(data, Data):
        on_nodes = time_attr in data and data.is_node_attr(time_attr)
        on_edges = time_attr in data and data.is_edge_attr(time_attr)
        node_found, edge_found = [data[time_attr] if on_nodes else None], [data[time_attr] if on_edges else None]
    elif isinstance(data, HeteroData):
        node_found = [data[nt][time_attr] if time_attr in data[nt] else None for nt in g.node_types]
        edge_found = [data[et][time_attr] if time_attr in data[et] else None for et in g.edge_types]
    else:  # (FeatureStore, GraphStore)
        found = {}
        for attr in data[0].get_all_tensor_attrs():
            if attr.attr_name == time_attr:
                attr = copy.copy(attr)
                attr.index = None
                found[attr.group_name] = data[0].get_tensor(attr)
        if g.node_types is None:
            t = next(iter(found.values()), None)
            node_found, edge_found = ([t], [None]) if time_attr == "time" else ([None], [t])
        else:
            node_found = [found.get(nt) for nt in g.node_types]
            edge_found = [found.get(et) for et in g.edge_types]
    on_nodes, on_edges = any(t is not None for t in node_found), any(t is not None for t in edge_found)
    if on_nodes == on_edges:
        got = "both node and edge attributes" if on_nodes else "neither a node nor an edge attribute"
        raise expected(f"time_attr {time_attr!r} to name one time per node or one per edge", got,
                       f"set data.{time_attr} (per node) or an edge attribute of that name, one of the two.")
    if on_nodes:
        return [None if t is None else _times(t, n, f"node times {time_attr!r}")
                for t, n in zip(node_found, g.num_nodes)], None
    missing = [et for et, t in zip(g.edge_types or ["edges"], edge_found) if t is None]
    if missing:
        raise expected(f"edge times {time_attr!r} on every edge type", f"none on {missing}",
                       f"set {time_attr} on every edge type.")
    return None, [_times(t, rel.csr.num_edges, f"edge times {time_attr!r}") for t, rel in zip(edge_found, g.rels)]


def _times(t, n: int, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.numel() != n or t.dtype == torch.bool \
            or t.is_complex() or (t.is_floating_point() and not torch.isfinite(t).all()):
        got = f"{t.dtype} of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise expected(f"{what} as a 1-D tensor of {n} finite numbers", got,
                       f"store one time per {'node' if 'node' in what else 'edge'} (an int64 timestamp or a float).")
    return t


def _unconstrained(node_time: list, n: int) -> torch.Tensor:
    """Entry times of a source type without node times: the lowest value, so every limit admits them."""
    like = next(t for t in node_time if t is not None)
    low = torch.finfo(like.dtype).min if like.is_floating_point() else torch.iinfo(like.dtype).min
    return torch.full((n,), low, dtype=like.dtype, device=like.device)


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
