"""Drop-in ``torch_geometric.nn.GCNConv``: PyG's module (constructor, parameters, state_dict keys,
``cached`` state) with its aggregation on dgl-accel's core.

The forward is PyG's, step for step: ``gcn_norm`` (PyG's own function: ``add_remaining_self_loops``
with fill value 1, or 2 when ``improved``, then deg^-1/2 w deg^-1/2 over target in-degrees), the
``lin`` product, the weighted sum into every target, the bias.  The sum runs as the core's
``u_mul_e`` aggregation (:func:`dgl_accel.core.aggregation.function.aggregate`) on the graph's cached
views (:mod:`dgl_accel.pyg.graph`), differentiable in the features and the edge weights.  Without
``edge_weight`` the normalised edges and weights depend on the graph only, so they are computed once
per graph, node count, option set and dtype and kept with the graph; with ``edge_weight`` the
normalised structure is reused and the weights come from ``gcn_norm`` on every call (their gradient
reaches ``edge_weight`` through it, as in PyG).  ``cached=True`` keeps PyG's semantics (the first
call's normalisation serves every later call, in ``_cached_edge_index``).  ``normalize=False`` sums
``edge_weight * x`` (or ``x``) over the given edges.  A ``torch.sparse`` adjacency (CSR or
coalesced COO) is normalised by ``gcn_norm`` too and aggregated with its values.

Left to PyG's forward (``pyg.GCNConv: fallthrough: <reason>`` in ``dgl_accel.stats()``): an ``aggr``
other than add / sum / mean, features other than [N, F] floats, float ``edge_weight`` not of shape
[E] or of another dtype than the features (PyG promotes the output), a sparse adjacency with
``edge_weight``, with values that need a gradient or of another dtype, ``torch_sparse.SparseTensor``
and ``EdgeIndex`` inputs, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and
the ``target_to_source`` flow.
"""
from __future__ import annotations

import torch
import torch_geometric.nn as pyg_nn

from ...core.aggregation.function import aggregate
from .inputs import (
    dropin,
    fall_back,
    reduce_of,
)
from .propagation import propagation_graph, propagation_reason

PygGCNConv = pyg_nn.GCNConv


def _untraced(module, x, edge_index, edge_weight=None) -> str | None:
    """Why a GCNConv call under torch.compile stays behind the boundary (PyG's ``cached``, weights
    normalised per call), or None."""
    if module.cached:
        return "cached"
    return "edge_weight with normalize" if module.normalize and edge_weight is not None else None


@dropin(PygGCNConv, "propagate", untraced=_untraced)
class GCNConv(PygGCNConv):
    def forward(self, x, edge_index, edge_weight=None):
        if isinstance(x, (tuple, list)):
            return PygGCNConv.forward(self, x, edge_index, edge_weight)  # PyG's ValueError: no bipartite GCN
        why = self._why_pyg(x, edge_index, edge_weight)
        if why is not None:
            return fall_back(self, PygGCNConv, why, x, edge_index, edge_weight)
        # PyG's GCNConv reads _cached_edge_index whether or not cached is set: through cached_normalized
        views, weight = propagation_graph(self, x, edge_index, edge_weight, self.normalize, self.add_self_loops,
                                          cached=True, weights=True, improved=self.improved)
        h = self.lin(x)
        op = "copy_u" if weight is None else "u_mul_e"
        bias = self.bias
        widens = bias is not None and torch.promote_types(h.dtype, bias.dtype) != h.dtype  # autocast: fp32 bias
        out = aggregate(views, op, reduce_of(self), h, weight, keep_acc=widens)  # fp32 sums, not rounded to bf16
        if bias is None:
            return out
        return out.add_(bias) if out.dtype == torch.promote_types(out.dtype, bias.dtype) else out + bias  # PyG's dtype

    def _why_pyg(self, x, edge_index, edge_weight) -> str | None:
        """Why this call runs PyG's forward (module docstring), or None; raises on a malformed graph."""
        return propagation_reason(self, x, edge_index, edge_weight)  # the rule SGConv, APPNP, LGConv share
