"""Drop-in ``torch_geometric.nn.GraphConv`` (Morris et al.'s higher-order GNN layer): PyG's module
(constructor, ``lin_rel`` / ``lin_root``, state_dict keys) with its neighbour aggregation on
dgl-accel's core.

PyG's forward: ``x`` or ``(x_src, x_dst)``, the ``aggr`` of the source rows into every target
(weighted by ``edge_weight`` where given: ``edge_weight[e] * x[src]``), ``lin_rel``, plus
``lin_root(x_dst)`` when there are target features.  Sums and means run on
:func:`dgl_accel.core.aggregation.function.aggregate` (``copy_u``, or ``u_mul_e`` with the
weights), max and min on the extrema op; a ``torch.sparse`` adjacency aggregates its values, as
PyG's ``spmm`` does.  ``lin_rel``'s product runs before the aggregation where it narrows the
features, after it otherwise (under CPU autocast on fp32 rows cast once, for both products and
the aggregation), and only on the targets up to the last with an in-edge (:mod:`.products`).

Left to PyG's forward (``pyg.GraphConv: fallthrough: <reason>``): max/min with edge weights or
over a sparse adjacency, ``edge_weight`` beside a sparse adjacency or of another dtype than the
features, other aggregations, features other than [N, F] floats of one dtype,
``torch_sparse.SparseTensor`` and ``EdgeIndex`` inputs, and PyG's explain mode, message passing
hooks, ``decomposed_layers`` and the ``target_to_source`` flow.
"""
from __future__ import annotations

import torch
import torch_geometric.nn as pyg_nn

from ...core.aggregation.function import aggregate
from .inputs import check_edge_weight, dropin, fall_back, prepare, reduce_of, run_aggregation
from .products import (
    aggregate_then_project,
    narrowed_once,
    project_then_aggregate,
    projects_first,
    with_in_edges,
)

PygGraphConv = pyg_nn.GraphConv


@dropin(PygGraphConv, "propagate")
class GraphConv(PygGraphConv):
    def forward(self, x, edge_index, edge_weight=None, size=None):
        why = _weight_reason(self, x, edge_index, edge_weight)
        found = why or prepare(self, x, edge_index, size)
        if isinstance(found, str):
            return fall_back(self, PygGraphConv, found, x, edge_index, edge_weight, size)
        x_src, x_dst, edges, views = found
        if isinstance(edge_weight, torch.Tensor) and edge_weight.dim() == 2 and edge_weight.shape[1] == 1:
            edge_weight = edge_weight.view(-1)  # PyG's message reads edge_weight.view(-1, 1)
        check_edge_weight(edge_weight, edge_index.shape[1], x_src)
        views = with_in_edges(edges, views, root=x_dst is not None)

        def aggregate_rows(h):
            if edge_weight is None:
                return run_aggregation(self, edges, views, edge_index, h)
            return aggregate(views, "u_mul_e", reduce_of(self), h, edge_weight)

        if projects_first(self.lin_rel, reduce_of(self), x_src):
            return project_then_aggregate(self.lin_rel, self.lin_root, x_src, x_dst, aggregate_rows)
        if edge_weight is None:  # (weights of the features' dtype: fp32 rows stay fp32)
            x_src, x_dst = narrowed_once(x_src, x_dst)
        return aggregate_then_project(self.lin_rel, self.lin_root, aggregate_rows(x_src), x_dst)


def _weight_reason(module, x, edge_index, edge_weight) -> str | None:
    """Why weighted messages go to PyG's forward, or None."""
    if edge_weight is None:
        return None
    if isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
        return "edge_weight with a sparse adjacency"
    if reduce_of(module) in ("max", "min"):
        return f"aggr {module.aggr!r} with edge weights"
    first = x[0] if isinstance(x, (tuple, list)) else x
    if isinstance(edge_weight, torch.Tensor) and isinstance(first, torch.Tensor) and edge_weight.dtype != first.dtype:
        return "edge_weight of another dtype than the features"  # PyG promotes the output's dtype
    return None


__all__ = ["GraphConv"]
