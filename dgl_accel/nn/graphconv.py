"""Drop-in ``GraphConv``: same constructor, parameters and state_dict keys as ``dgl.nn.GraphConv``.

The aggregation ``update_all(copy_u | u_mul_e, sum)`` and both degree normalisations become one
:func:`dgl_accel.ops.gspmm` call (norm fused into the kernel).  Inside
``dgl_accel.execution_paths(..., restrict_forward=True)`` the dense work is restricted too: the
weight product runs only on the rows the loss can reach (receptive-field training).  Anything else
(heterographs, DGL's own errors) goes to ``super().forward()`` unchanged.
"""
from __future__ import annotations

import dgl.nn
import torch
from dgl.utils import expand_as_pair

from ..exec_paths import begin_layer
from ..graph.structure import cached
from ..ops import gspmm


def _rows_matmul(x: torch.Tensor, weight: torch.Tensor, rows) -> torch.Tensor:
    """``x @ weight`` on ``rows`` only (all rows if None); other rows 0: nothing on the way to the
    loss reads them."""
    if rows is None:
        return torch.matmul(x, weight)
    out = x.new_zeros((x.shape[0], weight.shape[1]))  # fresh, so filling it in place is safe
    return out.index_copy_(0, rows, torch.matmul(x.index_select(0, rows), weight))


def _has_zero_in_degree(graph) -> bool:
    # Cached per graph version: an O(N) degree pass per layer call adds up on small graphs.
    return cached(graph, "graphconv.zero_in_degree", lambda g: bool((g.in_degrees() == 0).any()))


class GraphConv(dgl.nn.GraphConv):
    def forward(self, graph, feat, weight=None, edge_weight=None):
        if len(graph.canonical_etypes) != 1:
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)
        if not self._allow_zero_in_degree and _has_zero_in_degree(graph):
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)  # DGL's DGLError
        if weight is not None and self.weight is not None:
            return super().forward(graph, feat, weight=weight, edge_weight=edge_weight)  # DGL's DGLError
        weight = self.weight if weight is None else weight
        feat_src, _ = expand_as_pair(feat, graph)
        op = "copy_u" if edge_weight is None else "u_mul_e"
        plan = begin_layer(graph)  # None outside dgl_accel.execution_paths
        depth = plan.forward_depth if plan is not None else None
        plain = depth is None or feat_src.dim() != 2
        # Multiply first when it shrinks the features that the aggregation has to move (as DGL does).
        if self._in_feats > self._out_feats and weight is not None:
            feat_src = torch.matmul(feat_src, weight) if plain else _rows_matmul(feat_src, weight, plan.rows(depth + 1))
            weight = None
        rst = gspmm(graph, op, "sum", feat_src, edge_weight, norm=self._norm, layer_plan=plan)
        if weight is not None:
            rst = torch.matmul(rst, weight) if plain else _rows_matmul(rst, weight, plan.rows(depth))
        if self.bias is not None:
            rst = rst + self.bias
        if self._activation is not None:
            rst = self._activation(rst)
        return rst
