"""Drop-in ``torch_geometric.nn.LGConv`` (LightGCN's light graph convolution): PyG's module
(constructor, no parameters) with its propagation on dgl-accel's core.

PyG's forward: with ``normalize``, ``gcn_norm`` without self-loops (PyG's own function: the weights
``deg^-1/2 w deg^-1/2`` over target in-degrees, the edges as given); then one weighted sum into
every target.  The normalised weights are built once per graph and kept with it (:mod:`.propagation`;
with ``edge_weight`` they come from ``gcn_norm`` on every call, their gradient reaching
``edge_weight``), and the sum is the core's ``u_mul_e`` aggregation (``copy_u`` where
``normalize=False`` has no weights, or with the core's ``both`` degree norm where that stands for
``gcn_norm``'s weights: :func:`.propagation.propagation_graph`).  A ``torch.sparse`` adjacency (CSR
or coalesced COO) is normalised by ``gcn_norm`` too and aggregated with its values.  Under
``torch.compile`` (torch >= 2.4) the layer is traced into the model's graph, its sum the core's
custom op on the kept normalised graph; ``edge_weight`` with ``normalize`` and sparse adjacencies
keep it behind its compile boundary (:func:`.propagation.untraced`), run eagerly.

Left to PyG's forward (``pyg.LGConv: fallthrough: <reason>`` in ``dgl_accel.stats()``): an
``aggr`` other than add / sum / mean, features other than [N, F] floats, float ``edge_weight`` not
of shape [E] or of another dtype than the features, a sparse adjacency with ``edge_weight``, with
values that need a gradient or of another dtype, ``torch_sparse.SparseTensor`` and ``EdgeIndex``
inputs, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and the
``target_to_source`` flow.
"""
from __future__ import annotations

import torch_geometric.nn as pyg_nn

from .inputs import dropin, fall_back, reduce_of
from .propagation import propagate, propagation_graph, propagation_reason, untraced

PygLGConv = pyg_nn.LGConv


@dropin(PygLGConv, "propagate", untraced=untraced)
class LGConv(PygLGConv):
    def forward(self, x, edge_index, edge_weight=None):
        why = propagation_reason(self, x, edge_index, edge_weight)
        if why is not None:
            return fall_back(self, PygLGConv, why, x, edge_index, edge_weight)
        views, weight = propagation_graph(self, x, edge_index, edge_weight, self.normalize, False, False)
        return propagate(views, reduce_of(self), x, weight)


__all__ = ["LGConv"]
