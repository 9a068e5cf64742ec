"""Drop-in ``DotGatConv``: DGL's module with its dot-product attention fused (issue 18).

DGL runs the layer as three graph passes with E x H tensors between them (``apply_edges`` with
u_dot_v for the scores, ``edge_softmax``, ``update_all`` with u_mul_e) and, in backward, E x H x D
messages.  Here :func:`dgl_accel.functional.dot_attention` does the scores (divided by
sqrt(out_feats), as DGL does), the softmax and the weighted sum in one op whose backward recomputes the
attention from per-node normalisers.  The projections and DGL's zero-in-degree error are DGL's code
path, unchanged; the same parameters and state_dict.

Where the fused op does not apply, ``super().forward()`` runs under ``dgl_accel.enabled()``:
features with extra dimensions ``(N, *, D)`` or not floating point, a pair of features on a module
built with one input size (DGL's own error), graphs with several relations.
"""
from __future__ import annotations

import dgl.nn

from ..functional import dot_attention
from .fused_attention import FusedAttentionForward
from .inputs import plain_features


class DotGatConv(FusedAttentionForward, dgl.nn.DotGatConv):
    attention_op = "dot"

    def _fused_forward(self, graph, feat, get_attention):
        heads, out_feats = self._num_heads, self._out_feats
        if isinstance(feat, tuple):
            feat_src = self.fc_src(feat[0]).view(-1, heads, out_feats)
            feat_dst = self.fc_dst(feat[1]).view(-1, heads, out_feats)
        else:
            feat_src = feat_dst = self.fc(feat).view(-1, heads, out_feats)
            if graph.is_block:
                feat_dst = feat_src[: graph.number_of_dst_nodes()]
        # DGL: edge_softmax(u_dot_v(ft, ft) / out_feats ** 0.5), then u_mul_e(ft, sa) summed
        out = dot_attention(graph, feat_dst, feat_src, feat_src, 1.0 / out_feats ** 0.5,
                            return_attention=get_attention)
        if get_attention:
            return out[0], out[1].unsqueeze(-1)  # DGL's [E, H, 1]
        return out

    def _fused_applies(self, graph, feat) -> bool:
        """Whether the fused op computes exactly what DGL's forward would (see the module docstring)."""
        if isinstance(feat, tuple) and not hasattr(self, "fc_src"):
            return False
        return plain_features(graph, feat)
