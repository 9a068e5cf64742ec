"""What the PyG attention drop-ins (:mod:`.gat_conv`, :mod:`.gatv2_conv`) share: the checks that
send a call to PyG, the graph with PyG's self-loops (derived once per graph and node count), and
PyG's tail (heads concatenated or averaged, residual, bias, the attention weights returned with
the edges they belong to)."""
from __future__ import annotations

import numbers

import torch
from torch_geometric.utils import add_self_loops, remove_self_loops

from ..graph import edges_of
from .inputs import check_device, features_reason, graph_reason, machinery_reason, node_sets, reduce_of


def attention_inputs(module, x, edge_index, edge_attr, size=None):
    """``(x_src, x_dst, pair, num_src, num_dst)`` of an attention layer's call after the checks,
    or the reason it goes to PyG (sparse adjacencies, ``edge_attr``, no target features, ...)."""
    why = machinery_reason(module) or graph_reason(edge_index, sparse_ok=False)
    if why is not None:
        return why
    if edge_attr is not None:
        return "edge_attr"
    if reduce_of(module) != "sum":
        return f"aggr {module.aggr!r}"
    p = module.dropout
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p < 1:
        return f"dropout {p!r} outside [0, 1)"
    pair = not isinstance(x, torch.Tensor)
    if pair and not (isinstance(x, (tuple, list)) and len(x) == 2 and x[0] is not None):
        return "features neither a tensor nor a pair (x_src, x_dst)"
    if pair and x[1] is None:
        return "a pair without target features"
    x_src, x_dst = x if pair else (x, x)
    why = features_reason(x_src, x_dst)
    if why is not None:
        return why
    if any(p.dtype != x_src.dtype for p in module.parameters() if not isinstance(p, torch.nn.UninitializedParameter)):
        return "parameters of another dtype than the features"
    check_device(edge_index, x_src, x_dst)
    num_src, num_dst = node_sets(x_src, x_dst, size)
    return x_src, x_dst, pair, num_src, num_dst


def attention_graph(module, edge_index, num_src: int, num_dst: int, pair: bool):
    """(the edges attention runs over, the core's views of them): ``edge_index`` itself, or with
    ``add_self_loops`` PyG's ``remove_self_loops`` then ``add_self_loops`` for the first
    min(num_src, num_dst) nodes, computed once per graph and kept with it."""
    edges = edges_of(edge_index)
    edges.check_ids(num_src, num_dst)  # PyG's IndexError before any work
    if module.add_self_loops:
        m = min(num_src, num_dst)
        edge_index = edges.derived(("attention_self_loops", m),
                                   lambda: add_self_loops(remove_self_loops(edge_index)[0], num_nodes=m)[0])
        edges = edges_of(edge_index)
    return edge_index, edges.views(num_src, num_dst, homogeneous=not pair)


def finish(module, out, res, add_bias: bool, graph, attention, return_attention_weights):
    """PyG's tail of an attention layer: heads concatenated ([N, H * C]) or averaged, plus the
    residual, plus the bias (unless already added), and ``(edge_index, alpha [E, H])`` when asked."""
    out = out.reshape(out.shape[0], module.heads * module.out_channels) if module.concat else out.mean(dim=1)
    if res is not None:
        out = out + res
    if add_bias and module.bias is not None:
        out = out + module.bias
    if return_attention_weights:
        return out, (graph, attention)
    return out


def attention_dropout(module) -> float:
    """The attention dropout of this call: the module's while training, none in evaluation."""
    return float(module.dropout) if module.training else 0.0


__all__ = ["attention_inputs", "attention_graph", "finish", "attention_dropout"]
