"""Drop-in ``torch_geometric.nn.SAGEConv``: PyG's module (constructor, parameters, state_dict keys)
with its neighbour aggregation on dgl-accel's core.

PyG's forward step for step: ``x`` or ``(x_src, x_dst)`` (``x_dst`` may be None), ``project``'s
``lin(x_src).relu()``, the aggregation of the source rows into every target, ``lin_l``, plus
``lin_r(x_dst)`` with ``root_weight``, then ``normalize``'s L2 normalisation.  Where a sum or mean
narrows the features (``lin_l`` has fewer outputs than inputs) the rows are projected first and the
narrower rows aggregated (:func:`projects_first`; on one node set ``lin_l`` and ``lin_r`` are one
product), the same sum in another order.  ``aggr`` mean and
add/sum run on :func:`dgl_accel.core.aggregation.function.aggregate` (``copy_u``), max and min on the
extrema op (:func:`dgl_accel.core.extrema.aggregate_extrema`: targets without in-edges get 0, as
PyG's scatter gives; the gradient goes to the first in-edge that reaches the extremum, where PyG's
``scatter_reduce`` splits it between tied messages: the same input gradient unless two different
sources tie exactly).  A ``torch.sparse`` adjacency (CSR or coalesced COO) aggregates its values
as edge weights (``u_mul_e``), as PyG's ``spmm`` does, for mean and sum.

Left to PyG's forward (``pyg.SAGEConv: fallthrough: <reason>``): other aggregations (lists,
``Aggregation`` modules, ``"lstm"``, ...), max/min over a sparse adjacency, features other than [N, F]
floats of one dtype, ``torch_sparse.SparseTensor`` and ``EdgeIndex`` inputs, and PyG's explain mode,
message passing hooks, ``decomposed_layers`` and the ``target_to_source`` flow.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch.nn.parameter import is_lazy

from .inputs import dropin, fall_back, prepare, reduce_of, run_aggregation

PygSAGEConv = pyg_nn.SAGEConv


@dropin(PygSAGEConv, "propagate")
class SAGEConv(PygSAGEConv):
    def forward(self, x, edge_index, size=None):
        found = prepare(self, x, edge_index, size)
        if isinstance(found, str):
            return fall_back(self, PygSAGEConv, found, x, edge_index, size)
        x_src, x_dst, edges, views = found
        if self.project and hasattr(self, "lin"):
            x_src = self.lin(x_src).relu()
        if projects_first(self, x_src):
            out = project_then_aggregate(self, edges, views, edge_index, x_src, x_dst)
        else:
            out = aggregate_then_project(self, run_aggregation(self, edges, views, edge_index, x_src), x_dst)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out


def projects_first(module, x_src: torch.Tensor) -> bool:
    """A sum or mean into fewer features than it reads aggregates the projected rows instead (the
    sum commutes with ``lin_l``'s product; DGL's SAGEConv does the same): ``lin_l``'s weight is
    materialised (not a lazy ``in_channels=-1`` module before its first call) and narrows."""
    weight = module.lin_l.weight
    return (reduce_of(module) in ("sum", "mean") and not is_lazy(weight)
            and weight.shape[0] < weight.shape[1] == x_src.shape[-1])


def aggregate_then_project(module, aggregated: torch.Tensor, x_dst) -> torch.Tensor:
    """``lin_l(aggregated) + lin_r(x_dst)``, the root's product accumulated into by the neighbours'
    (``addmm``: no separate [N, out] sum, and its backward passes the gradient through)."""
    lin_l, lin_r = module.lin_l, module.lin_r if module.root_weight and x_dst is not None else None
    if lin_r is None or is_lazy(lin_l.weight) or is_lazy(lin_r.weight) or lin_r.bias is not None:
        out = lin_l(aggregated)
        return out if lin_r is None else out + lin_r(x_dst)
    own = F.linear(x_dst, lin_r.weight, lin_l.bias)
    return torch.addmm(own, aggregated, lin_l.weight.t())


def project_then_aggregate(module, edges, views, edge_index, x_src, x_dst) -> torch.Tensor:
    """``lin_l(aggr(x_src)) + lin_r(x_dst)`` as ``aggr(x_src @ W_l^T) + b_l + x_dst @ W_r^T``; on
    one node set the two products are one, over ``[W_l; W_r]``."""
    lin_l, out_features = module.lin_l, module.lin_l.weight.shape[0]
    root = module.root_weight and x_dst is not None
    if root and x_dst is x_src:
        both = F.linear(x_src, torch.cat([lin_l.weight, module.lin_r.weight]))
        h, own = both[:, :out_features], both[:, out_features:]
    else:
        h, own = F.linear(x_src, lin_l.weight), (module.lin_r(x_dst) if root else None)
    out = run_aggregation(module, edges, views, edge_index, h)
    if lin_l.bias is not None:
        out = out + lin_l.bias.to(out.dtype)
    return out if own is None else out + own


__all__ = ["SAGEConv"]
