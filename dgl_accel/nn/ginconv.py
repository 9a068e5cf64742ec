"""Drop-in ``GINConv``: DGL's module, with its sum/mean/max aggregation routed through dgl-accel
(``max`` on the arg-based extrema op, ``dgl_accel.core.extrema``); relation graphs ``hg[etype]``
between two node types run on dgl-accel too, as for ``SAGEConv``.

Linear first: with ``apply_func`` a plain ``nn.Linear``, sum or mean, one feature tensor and as
many sources as destinations (a graph, or a block without extra sources), the layer may run
``W((1 + eps) x + A x) + b`` as ``(1 + eps) Wx + A(Wx) + b`` (DGL's ``lin_before_mp`` for SAGEConv
and GraphConv; the same numbers up to rounding, the sums run in another order).  It does when that
moves fewer columns through the aggregation (:func:`linear_first_pays`): ``out`` columns forward,
and backward too once ``W`` trains, against ``in`` forward and backward only where ``x`` needs a
gradient.  So a hidden layer that narrows takes it (half the sparse work at in = 2 out; 1.15-1.31x
DGL's step on Cora, Amazon-CS and Slashdot at 128 -> 64, one thread), and an input layer (features
without gradient) only when in > 2 out.

Otherwise, for sum, mean and max over one feature tensor on a graph (or a block without extra
sources), DGL's forward runs as written with the aggregation called directly rather than through
``update_all`` (the same operations in the same order; on Cora its Python was the whole gap: GIN
sum 0.92x -> 1.05x, max about 1.0x -> 1.36x DGL's step, one thread).
"""
import dgl.nn
import torch
import torch.nn.functional as F

from ..functional import copy_u_sum_self, gspmm
from ..patching import enabled
from .inputs import one_tensor_on_sources, one_weight_per_edge


def linear_first_pays(in_feats: int, out_feats: int, x_needs_grad: bool, any_grad: bool) -> bool:
    """Whether aggregating ``out`` columns after the product moves fewer columns (forward plus the
    backward aggregations) than aggregating ``in`` columns before it."""
    return out_feats * (1 + any_grad) < in_feats * (1 + x_needs_grad)


class GINConv(dgl.nn.GINConv):
    def forward(self, graph, feat, edge_weight=None):
        if self._linear_first_applies(graph, feat, edge_weight):
            return self._linear_first(graph, feat, edge_weight)
        if self._direct_applies(graph, feat, edge_weight):
            return self._direct(graph, feat, edge_weight)
        with enabled():
            return super().forward(graph, feat, edge_weight=edge_weight)

    def _linear_first_applies(self, graph, feat, edge_weight) -> bool:
        lin = self.apply_func
        return (type(lin) is torch.nn.Linear and self._aggregator_type in ("sum", "mean")
                and one_tensor_on_sources(graph, feat, lin.in_features, blocks=False)  # h is also h_dst
                and one_weight_per_edge(graph, edge_weight)
                and linear_first_pays(lin.in_features, lin.out_features, _needs_grad(feat),
                                      _needs_grad(feat, lin.weight, self.eps, edge_weight)))

    def _direct_applies(self, graph, feat, edge_weight) -> bool:
        # apply_func comes after the aggregation, as in DGL's forward: any width aggregates alike
        return (self._aggregator_type in ("sum", "mean", "max") and isinstance(feat, torch.Tensor)
                and one_tensor_on_sources(graph, feat, feat.shape[-1], blocks=False)
                and one_weight_per_edge(graph, edge_weight))

    def _direct(self, graph, feat, edge_weight):
        """DGL's forward, the same operations in the same order, with the aggregation called
        directly (not through ``update_all``: its Python was the whole gap on small graphs)."""
        rst = self._combine(graph, feat, edge_weight)
        if self.apply_func is not None:
            rst = self.apply_func(rst)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst

    def _linear_first(self, graph, feat, edge_weight):
        lin = self.apply_func
        h = F.linear(feat, lin.weight)
        rst = self._combine(graph, h, edge_weight, lin.bias)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst

    def _combine(self, graph, h, edge_weight, bias=None):
        """``(1 + eps) h + aggregate(h) (+ bias)``, DGL's expression; a plain sum runs as one op
        (:func:`dgl_accel.functional.copy_u_sum_self`), with eps's gradient when it trains."""
        # eps is a [1] float32 tensor: DGL's product promotes half features to float32, ours would not
        if self._aggregator_type == "sum" and edge_weight is None and h.dtype in (torch.float32, torch.float64):
            scale = 1 + self.eps  # a number where it needs no gradient, read once on the CPU (no device sync)
            number = not _needs_grad(scale) and scale.device.type == "cpu"
            return copy_u_sum_self(graph, h, self_scale=float(scale) if number else scale, bias=bias)
        op = "copy_u" if edge_weight is None else "u_mul_e"
        rst = (1 + self.eps) * h + gspmm(graph, op, self._aggregator_type, h, edge_weight)
        return rst if bias is None else rst + bias


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)
