"""PyG's graph inputs as the core's views, built once per graph and cached across calls.

A PyG model hands every layer the same ``edge_index``: a ``[2, E]`` integer tensor (row 0 the
sources, row 1 the targets: PyG's ``source_to_target`` flow) or a ``torch.sparse`` adjacency
``adj_t`` (CSR, or coalesced COO, of shape ``[num_targets, num_sources]``, its values the edge
weights).  :func:`edges_of` turns it into :class:`Edges` (the endpoints in edge-id order, their id
range read once) and :meth:`Edges.views` into the core's
:class:`~dgl_accel.core.aggregation.views.TensorGraph` for one ``(num_src, num_dst)``, whose CSR
views, groups and degree scales the core caches on it.

:class:`EdgeIndexCache` keeps the :class:`Edges` of the last :data:`CAPACITY` graphs (LRU), keyed by
the tensor's storage (data pointer, device, dtype, shape, strides) and its ``_version`` counter, so
an in-place change of ``edge_index`` is a new key and a new build, never a stale answer.  An entry
is dropped when the tensor it was built from is garbage-collected (a weak reference), so the cache
does not keep a finished mini-batch's graph alive; while it lives it holds views of that storage,
so the memory behind a key cannot be reused by another graph.  Inference tensors have no version
counter: they are converted on every call, never cached.  Whatever a layer derives from a graph
(GCN's normalised edges, GAT's self-loops) goes into :meth:`Edges.derived`, on the same entry.
"""
from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..core.aggregation.views import TensorGraph

CAPACITY = 64
INDEX_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)  # what PyG accepts
SPARSE_LAYOUTS = (torch.sparse_csr, torch.sparse_coo)


class Edges:
    """One graph's edges ``src[e] -> dst[e]`` (edge id ``e``: the column of ``edge_index``, or the
    entry of a sparse adjacency in storage order), with the id range checked against the node
    counts of every call (:meth:`check_ids`) and the core views per ``(num_src, num_dst)``."""

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, sparse: bool):
        self.src, self.dst, self.sparse = src, dst, sparse
        self.num_edges = int(src.numel())
        self.device = src.device
        # one read of the id range per graph (a device sync on CUDA), then every call compares ints
        both = torch.stack([src.min(), dst.min(), src.max(), dst.max()]).tolist() if self.num_edges else [0] * 4
        self.lowest, self.max_src, self.max_dst = min(both[0], both[1]), both[2], both[3]
        self._views: dict = {}
        self._derived: dict = {}
        self._lock = threading.Lock()

    def check_ids(self, num_src: int, num_dst: int) -> None:
        """PyG's IndexError for ids outside the node counts, with the fix, before any kernel runs."""
        if self.lowest < 0:
            raise IndexError(f"Found negative indices in 'edge_index' (got {self.lowest}). Expected node ids in "
                             f"[0, num_nodes). Fix: map the ids to row numbers of your node feature matrix.")
        for name, hi, n in (("source", self.max_src, num_src), ("target", self.max_dst, num_dst)):
            if self.num_edges and hi >= n:
                raise IndexError(f"Found {name} indices in 'edge_index' that are larger than {n - 1} (got {hi}). "
                                 f"Expected ids in [0, {n}): one row of the {name} node features per node. "
                                 f"Fix: pass features for every node (or a larger `size`).")

    def views(self, num_src: int, num_dst: int, homogeneous: bool) -> TensorGraph:
        """The core's graph over ``num_src`` sources and ``num_dst`` targets (one node set when
        ``homogeneous``), built once per size and cached here."""
        key = (num_src, num_dst, homogeneous)
        views = self._views.get(key)
        if views is None:
            with torch.inference_mode(False):  # cached tensors must serve later calls with autograd
                known = (self.lowest, self.max_src, self.max_dst)  # read once per graph, not per view
                if homogeneous:
                    views = TensorGraph(self.src, self.dst, num_nodes=num_src, id_range=known)
                else:
                    views = TensorGraph(self.src, self.dst, num_src=num_src, num_dst=num_dst, id_range=known)
            with self._lock:
                views = self._views.setdefault(key, views)
        return views

    def derived(self, key, build: Callable[[], Any]) -> Any:
        """``build()``'s result, kept on this graph's entry under ``key`` (built once)."""
        found = self._derived.get(key)
        if found is None:
            with torch.inference_mode(False):
                found = build()
            with self._lock:
                found = self._derived.setdefault(key, found)
        return found


