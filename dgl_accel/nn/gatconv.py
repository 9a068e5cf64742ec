"""Drop-in ``GATConv``: DGL's module with its attention aggregation fused (issue 18).

DGL runs a GAT layer as three graph passes with E x H tensors between them (``apply_edges`` for
the scores, ``edge_softmax``, ``update_all`` with u_mul_e) and, in backward, E x H x D messages.
Here :func:`dgl_accel.functional.gat_attention` does the scores, the softmax, the attention dropout
(``attn_drop`` while training: a mask hashed from edge id, head and a seed drawn from torch's
generator, recomputed in backward, never stored) and the weighted sum in one op whose backward
recomputes the attention from per-node normalisers.  Everything around it (dropout on features,
the projections, residual, bias, activation, DGL's zero-in-degree error) is DGL's code path.  With
one projection the op also computes the score halves el, er from ``attn_l``/``attn_r`` (one matmul)
and adds their gradient into the features' in place: no N x H x D product for them in either pass
and one N x H x D gradient buffer in backward.

Where the fused op does not apply, ``super().forward()`` runs under ``dgl_accel.enabled()`` (its
edge softmax and aggregation still go through our routing where supported): ``edge_weight``,
features with extra dimensions ``(N, *, D)``, and graphs with several relations.  With attention
dropout the numbers differ from DGL's run by the mask (ours is not torch's ``nn.Dropout`` stream);
the distribution is the same.
"""
from __future__ import annotations

import dgl.nn
import torch
from dgl.base import DGLError

from ..functional import gat_attention
from ..graph.structure import is_supported_graph
from ..patching import enabled

ZERO_IN_DEGREE = ("There are 0-in-degree nodes in the graph, output for those nodes will be invalid. This is harmful "
                  "for some applications, causing silent performance regression. Adding self-loop on the input graph "
                  "by calling `g = dgl.add_self_loop(g)` will resolve the issue. Setting ``allow_zero_in_degree`` to "
                  "be `True` when constructing this module will suppress the check and let the code run.")


class GATConv(dgl.nn.GATConv):
    def forward(self, graph, feat, edge_weight=None, get_attention=False):
        if not self._fused_applies(graph, feat, edge_weight):
            with enabled():
                return super().forward(graph, feat, edge_weight=edge_weight, get_attention=get_attention)
        if not self._allow_zero_in_degree and bool((graph.in_degrees() == 0).any()):
            raise DGLError(ZERO_IN_DEGREE)  # DGL's check and message, before any work
        heads, out_feats = self._num_heads, self._out_feats
        if isinstance(feat, tuple):
            h_src, h_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
            fc_src, fc_dst = (self.fc, self.fc) if not hasattr(self, "fc_src") else (self.fc_src, self.fc_dst)
            feat_src = fc_src(h_src).view(-1, heads, out_feats)
            feat_dst = fc_dst(h_dst).view(-1, heads, out_feats)
        else:
            h_src = h_dst = self.feat_drop(feat)
            feat_src = feat_dst = self.fc(h_src).view(-1, heads, out_feats)
            if graph.is_block:
                feat_dst = feat_src[: graph.number_of_dst_nodes()]
                h_dst = h_dst[: graph.number_of_dst_nodes()]
        kw = dict(return_attention=get_attention, dropout=self.attn_drop.p if self.training else 0.0)  # eval: none
        if isinstance(feat, tuple):  # two projections: DGL's score halves
            el = (feat_src * self.attn_l).sum(dim=-1)
            er = (feat_dst * self.attn_r).sum(dim=-1)
            out = gat_attention(graph, feat_src, el, er, self.leaky_relu.negative_slope, **kw)
        else:  # feat_dst is feat_src or its first rows (a block's destinations): halves inside the op
            out = gat_attention(graph, feat_src, negative_slope=self.leaky_relu.negative_slope,
                                attn=(self.attn_l, self.attn_r), **kw)
        rst, attention = out if get_attention else (out, None)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, out_feats)
        if self.has_explicit_bias:
            rst = rst + self.bias.view(1, heads, out_feats)
        if self.activation:
            rst = self.activation(rst)
        return (rst, attention.unsqueeze(-1)) if get_attention else rst

    def _fused_applies(self, graph, feat, edge_weight) -> bool:
        """Whether the fused op computes exactly what DGL's forward would (see the module docstring)."""
        if edge_weight is not None:
            return False
        if not is_supported_graph(graph, relation=True):
            return False
        feats = feat if isinstance(feat, tuple) else (feat,)
        return all(isinstance(f, torch.Tensor) and f.dim() == 2 and f.is_floating_point() for f in feats)
