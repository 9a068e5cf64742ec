"""Cached CSR views of a DGL graph's adjacency, for kernels that aggregate per node.

``in_csr(g)`` groups in-edges by destination (rows = dst nodes, used by forward
aggregation); ``out_csr(g)`` groups out-edges by source (rows = src nodes, used by the
backward pass w.r.t. source features).  Results are cached per graph object (and, while
dgl-accel is enabled, per graph a relation view ``g[etype]`` was cut from) and rebuilt when the
graph is mutated in place (``add_edges`` / ``remove_edges`` / ``add_nodes`` ...).
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from dgl import DGLError
from dgl.heterograph_index import HeteroGraphIndex

from ..core.csr import Structure, sort_by_row

__all__ = ["Structure", "in_csr", "out_csr", "cache_info", "clear_cache", "check_graph", "is_relation_graph",
           "is_supported_graph", "relation_in_csr", "relation_out_csr"]


def is_relation_graph(g) -> bool:
    """True for a uni-bipartite relation graph that is not a block: one edge type from one node type
    to another (``hg[etype]`` of a heterograph, as ``dgl.nn.HeteroGraphConv`` passes it).  For
    aggregation it is a block: rows = destination nodes, columns = source nodes."""
    return (g.is_unibipartite and not g.is_block and len(g.canonical_etypes) == 1
            and len(g.srctypes) == 1 and len(g.dsttypes) == 1)


def is_supported_graph(g, *, relation: bool = False) -> bool:
    """What :func:`check_graph` accepts (``relation=True``: the aggregation's wider set)."""
    if len(g.canonical_etypes) != 1:
        return False
    # A block has two node types ('_N' src and '_N' dst), so is_homogeneous is False for it.
    return g.is_block or len(g.ntypes) == 1 or (relation and is_relation_graph(g))


def check_graph(g, *, relation: bool = False) -> None:
    """Raise ValueError unless ``g`` is a homogeneous graph or a block with one edge type.

    ``relation=True`` (the aggregation ops) also accepts a uni-bipartite relation graph
    (:func:`is_relation_graph`).  The samplers, walks and policies keep the default: they need
    one node set, which a relation between two node types does not have.
    """
    if is_supported_graph(g, relation=relation):
        return
    got = f"got node types {list(g.ntypes)} and edge types {list(g.canonical_etypes)}"
    if relation:
        raise ValueError(
            f"expected a homogeneous graph or block with one edge type, or a relation graph with one edge "
            f"type from one node type to another ({got}). Fix: pass one relation's subgraph g[etype] "
            f"(as dgl.nn.HeteroGraphConv does), or convert with dgl.to_homogeneous(g).")
    why = (" A relation between two node types works for aggregation (gspmm, the nn layers), not here: "
           "this needs one node set." if is_relation_graph(g) else "")
    raise ValueError(
        f"expected a homogeneous graph or block with one edge type ({got}).{why} Fix: convert it first, "
        f"e.g. dgl.to_homogeneous(g), or pass one relation g[etype] whose source and destination node "
        f"types are the same."
    )


# ---------------------------------------------------------------------------------- cache
# Keyed weakly by the DGLGraph so cached tensors die with the graph.  DGLGraph uses
# identity hashing, so two equal-looking graphs never share an entry.
_CACHE: weakref.WeakKeyDictionary[Any, _Entry] = weakref.WeakKeyDictionary()
# Relation views (below): (id(the index they were cut from), relation ids) -> entry, dropped with that index.
_VIEW_CACHE: dict[tuple, _Entry] = {}
_LOCK = threading.Lock()
_STATS = {"hits": 0, "misses": 0, "invalidations": 0}


class _Entry:
    __slots__ = ("index_ref", "items", "__weakref__")

    def __init__(self, index, on_death=None):
        # Every in-place mutation (add_edges, remove_edges, add_nodes, remove_nodes) replaces
        # g._graph with a new index object.  A weakref to the old index (not its id(), which
        # CPython may reuse for the replacement) detects that without keeping the old structure
        # alive.  This check runs on every cached lookup, i.e. on every op call: it must stay
        # O(1) and avoid DGL's Python accessors (num_edges() & co. cost ~2 us each).
        self.index_ref = weakref.ref(index, on_death)
        self.items: dict[str, Any] = {}


# ------------------------------------------------------------------------- relation views
# DGL's update_all (and so every dgl.nn layer under enable()) runs on g[etype]: a new DGLGraph
# around a new index (HeteroGraphIndex.get_relation_graph) on every call, so a cache keyed by the
# graph object never hits there.  While dgl-accel is enabled, get_relation_graph records which
# index and relation each new index was cut from (record_relation_views), and the cache keys such
# a view by (that index, relation): one entry per graph version, freed with the index it was cut
# from (the user's graph, or its old version after a mutation).  The links are pruned when dead.
_ORIGINAL_GET_RELATION_GRAPH = HeteroGraphIndex.get_relation_graph
_VIEW_OF: dict[int, tuple] = {}  # id(view index) -> (its weakref, weakref of its root index, relation ids)
VIEW_LINKS_PRUNE = 256  # prune dead links whenever this many more have been recorded


def _recording_get_relation_graph(self, etype):
    view = _ORIGINAL_GET_RELATION_GRAPH(self, etype)
    with _LOCK:
        if len(_VIEW_OF) >= VIEW_LINKS_PRUNE:
            for key in [k for k, (ref, _, _) in _VIEW_OF.items() if ref() is None]:
                del _VIEW_OF[key]
        # linked to the root at once: a view of a view outlives the middle one (autograd keeps it)
        root, etids = _root(self)
        _VIEW_OF[id(view)] = (weakref.ref(view), weakref.ref(root), etids + (int(etype),))
    return view


def record_relation_views(active: bool) -> None:
    """Patch (or restore) DGL's ``HeteroGraphIndex.get_relation_graph`` to record its views."""
    HeteroGraphIndex.get_relation_graph = _recording_get_relation_graph if active else _ORIGINAL_GET_RELATION_GRAPH


def _root(index) -> tuple[Any, tuple]:
    """(the graph index a view index was cut from, the relation ids on the way), or (index, ()) for
    one that is not a recorded view (or whose root is gone); under _LOCK."""
    link = _VIEW_OF.get(id(index))
    if link is None or link[0]() is not index or (root := link[1]()) is None:
        return index, ()
    return root, link[2]


def _drop_view_entry(key, ref) -> None:
    # weakref callback: no lock (it may run while _LOCK is held); dict ops are atomic
    if (entry := _VIEW_CACHE.get(key)) is not None and entry.index_ref is ref:
        _VIEW_CACHE.pop(key, None)


def _entry(g) -> tuple[_Entry, Any, Any]:
    """(entry, its table, its key) for this graph's current version, under _LOCK."""
    index, etids = _root(g._graph)
    table, key = (_VIEW_CACHE, (id(index), etids)) if etids else (_CACHE, g)
    entry = table.get(key)
    if entry is not None and entry.index_ref() is not index:
        _STATS["invalidations"] += 1
        entry = None
    if entry is None:
        on_death = (lambda ref, k=key: _drop_view_entry(k, ref)) if etids else None
        entry = table[key] = _Entry(index, on_death)
    return entry, table, key


def cached(g, name: str, build: Callable[[Any], Any]) -> Any:
    """Return ``build(g)`` cached under ``name`` for this graph's current version (a relation view
    ``g[etype]`` made while enabled shares the entry of the graph it was cut from)."""
    with _LOCK:
        entry, table, key = _entry(g)
        if name in entry.items:
            _STATS["hits"] += 1
            return entry.items[name]
        _STATS["misses"] += 1
    value = build(g)  # outside the lock: building can be slow; a racing duplicate is harmless
    with _LOCK:
        if table.get(key) is entry and entry.index_ref() is not None:
            return entry.items.setdefault(name, value)
    return value


def cache_info() -> dict:
    """Counters, the number of graphs currently cached and of relation views cached by the graph
    they were cut from (for tests and debugging)."""
    with _LOCK:
        return dict(_STATS, graphs=len(_CACHE), relation_views=len(_VIEW_CACHE))


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
        _VIEW_CACHE.clear()
        for k in _STATS:
            _STATS[k] = 0


# ---------------------------------------------------------------------------------- build
def _adj(g, fmt: str):
    """(indptr, indices, eids) from DGL, or from COO when the graph's formats exclude fmt."""
    try:
        # DGL materialises the format inside its own index (as update_all would); the
        # graph's features and edges are untouched.
        return g.adj_tensors(fmt)
    except DGLError:
        pass
    # The graph was restricted with g.formats(...) so DGL refuses to build fmt: sort its
    # edge list ourselves.  CSR/CSC-only graphs can only list edges in "srcdst" order.
    try:
        src, dst, eid = g.edges(form="all", order="eid")
    except DGLError:
        src, dst, eid = g.edges(form="all", order="srcdst")
    rows, cols, n = (dst, src, g.num_dst_nodes()) if fmt == "csc" else (src, dst, g.num_src_nodes())
    indptr, order = sort_by_row(rows, n)
    return indptr, cols[order], eid[order]


def _build(g, fmt: str) -> Structure:
    indptr, indices, eids = _adj(g, fmt)
    n_e = g.num_edges()
    if eids.numel() == 0 and n_e > 0:
        # DGL documents an empty eid tensor as "edge ids are 0..E-1 in order".
        eids = torch.arange(n_e, dtype=g.idtype, device=indices.device)
    num_rows, num_cols = (
        (g.num_dst_nodes(), g.num_src_nodes()) if fmt == "csc" else (g.num_src_nodes(), g.num_dst_nodes())
    )
    return Structure(
        indptr=indptr.to(torch.int64),
        indices=indices.to(g.idtype),
        eids=eids.to(g.idtype),
        num_rows=int(num_rows),
        num_cols=int(num_cols),
        device=g.device,
    )


def in_csr(g, *, relation: bool = False) -> Structure:
    """In-edges grouped by destination: rows = dst nodes, ``indices`` = source ids.  ``relation=True``
    also takes a uni-bipartite relation graph (for aggregation; see :func:`check_graph`)."""
    check_graph(g, relation=relation)  # fail fast even on a cache hit for a graph object that is now invalid
    return cached(g, "in_csr", lambda h: _build(h, "csc"))


def out_csr(g, *, relation: bool = False) -> Structure:
    """Out-edges grouped by source: rows = src nodes, ``indices`` = destination ids (``relation``:
    as in :func:`in_csr`)."""
    check_graph(g, relation=relation)
    return cached(g, "out_csr", lambda h: _build(h, "csr"))


def structure_id(g) -> tuple:
    """Identity of the adjacency behind ``g``, equal for every view of the same graph.

    DGL hands message-passing code a fresh view object on each call (``update_all`` runs on
    ``g[etype]``, a new DGLGraph around a new index sharing the same C++ unit graph), so neither
    the DGLGraph nor its ``_graph`` identifies the structure.  The in-CSR arrays DGL stores in the
    unit graph do: their addresses are shared by all views and differ between live graphs.
    Costs one C call (~20 us): use it where a per-call check is worth that, not on every op.
    """
    sizes = (g.num_src_nodes(), g.num_dst_nodes())
    for transpose in (True, False):  # CSC, else CSR: whichever the graph is allowed to hold
        try:
            arrays = g._graph.adjacency_matrix_tensors(0, transpose, "csr")[2:]
        except DGLError:
            continue
        return ("csr", transpose) + tuple(a.data_ptr() for a in arrays if a.numel()) + sizes
    # COO only: edges() hands out the stored (src, dst) arrays themselves (its eids are made anew).
    src, dst = g._graph.edges(0, "eid")[:2]
    return ("coo", src.data_ptr(), dst.data_ptr()) + sizes


def edges_by_id(g):
    """(src, dst) of every edge in edge-id order, cached; works whatever sparse formats the graph
    is restricted to (``g.edges(order="eid")`` refuses CSR/CSC-only graphs)."""
    def build(graph):
        try:
            return graph.edges(order="eid")
        except DGLError:
            src, dst, eid = graph.edges(form="all", order="srcdst")
            by_id_src, by_id_dst = torch.empty_like(src), torch.empty_like(dst)
            by_id_src[eid.long()], by_id_dst[eid.long()] = src, dst
            return by_id_src, by_id_dst

    return cached(g, "structure.edges_by_id", build)


def relation_in_csr(g, etype) -> Structure:
    """In-edges of one relation ``etype`` (canonical or plain name) of a heterograph, grouped by
    destination: rows = destination-type nodes, ``indices`` = source-type ids, ``eids`` = the
    relation's edge ids.  Cached on ``g`` per canonical edge type (``g[etype]`` is a new view object
    on every call, so caching on it would never hit)."""
    return _relation_structure(g, etype, "csc")


def relation_out_csr(g, etype) -> Structure:
    """Out-edges of one relation of a heterograph, grouped by source: rows = source-type nodes,
    ``indices`` = destination-type ids (cached as :func:`relation_in_csr`)."""
    return _relation_structure(g, etype, "csr")


def _relation_structure(g, etype, fmt: str) -> Structure:
    canonical = g.to_canonical_etype(etype)
    name = "in_csr" if fmt == "csc" else "out_csr"
    return cached(g, f"{name}:{'/'.join(canonical)}", lambda h: _build(h[canonical], fmt))
