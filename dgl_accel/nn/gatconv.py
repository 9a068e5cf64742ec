"""Drop-in ``GATConv``: DGL's module with its attention aggregation fused (issue 18).

DGL runs a GAT layer as three graph passes with E x H tensors between them (``apply_edges`` for the
scores, ``edge_softmax``, ``update_all`` with u_mul_e) and, in backward, E x H x D messages. Here
:func:`dgl_accel.functional.gat_attention` does the scores, the softmax, the attention dropout
(``attn_drop`` while training: on the CPU the mask DGL's ``nn.Dropout`` would draw, from torch's
stream at the same point, kept as E x H bytes; with the Triton kernels a mask hashed from edge id,
head and a seed drawn from torch's generator, recomputed in backward, never stored) and the weighted
sum in one op whose backward recomputes the attention from per-node normalisers. Everything around
it (dropout on features, the projections, residual, bias, activation, DGL's zero-in-degree error) is
DGL's code path. With one tensor of features (a homogeneous graph or a block: one projection ``fc``)
the whole layer is one op, :func:`dgl_accel.functional.gat_layer`: fc, the score halves from
``attn_l``/``attn_r``, the attention and the bias (added after the residual instead, as DGL, when
there is one). fc's output never leaves that op, whose backward writes the gradient into its memory
on the compiled CPU path (a training step's peak: the output and one N x H x D buffer). A pair of
features takes DGL's projections and score halves, then :func:`dgl_accel.functional.gat_attention`.

Where the fused op does not apply, ``super().forward()`` runs under ``dgl_accel.enabled()`` (its
edge softmax and aggregation still go through our routing where supported): ``edge_weight``,
features with extra dimensions ``(N, *, D)``, graphs with several relations, and the shapes where
the routed ops are faster than the fused op (several narrow heads on the CPU:
:func:`dgl_accel.policies.attention.choose_attention`, printed by ``dgl_accel.explain(graph, D,
heads=H)``; on Intel CPUs that forward routes only the edge softmax, the one routed op faster than
DGL's there).  Under autocast at those shapes the projections run in the autocast dtype and their
outputs are widened to fp32 before DGL's attention code reads them (``inputs.widened_projections``):
DGL's own forward raises there on the mixed dtypes.  So on the CPU a run from ``torch.manual_seed``
gives DGL's numbers with dropout on too (both dropouts draw DGL's masks); with the Triton kernels
single runs differ by the mask, whose distribution is DGL's.
"""
from __future__ import annotations

import dgl.nn
from dgl.base import DGLError

from ..core.autocast import widened_output
from ..functional import gat_attention, gat_layer
from ..patching import enabled
from ..policies.attention import choose_attention
from .inputs import plain_features, widened_projections

ZERO_IN_DEGREE = ("There are 0-in-degree nodes in the graph, output for those nodes will be invalid. This is harmful "
                  "for some applications, causing silent performance regression. Adding self-loop on the input graph "
                  "by calling `g = dgl.add_self_loop(g)` will resolve the issue. Setting ``allow_zero_in_degree`` to "
                  "be `True` when constructing this module will suppress the check and let the code run.")


class GATConv(dgl.nn.GATConv):
    def forward(self, graph, feat, edge_weight=None, get_attention=False):
        choice = self._choice(graph, feat, edge_weight)
        if choice is None or not choice.fused:  # DGL's forward, on the routes the choice names (None: all)
            with enabled(None if choice is None else choice.routes), widened_projections(self, choice):
                return super().forward(graph, feat, edge_weight=edge_weight, get_attention=get_attention)
        if not self._allow_zero_in_degree and bool((graph.in_degrees() == 0).any()):
            raise DGLError(ZERO_IN_DEGREE)  # DGL's check and message, before any work
        if not isinstance(feat, tuple):  # one projection (DGL reads self.fc here too): the whole layer fused
            return self._layer_forward(graph, feat, get_attention)
        heads, out_feats = self._num_heads, self._out_feats
        h_src, h_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
        fc_src, fc_dst = (self.fc, self.fc) if not hasattr(self, "fc_src") else (self.fc_src, self.fc_dst)
        feat_src = fc_src(h_src).view(-1, heads, out_feats)
        feat_dst = fc_dst(h_dst).view(-1, heads, out_feats)
        el = (feat_src * self.attn_l).sum(dim=-1)  # two projections: DGL's score halves
        er = (feat_dst * self.attn_r).sum(dim=-1)
        out = gat_attention(graph, feat_src, el, er, self.leaky_relu.negative_slope, return_attention=get_attention,
                            dropout=self.attn_drop.p if self.training else 0.0)  # eval: none
        return self._finish(out, h_dst, self.has_explicit_bias, get_attention)

    def _layer_forward(self, graph, feat, get_attention):
        """One tensor of features, one projection: fc, the attention and (without a residual) the bias
        in one op (:func:`dgl_accel.functional.gat_layer`), so fc's output stays inside it."""
        x = self.feat_drop(feat)
        late_bias = self.has_explicit_bias and self.res_fc is not None  # DGL adds the residual first
        bias = self.bias if self.has_explicit_bias and not late_bias else None
        out = gat_layer(graph, x, self.fc.weight, self.attn_l, self.attn_r, bias, self.leaky_relu.negative_slope,
                        dropout=self.attn_drop.p if self.training else 0.0, return_attention=get_attention)
        return self._finish(out, x[: graph.number_of_dst_nodes()] if graph.is_block else x, late_bias, get_attention)

    def _finish(self, out, h_dst, add_bias: bool, get_attention: bool):
        """DGL's tail: residual of ``h_dst``, then the bias (if ``add_bias``), then the activation; under
        autocast on fp32 (``core.autocast.widened_output``)."""
        rst, attention = out if get_attention else (out, None)
        rst = widened_output(rst)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, self._out_feats)
        if add_bias:
            rst = rst + self.bias.view(1, self._num_heads, self._out_feats)
        if self.activation:
            rst = self.activation(rst)
        return (rst, attention.unsqueeze(-1)) if get_attention else rst

    def _choice(self, graph, feat, edge_weight):
        """The policy's choice (:func:`dgl_accel.policies.attention.choose_attention`) where the fused op
        computes exactly what DGL's forward would (see the module docstring), else None."""
        if edge_weight is not None or not plain_features(graph, feat):
            return None
        like = feat[0] if isinstance(feat, tuple) else feat
        return choose_attention("gat", self._num_heads, self._out_feats, like)
