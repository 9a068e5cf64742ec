"""Drop-in ``torch_geometric.nn.SAGEConv``: PyG's module (constructor, parameters, state_dict keys)
with its neighbour aggregation on dgl-accel's core.

PyG's forward step for step: ``x`` or ``(x_src, x_dst)`` (``x_dst`` may be None), ``project``'s
``lin(x_src).relu()``, the aggregation of the source rows into every target, ``lin_l``, plus
``lin_r(x_dst)`` with ``root_weight``, then ``normalize``'s L2 normalisation.  Where a sum or mean
narrows the features (``lin_l`` has fewer outputs than inputs) the rows are projected first and the
narrower rows aggregated, else ``lin_r``'s product takes the aggregate's; with ``lin_r``, only the
targets up to the last with an in-edge are aggregated and projected, and under CPU autocast fp32
rows are cast once for both products and the aggregation (:mod:`.products`).  ``aggr`` mean and
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

import torch.nn.functional as F
import torch_geometric.nn as pyg_nn

from .inputs import dropin, fall_back, prepare, reduce_of, run_aggregation
from .products import (
    aggregate_then_project,
    narrowed_once,
    project_then_aggregate,
    projects_first,
    with_in_edges,
)

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
        own = self.lin_r if self.root_weight else None
        views = with_in_edges(edges, views, root=own is not None and x_dst is not None)
        if projects_first(self.lin_l, reduce_of(self), x_src):
            out = project_then_aggregate(self.lin_l, own, x_src, x_dst,
                                         lambda h: run_aggregation(self, edges, views, edge_index, h))
        else:
            if own is not None:
                x_src, x_dst = narrowed_once(x_src, x_dst)
            out = aggregate_then_project(self.lin_l, own, run_aggregation(self, edges, views, edge_index, x_src), x_dst)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out


__all__ = ["SAGEConv"]
