"""Drop-in ``torch_geometric.nn.GINConv``: PyG's module (constructor, ``nn``, ``eps`` parameter or
buffer as ``train_eps`` says, state_dict keys) with its neighbour sum on dgl-accel's core.

PyG's forward step for step: ``x`` or ``(x_src, x_dst)``, the aggregation of the source rows into
every target (``aggr`` add/sum and mean on :func:`dgl_accel.core.aggregation.function.aggregate`,
max/min on the extrema op, as :mod:`.sage_conv` describes), plus ``(1 + eps) * x_dst`` when there
are target features, then ``nn``.  A sum over one node set (``x`` a tensor) runs the sum and the
scaled own row as one op (:func:`dgl_accel.core.aggregation.copy_u_sum_self.copy_u_sum_self`: one
fresh [N, F] tensor instead of three), in PyG's order of operations; where ``nn`` starts with a
linear layer that narrows the features (``Linear(256, 16)``, or a ``Sequential`` whose first
layer does), that product runs first and the narrower rows are summed (:func:`narrowing_linear`:
the same sum in another order); where no gradient is recorded and ``nn`` starts with any linear
layer, the sum goes to a reused scratch buffer that only that product reads (no fresh pages for an
[N, F] intermediate).  A ``torch.sparse`` adjacency
(CSR or coalesced COO) aggregates its values as edge weights, as PyG's ``spmm`` does.

Left to PyG's forward (``pyg.GINConv: fallthrough: <reason>``): other aggregations, max/min over a
sparse adjacency, features other than [N, F] floats of one dtype, ``torch_sparse.SparseTensor`` and
``EdgeIndex`` inputs, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and the
``target_to_source`` flow.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch_geometric.nn.dense.linear import Linear as PygLinear

from ...core.aggregation.copy_u_sum_self import copy_u_sum_self
from .inputs import dropin, fall_back, is_lazy, prepare, reduce_of, run_aggregation

PygGINConv = pyg_nn.GINConv


@dropin(PygGINConv, "propagate")
class GINConv(PygGINConv):
    def forward(self, x, edge_index, size=None):
        found = prepare(self, x, edge_index, size)
        if isinstance(found, str):
            return fall_back(self, PygGINConv, found, x, edge_index, size)
        x_src, x_dst, edges, views = found
        if (x_dst is x_src and reduce_of(self) == "sum" and not edges.sparse
                and views.num_dst == views.num_src == x_src.shape[0]):  # one graph: the fused op
            first, rest = narrowing_linear(self.nn, x_src)
            if first is not None:  # the sum commutes with the first product: sum the narrower rows
                rows = F.linear(x_src, first.weight)
                h = copy_u_sum_self(views, rows, self_scale=1 + self.eps)
                return rest((h if first.bias is None else h + first.bias).to(rows.dtype))  # the layer's dtype
            first, rest = leading_linear(self.nn)
            if first is not None and not torch.is_grad_enabled():  # the sum only feeds the product: scratch
                h = copy_u_sum_self(views, x_src, self_scale=1 + self.eps, into="pyg.GINConv.sum")
                return rest(F.linear(h, first.weight, first.bias))
            return self.nn(copy_u_sum_self(views, x_src, self_scale=1 + self.eps))
        out = run_aggregation(self, edges, views, edge_index, x_src)
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def leading_linear(nn):
    """(the first linear layer of ``nn``, the rest of ``nn``) where ``nn`` is a linear layer or a
    ``Sequential`` that starts with one (``torch.nn.Linear`` or PyG's ``Linear`` exactly: a subclass
    may override forward), without hooks and its weight materialised; (None, None) otherwise."""
    if isinstance(nn, torch.nn.Sequential) and len(nn) > 0:
        first, rest = nn[0], nn[1:]
    else:
        first, rest = nn, _same
    if type(first) not in (torch.nn.Linear, PygLinear) or is_lazy(first.weight) or first._forward_hooks \
            or first._forward_pre_hooks or first.weight.dim() != 2:
        return None, None
    return first, rest


def narrowing_linear(nn, x: torch.Tensor):
    """:func:`leading_linear` where that layer narrows ``x``'s features (fewer outputs than
    inputs); (None, None) otherwise."""
    first, rest = leading_linear(nn)
    if first is None or not first.weight.shape[0] < first.weight.shape[1] == x.shape[-1]:
        return None, None
    return first, rest


__all__ = ["GINConv"]
