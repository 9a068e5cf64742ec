"""What the PyG attention drop-ins (:mod:`.gat_conv`, :mod:`.gatv2_conv`) share: the checks that
send a call to PyG, the graph with PyG's self-loops (derived once per graph and node count), and
PyG's tail (heads concatenated or averaged, residual, bias, the attention weights returned with
the edges they belong to)."""
from __future__ import annotations

import contextlib
import numbers

import torch

from ...core import backend
from ...core.autocast import autocast_dtype
from ...core.library import TracedGraph
from ...policies.attention import fused_min_dim
from ..graph import edges_of
from .inputs import (
    check_device,
    compiling,
    features_reason,
    graph_reason,
    machinery_reason,
    node_sets,
    reduce_of,
    self_loop_graph,
)


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
    if compiling():  # the graph as tensors for the custom ops (no return_attention_weights: no graph needed)
        traced = TracedGraph(edge_index, num_src, num_dst, not pair, "pyg")
        return None, traced.derived("self_loops") if module.add_self_loops else traced
    edges = edges_of(edge_index)
    edges.check_ids(num_src, num_dst)  # PyG's IndexError before any work
    if module.add_self_loops:
        edge_index = self_loop_graph(edges, edge_index, min(num_src, num_dst))
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


def attention_in_fp32(op: str, heads: int, channels: int, x: torch.Tensor) -> bool:
    """Under CPU autocast on the native path, for several narrow heads (fewer than
    :func:`~dgl_accel.policies.attention.fused_min_dim` features each, the DGL drop-ins' rule): the
    projection in the autocast dtype, the attention widened to fp32.  There the compiled loops run
    the attention in fp32 over twice as fast as in bf16 read as bits (the GAT model's evaluation on
    Flickr, one thread: 36 ms against 89 ms); with wide heads bf16 is the faster (GATv2 4 x 32 on
    Amazon-CS: 299 ms a step in bf16, 326 ms widened).  PyG's layers return fp32 under autocast
    either way (fp32 scores times bf16 features)."""
    return x.device.type == "cpu" and autocast_dtype("cpu") is not None and _narrow_native(op, heads, channels)


@torch.compiler.assume_constant_result  # under torch.compile: read once while tracing (a CPU table, the environment)
def _narrow_native(op: str, heads: int, channels: int) -> bool:
    """Several heads narrower than this CPU's fused width, on the native path."""
    return heads > 1 and channels < fused_min_dim(op) and backend.choose_path(torch.empty(0)) == "native"


def in_fp32(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` widened to fp32, still one tensor where they were one."""
    wide = a.float()
    return wide, wide if b is a else b.float()


def autocast_off(widen: bool):
    """The context the attention op runs in: autocast off where its inputs were widened."""
    return torch.autocast("cpu", enabled=False) if widen else contextlib.nullcontext()


__all__ = ["attention_inputs", "attention_graph", "finish", "attention_dropout", "attention_in_fp32", "in_fp32",
           "autocast_off"]