def _as_ids(t: torch.Tensor) -> torch.Tensor:
    """Node ids in a dtype the core takes (int32/int64; PyG's smaller integer types widen),
    detached: a view would keep the tensor it came from alive (torch preserves a view's base)."""
    t = t.detach() if t.dtype in (torch.int32, torch.int64) else t.long()
    return t if t.is_contiguous() else t.contiguous()


def _build(edge_index: torch.Tensor) -> Edges:
    if edge_index.layout == torch.sparse_csr:  # adj_t: rows are targets
        crow, col = edge_index.crow_indices(), edge_index.col_indices()
        rows = torch.repeat_interleave(torch.arange(crow.numel() - 1, device=crow.device, dtype=crow.dtype),
                                       crow[1:] - crow[:-1])
        return Edges(_as_ids(col), _as_ids(rows), sparse=True)
    if edge_index.layout == torch.sparse_coo:
        idx = edge_index._indices()
        return Edges(_as_ids(idx[1]), _as_ids(idx[0]), sparse=True)
    return Edges(_as_ids(edge_index[0]), _as_ids(edge_index[1]), sparse=False)


def storage_key(t: torch.Tensor):
    """(data pointer, device, dtype, shape, strides, version) of a dense tensor; None where it has
    no version counter (an inference tensor)."""
    if t.is_inference():
        return None
    return (t.data_ptr(), t.device, t.dtype, tuple(t.shape), t.stride(), t._version)


def graph_key(edge_index: torch.Tensor):
    """The cache key of a dense ``edge_index`` or of a sparse adjacency (by its index tensors)."""
    if edge_index.layout == torch.sparse_csr:
        parts = (edge_index.crow_indices(), edge_index.col_indices())
    elif edge_index.layout == torch.sparse_coo:
        parts = (edge_index._indices(),)
    else:
        return storage_key(edge_index)
    keys = tuple(storage_key(p) for p in parts)
    return None if None in keys else (edge_index.layout, tuple(edge_index.shape)) + keys


class EdgeIndexCache:
    """LRU of :class:`Edges` by :func:`graph_key`, at most ``capacity`` entries, each dropped when
    its tensor is collected.  The collection callback only notes the key (it may run inside any
    allocation, even one made while the lock is held); the next lookup removes the noted entries."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._entries: collections.OrderedDict = collections.OrderedDict()  # key -> (Edges, finalizer)
        self._dead: list = []  # keys whose tensor was collected (list.append: safe from a GC callback)
        self._lock = threading.Lock()
        self.builds = 0  # how many graphs were converted (tests read it)

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._entries)

    def get(self, edge_index: torch.Tensor) -> Edges:
        key = graph_key(edge_index)
        if key is None:  # no version counter: convert every time
            return self._build(edge_index)
        with self._lock:
            self._purge()
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found[0]
        edges = self._build(edge_index)
        finalizer = weakref.finalize(edge_index, self._dead.append, key)
        finalizer.atexit = False
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:  # built twice at once by two threads: keep the newer
                old[1].detach()
            self._entries[key] = (edges, finalizer)
            while len(self._entries) > self.capacity:
                _, (_, oldest) = self._entries.popitem(last=False)
                oldest.detach()
        return edges

    def _build(self, edge_index: torch.Tensor) -> Edges:
        self.builds += 1
        with torch.inference_mode(False):
            return _build(edge_index)

    def _purge(self) -> None:
        """Drop the entries of collected tensors (under the lock)."""
        while self._dead:
            key = self._dead.pop()
            found = self._entries.get(key)
            if found is not None and not found[1].alive:  # not a newer entry under the same key
                del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            for _, finalizer in self._entries.values():
                finalizer.detach()
            self._entries.clear()
            self._dead.clear()


CACHE = EdgeIndexCache()


def edges_of(edge_index: torch.Tensor) -> Edges:
    """The (cached) :class:`Edges` of a checked ``edge_index`` or sparse adjacency.

    >>> import torch
    >>> ei = torch.tensor([[0, 1, 2], [1, 2, 1]])
    >>> g = edges_of(ei).views(3, 3, homogeneous=True)
    >>> g.csr("in").indptr.tolist(), edges_of(ei) is edges_of(ei)
    ([0, 0, 2, 3], True)
    """
    return CACHE.get(edge_index)


def sparse_values(adj: torch.Tensor) -> torch.Tensor:
    """The edge weights of a sparse adjacency in :class:`Edges`' edge-id order."""
    return adj.values() if adj.layout == torch.sparse_csr else adj._values()


__all__ = ["CAPACITY", "CACHE", "Edges", "EdgeIndexCache", "edges_of", "graph_key", "sparse_values"]
