"""What the propagation drop-ins share (GCNConv's normalisation, SGConv, APPNP, LGConv): a graph
normalised by PyG's own ``gcn_norm`` once and kept with the graph, and weighted sums over it on the
core.

* :func:`propagation_reason`: why a call goes to PyG's forward (the machinery, the graph input
  kind, the features, the aggregation, edge weights the core does not take), or None.
* :func:`graph_of`: the checks before any kernel runs (devices, ``edge_weight``'s shape, the id
  range) and ``(edges, views, weight)`` of the input graph: its weights are ``edge_weight``, or a
  sparse adjacency's values.
* :func:`normalized`: ``gcn_norm(edge_index, edge_weight, ...)``.  The normalised structure (PyG's
  ``add_remaining_self_loops`` adds one self-loop per node whatever the weights) and its weights
  without ``edge_weight`` depend on the graph alone, so they are built once per graph, node
  count, option set and dtype and kept on the graph's cache entry (``Edges.derived``, shared by
  every layer of a model); with ``edge_weight`` the weights come from ``gcn_norm`` on every call
  (their gradient reaches ``edge_weight`` through it, as in PyG).  :func:`cached_normalized` adds
  PyG's ``cached=True`` (``_cached_edge_index``: the first call's normalisation serves every later
  call) for the layers that keep it there (GCNConv, APPNP).
* :func:`on_core`: the core's views of a normalised graph and its weights;
  :func:`propagation_graph`: the views and weights a layer's sums run on, normalised or not (under
  ``torch.compile`` the traced graph whose custom op reads the kept normalised graph and weights;
  on a graph whose nodes have as many out- as in-edges, :data:`BOTH`: the core's ``both`` degree
  norm in place of per-edge weights, scaled rows and an unweighted sum, half the time at 16
  features).
* :func:`untraced`: why a call under ``torch.compile`` stays behind the layer's compile boundary
  (PyG's ``cached`` state, weights normalised per call), or None.
* :func:`propagate`: one weighted sum (``u_mul_e``, or ``copy_u`` without weights) into every
  target on :func:`dgl_accel.core.aggregation.function.aggregate`; the K steps of a layer reuse
  one graph, whose transposed view (the backward's) the core caches on it.
"""
from __future__ import annotations

import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from ...core.aggregation.function import aggregate
from ..graph import edges_of, sparse_values, storage_key
from .inputs import (
    check_device,
    check_edge_weight,
    features_reason,
    gcn_detail,
    gcn_graph,
    graph_for,
    graph_reason,
    machinery_reason,
    reduce_of,
)

BOTH = "both"  # the weights of propagation_graph() where the core's degree norm stands for gcn_norm's
__all__ = ["BOTH", "propagation_reason", "graph_of", "normalized", "cached_normalized", "on_core", "propagation_graph",
           "balanced", "untraced", "propagate"]


def propagation_reason(module, x, edge_index, edge_weight) -> str | None:
    """Why this call runs PyG's forward, or None; raises PyG's ValueError on a malformed graph."""
    why = machinery_reason(module) or graph_reason(edge_index) or features_reason(x)
    if why is not None:
        return why
    if reduce_of(module) not in ("sum", "mean"):
        return f"aggr {module.aggr!r}"
    if edge_index.layout != torch.strided:
        if edge_weight is not None:  # PyG's spmm reads the adjacency's values only
            return "edge_weight with a sparse adjacency"
        values = sparse_values(edge_index)
        if values.requires_grad and torch.is_grad_enabled():
            return "sparse values that need a gradient"
        if values.dtype != x.dtype:
            return "sparse values of another dtype than the features"
    elif isinstance(edge_weight, torch.Tensor) and edge_weight.is_floating_point():
        if edge_weight.dim() != 1:
            return f"edge_weight of shape {list(edge_weight.shape)}"
        if edge_weight.dtype != x.dtype:  # PyG promotes the output's dtype
            return "edge_weight of another dtype than the features"
    return None


def graph_of(x: torch.Tensor, edge_index: torch.Tensor, edge_weight):
    """``(edges, views, weight)`` of a graph :func:`propagation_reason` passed, over ``x``'s rows,
    after the device, ``edge_weight`` and id-range checks (ValueError / PyG's IndexError)."""
    n = x.shape[0]
    check_device(edge_index, x, edge_weight)
    if edge_index.layout == torch.strided:
        check_edge_weight(edge_weight, edge_index.shape[1], x)
    edges, views = graph_for(edge_index, n, n, homogeneous=True)
    return edges, views, (sparse_values(edge_index) if edges.sparse else edge_weight)


