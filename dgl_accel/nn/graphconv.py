"""Drop-in ``GraphConv``: same constructor, parameters and state_dict keys as ``dgl.nn.GraphConv``.

The aggregation ``update_all(copy_u | u_mul_e, sum)`` and both degree normalisations become one
:func:`dgl_accel.ops.gspmm` call (norm fused into the kernel).  Anything else (heterographs,
DGL's own errors) goes to ``super().forward()`` unchanged.
"""
from __future__ import annotations

import dgl.nn
import torch
from dgl.utils import expand_as_pair

from ..ops import gspmm


class GraphConv(dgl.nn.GraphConv):
    def forward(self, graph, feat, weight=None, edge_weight=None):
        if len(graph.canonical_etypes) != 1:
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)
        if not self._allow_zero_in_degree and (graph.in_degrees() == 0).any():
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)  # DGL's DGLError
        if weight is not None and self.weight is not None:
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)  # DGL's DGLError
        weight = self.weight if weight is None else weight
        feat_src, _ = expand_as_pair(feat, graph)
        op = "copy_u" if edge_weight is None else "u_mul_e"
        # Multiply first when it shrinks the features that the aggregation has to move (as DGL does).
        if self._in_feats > self._out_feats and weight is not None:
            feat_src = torch.matmul(feat_src, weight)
            weight = None
        rst = gspmm(graph, op, "sum", feat_src, edge_weight, norm=self._norm)
        if weight is not None:
            rst = torch.matmul(rst, weight)
        if self.bias is not None:
            rst = rst + self.bias
        if self._activation is not None:
            rst = self._activation(rst)
        return rst
