"""Drop-in ``torch_geometric.nn.GATConv``: PyG's module (constructor, parameters, state_dict keys)
with the attention (scores, leaky ReLU, softmax over each target's in-edges, attention dropout,
weighted sum) as one fused op of dgl-accel's core, whose backward recomputes the attention instead
of storing E x H x C messages.

One feature tensor and one projection ``lin``: the whole layer's attention part is
:func:`dgl_accel.core.attention.gat.gat_layer` (``lin``'s product, the score halves from
``att_src``/``att_dst``, the fused attention, and the bias when the heads are concatenated and there
is no residual).  A pair ``(x_src, x_dst)``, or ``lin_src``/``lin_dst``: PyG's projections and score
halves, then :func:`dgl_accel.core.attention.gat.gat_attention`.  Around it PyG's steps: the
residual ``res``, heads concatenated or averaged, the bias, ``add_self_loops`` (PyG's own
``remove_self_loops``/``add_self_loops``, once per graph: :mod:`.attention`), ``size``, and
``return_attention_weights`` (the edges with self-loops and the attention [E, H] after dropout).
Under CPU autocast on the native path the projection runs in bf16 and the attention in fp32
(:func:`.attention.attention_in_fp32`).
Attention ``dropout`` while training: on the native CPU path the mask is drawn from torch's stream
where and as PyG's ``F.dropout`` draws it (the same numbers as PyG from one ``torch.manual_seed``);
on the Triton kernels, and under ``torch.compile`` (inside the custom op, no graph break), it is a
hash of edge id, head and a seed drawn from torch's generator (PyG's distribution, not its mask).

Left to PyG's forward (``pyg.GATConv: fallthrough: <reason>``): ``edge_attr`` (``edge_dim``),
sparse adjacencies, a pair whose target features are None, features other than [N, F] floats of
the parameters' dtype, ``aggr`` other than add, and PyG's explain mode, message passing hooks,
``decomposed_layers`` and the ``target_to_source`` flow.
"""
from __future__ import annotations

import torch
import torch_geometric.nn as pyg_nn

from ...core.attention.gat import gat_attention, gat_layer
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

PygGATConv = pyg_nn.GATConv


@dropin(PygGATConv, "propagate", "edge_updater")
class GATConv(PygGATConv):
    def forward(self, x, edge_index, edge_attr=None, size=None, return_attention_weights=None):
        found = attention_inputs(self, x, edge_index, edge_attr, size)
        if isinstance(found, str):
            return fall_back(self, PygGATConv, found, x, edge_index, edge_attr, size, return_attention_weights)
        x_src, x_dst, pair, num_src, num_dst = found
        heads, channels = self.heads, self.out_channels
        graph, views = attention_graph(self, edge_index, num_src, num_dst, pair)
        want = bool(return_attention_weights)
        res = self.res(x_dst) if self.res is not None else None
        widen = attention_in_fp32("gat", heads, channels, x_src)
        if widen or pair or self.lin is None or isinstance(self.lin.weight, torch.nn.UninitializedParameter):
            fuse_bias = False
            lin_src, lin_dst = (self.lin, self.lin) if self.lin is not None else (self.lin_src, self.lin_dst)
            h_src = lin_src(x_src).view(-1, heads, channels)
            h_dst = h_src if x_dst is x_src and lin_dst is lin_src else lin_dst(x_dst).view(-1, heads, channels)
            if widen:  # the products in bf16 (autocast's), the attention in fp32
                h_src, h_dst = in_fp32(h_src, h_dst)
            alpha_src = (h_src * self.att_src).sum(dim=-1)  # PyG's score halves
            alpha_dst = (h_dst * self.att_dst).sum(dim=-1)
            with autocast_off(widen):
                found = gat_attention(views, h_src, alpha_src, alpha_dst, self.negative_slope, return_attention=want,
                                      dropout=attention_dropout(self))
        else:
            fuse_bias = self.concat and res is None
            found = gat_layer(views, x_src, self.lin.weight, self.att_src, self.att_dst,
                              self.bias if fuse_bias else None, self.negative_slope, attention_dropout(self),
                              return_attention=want)
        out, attention = found if want else (found, None)
        return finish(self, out, res, not fuse_bias, graph, attention, return_attention_weights)


__all__ = ["GATConv"]
