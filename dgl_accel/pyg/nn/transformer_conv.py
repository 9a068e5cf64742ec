"""Drop-in ``torch_geometric.nn.TransformerConv`` (Shi et al., the graph transformer): PyG's module
(constructor, ``lin_key``/``lin_query``/``lin_value``/``lin_skip``/``lin_beta``, state_dict keys)
with the attention (scores <q_i, k_j> / sqrt(out_channels) per head, softmax over each target's
in-edges, weighted sum of the values) as one fused op of dgl-accel's core,
:func:`dgl_accel.core.attention.dot.dot_attention`, whose backward recomputes the attention instead
of keeping PyG's E x H x C messages (``query_i``, ``key_j``, ``value_j`` per edge).

PyG's forward step for step around it: ``x`` or ``(x_src, x_dst)``; q = ``lin_query(x_dst)``,
k = ``lin_key(x_src)``, v = ``lin_value(x_src)`` viewed [N, heads, out_channels]; heads
concatenated or averaged; with ``root_weight`` plus ``lin_skip(x_dst)``, or with ``beta`` the gate
sigmoid(``lin_beta``([out, x_r, out - x_r])) between them; ``return_attention_weights`` (any bool,
as PyG) returns ``(edge_index, alpha [E, heads])``.  Under CPU autocast the projections run in bf16
(autocast's) and so does the attention, as PyG's (its output is bf16 as PyG's is).  Under
``torch.compile`` the attention is the custom op ``torch.ops.dgl_accel.attention``
(``"dot_attention"``): no graph break; attention dropout while training traces PyG's forward (no
graph break either); ``return_attention_weights`` keeps the layer behind its compile boundary (run
eagerly).

Left to PyG's forward (``pyg.TransformerConv: fallthrough: <reason>``): ``edge_dim`` (``lin_edge``:
per-edge key and value terms) and ``edge_attr`` (PyG adds it to the values), attention ``dropout``
while training (PyG's ``F.dropout`` on alpha [E, H]: the fused dot op has no dropout to draw its
masks), sparse adjacencies (``torch.sparse``, ``SparseTensor``, ``EdgeIndex``), a pair whose target
features are None (PyG's own error), features other than [N, F] floats of the parameters' dtype
(under CPU autocast any float dtype but fp64 is taken), ``aggr`` other than add, and PyG's explain
mode, message passing hooks, ``decomposed_layers`` and the ``target_to_source`` flow.
"""
from __future__ import annotations

import math

import torch
import torch_geometric.nn as pyg_nn

from ...core.attention.dot import dot_attention
from ...core.autocast import autocast_dtype
from .inputs import (
    check_device,
    dropin,
    fall_back,
    features_reason,
    graph_for,
    graph_reason,
    is_lazy,
    machinery_reason,
    node_sets,
    reduce_of,
)

PygTransformerConv = pyg_nn.TransformerConv


EDGE_DIM = "edge_dim (per-edge key and value terms)"


def _untraced(module, x, edge_index, edge_attr=None, return_attention_weights=None) -> str | None:
    """Why a call stays behind the compile boundary under ``torch.compile`` (run eagerly): the
    attention weights asked for (any bool, as PyG), or ``lin_edge`` (PyG's forward runs)."""
    if isinstance(return_attention_weights, bool):
        return "return_attention_weights"
    return EDGE_DIM if module.lin_edge is not None else None


def _inputs(module, x, edge_index, edge_attr):
    """``(x_src, x_dst, pair, num_src, num_dst)`` after PyG's checks, or why the call goes to PyG.
    Under autocast (no fp64 tensor) features of another float dtype than the parameters are taken:
    the previous layer's bf16 output, which PyG's projections take there too."""
    if module.lin_edge is not None:
        return EDGE_DIM
    why = machinery_reason(module) or graph_reason(edge_index, sparse_ok=False)
    if why is not None:
        return why
    if edge_attr is not None:
        return "edge_attr (PyG adds it to the values)"
    if reduce_of(module) != "sum":
        return f"aggr {module.aggr!r}"
    if module.training and module.dropout != 0:
        return "attention dropout while training"
    pair = not isinstance(x, torch.Tensor)
    if pair and not (isinstance(x, (tuple, list)) and len(x) == 2 and x[0] is not None and x[1] is not None):
        return "features neither a tensor nor a pair (x_src, x_dst)"
    x_src, x_dst = x if pair else (x, x)
    why = features_reason(x_src, x_dst)
    if why is not None:
        return why
    dtypes = {p.dtype for p in module.parameters() if not is_lazy(p)} | {x_src.dtype}
    if len(dtypes) > 1 and (autocast_dtype(x_src.device.type) is None or torch.float64 in dtypes):
        return "parameters of another dtype than the features"
    check_device(edge_index, x_src, x_dst)
    num_src, num_dst = node_sets(x_src, x_dst, None)
    return x_src, x_dst, pair, num_src, num_dst


@dropin(PygTransformerConv, "propagate", untraced=_untraced)
class TransformerConv(PygTransformerConv):
    def forward(self, x, edge_index, edge_attr=None, return_attention_weights=None):
        found = _inputs(self, x, edge_index, edge_attr)
        if isinstance(found, str):
            return fall_back(self, PygTransformerConv, found, x, edge_index, edge_attr, return_attention_weights)
        x_src, x_dst, pair, num_src, num_dst = found
        heads, channels = self.heads, self.out_channels
        _, views = graph_for(edge_index, num_src, num_dst, homogeneous=not pair)
        query = self.lin_query(x_dst).view(-1, heads, channels)
        key = self.lin_key(x_src).view(-1, heads, channels)
        value = self.lin_value(x_src).view(-1, heads, channels)
        want = isinstance(return_attention_weights, bool)
        found = dot_attention(views, query, key, value, 1.0 / math.sqrt(channels), return_attention=want)
        out, alpha = found if want else (found, None)
        out = out.reshape(out.shape[0], heads * channels) if self.concat else out.mean(dim=1)
        if self.root_weight:
            x_r = self.lin_skip(x_dst)
            if self.lin_beta is not None:
                beta = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)).sigmoid()
                out = beta * x_r + (1 - beta) * out
            else:
                out = out + x_r
        return (out, (edge_index, alpha)) if want else out


__all__ = ["TransformerConv"]
