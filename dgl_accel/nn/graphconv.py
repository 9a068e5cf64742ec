"""Drop-in ``GraphConv``: same constructor, parameters and state_dict keys as ``dgl.nn.GraphConv``.

The aggregation ``update_all(copy_u | u_mul_e, sum)`` and both degree normalisations become one
:func:`dgl_accel.functional.gspmm` call (norm fused into the kernel); the weight product, bias and ReLU
one :func:`dgl_accel.functional.dense` (oneDNN on CPU float32).  Inside
``dgl_accel.execution_paths`` the dense backward keeps to the frontier's rows.  Inside
``dgl_accel.execution_paths(..., restrict_forward=True)`` the dense work is restricted too: the
weight product runs only on the rows the loss can reach (receptive-field training).  Homogeneous
graphs, blocks and uni-bipartite relation graphs ``hg[etype]`` (as ``dgl.nn.HeteroGraphConv`` passes
them, with features ``(feat_src, feat_dst)``) run here; anything else (graphs with several
relations, DGL's own errors) goes to ``super().forward()`` unchanged.
"""
from __future__ import annotations

import dgl.nn
import torch
import torch.nn.functional as F
from dgl.utils import expand_as_pair

from ..core.autocast import autocast_dtype
from ..functional import dense, gspmm, gspmm_rows
from ..graph.structure import cached, is_supported_graph
from ..policies.exec_paths.session import begin_layer


def _rows_matmul(x: torch.Tensor, weight: torch.Tensor, rows) -> torch.Tensor:
    """``x @ weight`` on ``rows`` only (all rows if None); other rows 0: nothing on the way to the
    loss reads them."""
    if rows is None:
        return dense(x, weight, None, False, None, 0)
    out = x.new_zeros((x.shape[0], weight.shape[1]))  # fresh, so filling it in place is safe
    return out.index_copy_(0, rows, dense(x.index_select(0, rows), weight, None, False, None, 0))


def _has_zero_in_degree(graph) -> bool:
    # Cached per graph version: an O(N) degree pass per layer call adds up on small graphs.
    return cached(graph, "graphconv.zero_in_degree", lambda g: bool((g.in_degrees() == 0).any()))


class GraphConv(dgl.nn.GraphConv):
    def forward(self, graph, feat, weight=None, edge_weight=None):
        if not is_supported_graph(graph, relation=True):  # several relations: DGL's own handling
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
        if depth is not None and op == "copy_u" and weight is not None and self._in_feats <= self._out_feats:
            # Receptive-field forward, aggregation first: keep the layer on N^depth's rows from the
            # aggregation to the activation, and widen to all rows only at the end.
            found = gspmm_rows(graph, feat_src, self._norm, plan, depth)
            if found is not None:
                rows, rst = found
                rst = self._dense(rst, weight, None, 0)  # bias and ReLU fused into the product
                out = rst.new_zeros((graph.num_dst_nodes(),) + tuple(rst.shape[1:]))
                return out.index_copy_(0, rows, rst)  # other rows: 0, read by nothing the loss needs
        # Multiply first when it shrinks the features that the aggregation has to move (as DGL does).
        if self._in_feats > self._out_feats and weight is not None:
            feat_src = self._product(feat_src, weight, plan, depth, 1)
            weight = None
        rst = gspmm(graph, op, "sum", feat_src, edge_weight, norm=self._norm, layer_plan=plan)
        if weight is not None:
            if rst.dim() == 2 and (depth is None or plan.rows(depth) is None):
                return self._dense(rst, weight, plan, 0)  # all rows: bias and ReLU fused into the product
            rst = self._product(rst, weight, plan, depth, 0)
        if self.bias is not None:
            # rst is a fresh tensor whose producer (our aggregation or product) does not keep it for
            # its backward, so the bias goes in in place: one N x F allocation less per layer.  Under
            # autocast rst may be bf16: then out of place, promoted to the bias' dtype, as DGL adds it.
            rst = rst.add_(self.bias) if rst.dtype == self.bias.dtype else rst + self.bias
        return self._activate(rst)

    def _dense(self, x, weight, plan, offset):
        """``activation(x @ weight + bias)`` with bias and ReLU fused into the product
        (:func:`dense`; its backward keeps to the path's rows when ``plan`` is given).  Under
        ``torch.autocast`` the product runs in its dtype and the bias is added after it, promoted to
        fp32, as DGL's ``th.matmul(rst, weight) + bias`` does there."""
        if self.bias is not None and autocast_dtype(x.device.type) is not None:
            return self._activate(dense(x, weight, None, False, plan, offset) + self.bias)
        relu = self._is_relu()
        out = dense(x, weight, self.bias, relu, plan, offset)
        return out if relu else self._activate(out)

    def _is_relu(self) -> bool:
        act = self._activation
        return act is torch.relu or act is F.relu or type(act) is torch.nn.ReLU

    def _activate(self, rst):
        """The layer's activation; ReLU in place on our fresh output (its backward needs only the
        result), anything else as given."""
        act = self._activation
        if act is None:
            return rst
        if self._is_relu():
            return torch.relu_(rst)
        return act(rst)

    @staticmethod
    def _product(x, weight, plan, depth, offset):
        """x @ weight: plain outside execution paths; inside, restricted to the rows that matter
        (forward rows too once the receptive field is known, backward rows always)."""
        if x.dim() != 2:
            return torch.matmul(x, weight)
        if plan is not None and depth is not None:
            return _rows_matmul(x, weight, plan.rows(depth + offset))
        return dense(x, weight, None, False, plan, offset)
