"""Drop-in ``torch_geometric.nn.GATv2Conv``: PyG's module (constructor, parameters, state_dict
keys, ``share_weights``) with the attention (scores sum_c att[h, c] leaky_relu(x_l[u] + x_r[v]),
softmax over each target's in-edges, weighted sum of ``x_l``) as one fused op of dgl-accel's core,
:func:`dgl_accel.core.attention.gatv2.gatv2_attention`, whose backward recomputes the scores instead
of keeping the E x H x C tensor x_l[u] + x_r[v] that PyG stores.

Around it PyG's steps: ``lin_l``/``lin_r`` (one module when ``share_weights``; a single tensor
shares the projection, a pair projects each side), the residual ``res``, ``add_self_loops`` (PyG's
``remove_self_loops``/``add_self_loops``, once per graph: :mod:`.attention`), heads concatenated or
averaged, the bias, and ``return_attention_weights`` (the edges with self-loops and the attention).
Under CPU autocast on the native path the projections run in bf16 and the attention in fp32
(:func:`.attention.attention_in_fp32`), as for GATConv.

Left to PyG's forward (``pyg.GATv2Conv: fallthrough: <reason>``): attention ``dropout`` while
training (the fused GATv2 op has none), ``edge_attr`` (``edge_dim``), sparse adjacencies, a pair
whose target features are None, features other than [N, F] floats of the parameters' dtype,
``aggr`` other than add, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and the
``target_to_source`` flow.
"""
from __future__ import annotations

import torch_geometric.nn as pyg_nn

from ...core.attention.gatv2 import gatv2_attention
from .attention import (
    attention_dropout,
    attention_graph,
    attention_in_fp32,
    attention_inputs,
    autocast_off,
    finish,
    in_fp32,
)
from .inputs import dropin, fall_back

PygGATv2Conv = pyg_nn.GATv2Conv


def _untraced(module, *args, **kwargs) -> str | None:
    """Attention dropout while training stays behind the compile boundary: PyG's forward, which runs
    then, breaks the graph itself (its self-loop handling: data-dependent shapes)."""
    return "attention dropout while training" if attention_dropout(module) > 0 else None


@dropin(PygGATv2Conv, "propagate", "edge_updater", untraced=_untraced)
class GATv2Conv(PygGATv2Conv):
    def forward(self, x, edge_index, edge_attr=None, return_attention_weights=None):
        found = attention_inputs(self, x, edge_index, edge_attr)
        if isinstance(found, str) or attention_dropout(self) > 0:
            why = found if isinstance(found, str) else "attention dropout while training"
            return fall_back(self, PygGATv2Conv, why, x, edge_index, edge_attr, return_attention_weights)
        x_src, x_dst, pair, num_src, num_dst = found
        heads, channels = self.heads, self.out_channels
        graph, views = attention_graph(self, edge_index, num_src, num_dst, pair)
        res = self.res(x_dst) if self.res is not None else None
        x_l = self.lin_l(x_src).view(-1, heads, channels)
        if not pair and self.share_weights:
            x_r = x_l
        else:
            x_r = self.lin_r(x_dst).view(-1, heads, channels)
        want = bool(return_attention_weights)
        widen = attention_in_fp32("gatv2", heads, channels, x_src)
        if widen:  # the products in bf16 (autocast's), the attention in fp32
            x_l, x_r = in_fp32(x_l, x_r)
        with autocast_off(widen):
            found = gatv2_attention(views, x_l, x_r, self.att, self.negative_slope, return_attention=want)
        out, attention = found if want else (found, None)
        return finish(self, out, res, True, graph, attention, return_attention_weights)


__all__ = ["GATv2Conv"]