def normalized(edges, edge_index, edge_weight, num_nodes: int, improved: bool, add_self_loops: bool, flow: str,
               dtype: torch.dtype):
    """``gcn_norm(edge_index, edge_weight, num_nodes, improved, add_self_loops, flow, dtype)``: the
    normalised graph (a sparse one carries its weights: then None) and its weights, the part that
    depends on the graph alone built once and kept with ``edges``."""
    args = (num_nodes, improved, add_self_loops, flow, dtype)
    if not edges.sparse:
        graph, weight = gcn_graph(edges, edge_index, args)  # the entry the traced graph reads too
    else:  # the values are part of the graph: a new key once they change in place
        key = ("gcn_norm", *args, storage_key(sparse_values(edge_index)))
        if None in key:  # inference-mode values: no version counter to key them by
            graph, weight = gcn_norm(edge_index, None, *args)
        else:
            graph, weight = edges.derived(key, lambda: gcn_norm(edge_index, None, *args))
    if edge_weight is not None:  # the same structure; the weights (and their gradient) from gcn_norm
        weight = gcn_norm(edge_index, edge_weight, *args)[1]
    return graph, weight


def cached_normalized(module, edges, edge_index, edge_weight, x: torch.Tensor, improved: bool = False):
    """:func:`normalized` with ``module.add_self_loops`` and ``module.flow`` as PyG's forward takes
    it: from ``module._cached_edge_index`` if PyG's ``cached`` filled it, else normalised (and kept
    there when ``module.cached``)."""
    if module._cached_edge_index is not None:
        return module._cached_edge_index
    graph, weight = normalized(edges, edge_index, edge_weight, x.shape[0], improved, module.add_self_loops,
                               module.flow, x.dtype)
    if module.cached:
        module._cached_edge_index = (graph, weight)
    return graph, weight


def on_core(graph: torch.Tensor, weight, num_nodes: int):
    """(the core's views, the edge weights) of a normalised graph: a sparse one's values when
    ``weight`` is None."""
    views = edges_of(graph).views(num_nodes, num_nodes, homogeneous=True)
    return views, (sparse_values(graph) if weight is None else weight)


def propagation_graph(module, x: torch.Tensor, edge_index, edge_weight, normalize: bool, add_self_loops: bool,
                      cached: bool, weights: bool = False, improved: bool = False):
    """(views, weights) of the graph a layer's sums run on: the input graph, or with ``normalize``
    ``gcn_norm``'s (``improved`` as GCNConv's; ``cached``: through :func:`cached_normalized`).  Where
    ``gcn_norm``'s weights are its degree factors alone (no ``edge_weight``, a dense graph, no
    ``cached``) on a graph whose every node has as many out- as in-edges (a symmetric graph:
    :func:`balanced`), the weights are :data:`BOTH`, the core's ``both`` norm, which scales the rows
    instead of reading a weight per edge (not where the caller needs them, ``weights``).  Under
    ``torch.compile`` (:func:`graph_of` gives a traced graph) the normalised graph is the traced
    graph's ``gcn_norm`` derivative, which carries its own weights (None here)."""
    edges, views, weight = graph_of(x, edge_index, edge_weight)
    if not normalize:
        return views, weight
    if getattr(views, "traced", False):  # untraced() kept edge_weight and cached behind the boundary
        return views.derived(gcn_detail(improved, add_self_loops, x.dtype), True), None
    if cached:
        graph, weight = cached_normalized(module, edges, edge_index, edge_weight, x, improved)
    else:
        graph, weight = normalized(edges, edge_index, edge_weight, x.shape[0], improved, add_self_loops, module.flow,
                                   x.dtype)
    views, weight = on_core(graph, weight, x.shape[0])
    plain = edge_weight is None and not edges.sparse and not cached and not weights
    return views, (BOTH if plain and balanced(graph, views) else weight)


def balanced(graph: torch.Tensor, views) -> bool:
    """Whether every node of the normalised ``graph`` has as many out-edges as in-edges (kept with
    the graph).  Then ``gcn_norm``'s weights without ``edge_weight``, ``d[src]^-1/2 d[dst]^-1/2`` of
    in-degrees ``d``, are the core's ``both`` norm (out-degrees at the source; a degree of 0, which
    the core counts as 1, belongs to a node without edges)."""
    return edges_of(graph).derived(("balanced", views.num_src),
                                   lambda: torch.equal(views.in_degrees(), views.out_degrees()))


def untraced(module, x, edge_index, edge_weight=None) -> str | None:
    """Why a call under ``torch.compile`` runs eagerly behind the compile boundary, or None: PyG's
    ``cached`` (state kept between calls), or ``edge_weight`` to normalise (weights per call)."""
    if getattr(module, "cached", False):
        return "cached"
    if getattr(module, "normalize", True) and edge_weight is not None:
        return "edge_weight with normalize"
    return None


def propagate(views, reduce: str, h: torch.Tensor, weight) -> torch.Tensor:
    """``reduce`` over the in-edges of every target of ``weight[e] * h[src]`` (``h[src]`` without
    weights; :data:`BOTH`: the core's ``both`` norm): PyG's ``propagate`` with
    ``message = edge_weight.view(-1, 1) * x_j``."""
    if isinstance(weight, str):
        return aggregate(views, "copy_u", reduce, h, norm=weight)
    return aggregate(views, "copy_u" if weight is None else "u_mul_e", reduce, h, weight)
