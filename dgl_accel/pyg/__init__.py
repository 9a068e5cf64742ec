"""The PyG front door: dgl-accel's DGL-free core behind ``torch_geometric``'s own interfaces.

A second adapter beside the DGL one (``dgl_accel.nn``, ``dgl_accel.sampling``): it converts PyG's
inputs (``edge_index``, ``SparseTensor``/CSR, ``edge_weight``, bipartite ``(x_src, x_dst)``, ``size``)
to the core's graph views and the core's outputs back to PyG's layout; it never computes beside the
core and never imports DGL (import-linter contract ``pyg-dgl-free``).  torch-geometric is needed
only when these names are used: ``import dgl_accel`` never loads it, nor does ``import dgl_accel.pyg``
(the names below load on first use, PEP 562).

* ``swap(model)`` / ``unswap(model)``: the supported ``torch_geometric.nn`` layers of a model become
  dgl-accel's drop-ins in place, and back (:mod:`.swapping`, with a report of what was left alone);
* ``nn``: the drop-ins ``GCNConv``, ``SAGEConv``, ``GINConv``, ``GATConv``, ``GATv2Conv``, ``GraphConv``;
* ``graph``: ``edge_index`` -> the core's views, cached per graph;
* ``NeighborSampler``: the core's neighbour sampling as a ``torch_geometric.sampler.BaseSampler``
  for PyG's ``NodeLoader`` / ``LinkLoader`` / ``NeighborLoader(neighbor_sampler=...)``, no pyg-lib
  needed (:mod:`.sampler`);
* ``NeighborLoader``, ``LinkNeighborLoader``: PyG's loaders with PyG's signatures on that sampler
  (:mod:`.loader`): a user changes only the import.
"""
import importlib as _importlib

# name -> submodule that defines it; loaded on first access (each imports torch_geometric)
_LAZY = {"swap": "swapping", "unswap": "swapping", "SwapReport": "swapping",
         "GCNConv": "nn", "SAGEConv": "nn", "GINConv": "nn", "GATConv": "nn", "GATv2Conv": "nn", "GraphConv": "nn",
         "NeighborSampler": "sampler", "NeighborLoader": "loader", "LinkNeighborLoader": "loader"}
_SUBPACKAGES = ("nn", "graph", "swapping")


def __getattr__(name):
    if name in _LAZY:
        return getattr(_importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _SUBPACKAGES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dgl_accel.pyg' has no attribute {name!r}")


def __dir__():
    """The lazy names too (PEP 562), so ``dir()`` and tab completion show them before first use."""
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))


__all__ = ["swap", "unswap", "SwapReport", "GCNConv", "SAGEConv", "GINConv", "GATConv", "GATv2Conv", "GraphConv",
           "NeighborSampler", "NeighborLoader", "LinkNeighborLoader"]
