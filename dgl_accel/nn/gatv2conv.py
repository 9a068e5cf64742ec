"""Drop-in ``GATv2Conv``: DGL's module with its attention aggregation fused (issue 18).

DGL runs a GATv2 layer with E x H x D tensors: ``apply_edges`` (u_add_v) stores fs[u] + fd[v] for
every edge, then leaky_relu, the product with ``attn`` and its sum, ``edge_softmax`` and ``update_all``
with u_mul_e; backward keeps all of it.  Here :func:`dgl_accel.functional.gatv2_attention` does the
scores, the softmax and the weighted sum of the ``fc_src`` features in one op whose backward
recomputes the scores and the attention from per-node normalisers.  Everything around it (dropout on
features, the projections, ``share_weights``, residual, activation, DGL's zero-in-degree error) is DGL's
code path, unchanged; the same parameters and state_dict.

Where the fused op does not apply, ``super().forward()`` runs under ``dgl_accel.enabled()`` (its
edge softmax and aggregation still go through our routing where supported): attention dropout while
training (the fused GATv2 op has no dropout; the fused GAT op has), features with extra dimensions
``(N, *, D)``, graphs with several relations, and several heads narrower than 32 features on the
CPU, where the routed ops are faster (:mod:`dgl_accel.policies.attention`).
"""
from __future__ import annotations

import dgl.nn

from ..core.autocast import widened_output
from ..functional import gatv2_attention
from .fused_attention import FusedAttentionForward
from .inputs import plain_features


class GATv2Conv(FusedAttentionForward, dgl.nn.GATv2Conv):
    attention_op = "gatv2"

    def _fused_forward(self, graph, feat, get_attention):
        heads, out_feats = self._num_heads, self._out_feats
        if isinstance(feat, tuple):
            h_src, h_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
            feat_src = self.fc_src(h_src).view(-1, heads, out_feats)
            feat_dst = self.fc_dst(h_dst).view(-1, heads, out_feats)
        else:
            h_src = h_dst = self.feat_drop(feat)
            if graph.is_block:
                h_dst = h_dst[: graph.number_of_dst_nodes()]
            feat_src = self.fc_src(h_src).view(-1, heads, out_feats)
            if self.share_weights:
                feat_dst = feat_src[: h_dst.shape[0]]
            else:  # DGL projects every source row and keeps the destinations': the same rows
                feat_dst = self.fc_dst(h_dst).view(-1, heads, out_feats)
        attn = self.attn.to(feat_src.dtype)
        out = gatv2_attention(graph, feat_src, feat_dst, attn, self.leaky_relu.negative_slope,
                              return_attention=get_attention)
        rst, attention = out if get_attention else (out, None)
        rst = widened_output(rst)  # under autocast in fp32, as the peers' GATv2 (core.autocast.widened_output)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, out_feats)
        if self.activation:
            rst = self.activation(rst)
        return (rst, attention.unsqueeze(-1)) if get_attention else rst

    def _fused_applies(self, graph, feat) -> bool:
        """Whether the fused op computes exactly what DGL's forward would (see the module docstring)."""
        if self.training and self.attn_drop.p > 0:
            return False
        return plain_features(graph, feat)
