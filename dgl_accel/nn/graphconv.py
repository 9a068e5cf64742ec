"""Drop-in ``GraphConv``: same constructor, parameters and state_dict keys as ``dgl.nn.GraphConv``.

Only the aggregation changes: ``update_all(copy_u, sum)`` becomes :func:`dgl_accel.ops.copy_u_sum`
(Triton or native path, chosen by the backend).  What we don't accelerate yet (edge weights,
heterographs) goes to ``super().forward()`` unchanged.
"""
from __future__ import annotations

import dgl
import dgl.nn
import torch
from dgl.utils import expand_as_pair

from ..ops import copy_u_sum


def _degree_norm(degrees: torch.Tensor, like: torch.Tensor, both: bool) -> torch.Tensor:
    degs = degrees.to(like).clamp(min=1)  # DGL's convention: zero degree counts as one
    norm = torch.pow(degs, -0.5) if both else 1.0 / degs
    return norm.reshape(norm.shape + (1,) * (like.dim() - 1))


class GraphConv(dgl.nn.GraphConv):
    def forward(self, graph, feat, weight=None, edge_weight=None):
        if edge_weight is not None or len(graph.canonical_etypes) != 1:
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)
        if not self._allow_zero_in_degree and (graph.in_degrees() == 0).any():
            return super().forward(graph, feat, weight=weight)  # raises DGL's own DGLError
        if weight is not None and self.weight is not None:
            return super().forward(graph, feat, weight=weight)  # raises DGL's own DGLError
        weight = self.weight if weight is None else weight
        feat_src, feat_dst = expand_as_pair(feat, graph)
        if self._norm in ("left", "both"):
            feat_src = feat_src * _degree_norm(graph.out_degrees(), feat_src, self._norm == "both")
        # Multiply first when it shrinks the features that the aggregation has to move.
        if self._in_feats > self._out_feats:
            if weight is not None:
                feat_src = torch.matmul(feat_src, weight)
            rst = copy_u_sum(graph, feat_src)
        else:
            rst = copy_u_sum(graph, feat_src)
            if weight is not None:
                rst = torch.matmul(rst, weight)
        if self._norm in ("right", "both"):
            rst = rst * _degree_norm(graph.in_degrees(), feat_dst, self._norm == "both")
        if self.bias is not None:
            rst = rst + self.bias
        if self._activation is not None:
            rst = self._activation(rst)
        return rst
