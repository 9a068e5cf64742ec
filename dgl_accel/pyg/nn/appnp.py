"""Drop-in ``torch_geometric.nn.APPNP`` (Gasteiger et al.'s personalised-PageRank propagation):
PyG's module (constructor, no parameters, ``cached`` state) with its K propagations on dgl-accel's
core.

PyG's forward: with ``normalize``, ``gcn_norm`` (PyG's own function); then K times ``x <-
(1 - alpha) * A_hat x + alpha * x0``.  The normalised graph is built once per graph and kept with it
(:mod:`.propagation`); ``cached=True`` keeps PyG's semantics (the first call's normalisation serves
every later call, in ``_cached_edge_index``).  Each step is the core's ``u_mul_e`` aggregation over
that one graph (``copy_u`` where ``normalize=False`` has no weights; ``copy_u`` with the core's
``both`` degree norm where that stands for ``gcn_norm``'s weights:
:func:`.propagation.propagation_graph`), then PyG's two element-wise steps in its order, in place on
the fresh sum (``alpha * x0`` computed once).  Edge dropout while training (``dropout > 0``) draws
PyG's masks: ``F.dropout`` on the same weights in the same order as PyG's forward, each step's
weights the previous step's dropped ones, so from one seed the numbers are PyG's.  A ``torch.sparse``
adjacency (CSR or coalesced COO) is normalised by ``gcn_norm`` too and aggregated with its
values.  Under ``torch.compile`` (torch >= 2.4) the layer is traced into the model's graph, its sums
the core's custom ops on the kept normalised graph; ``cached``, ``edge_weight`` with ``normalize``,
edge dropout while training and sparse adjacencies keep it behind its compile boundary
(:func:`.propagation.untraced`), run eagerly.

Left to PyG's forward (``pyg.APPNP: fallthrough: <reason>`` in ``dgl_accel.stats()``): an
``aggr`` other than add / sum / mean, features other than [N, F] floats, float ``edge_weight`` not
of shape [E] or of another dtype than the features, a sparse adjacency with ``edge_weight``, with
values that need a gradient or of another dtype, ``torch_sparse.SparseTensor`` and ``EdgeIndex``
inputs, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and the
``target_to_source`` flow.  Edge dropout without edge weights (``normalize=False``, an
``edge_index`` and no ``edge_weight``) raises PyG's AssertionError, with the fix.
"""
from __future__ import annotations

import torch.nn.functional as F
import torch_geometric.nn as pyg_nn

from .inputs import dropin, fall_back, reduce_of
from .propagation import propagate, propagation_graph, propagation_reason, untraced

PygAPPNP = pyg_nn.APPNP


@dropin(PygAPPNP, "propagate", untraced=untraced)
class APPNP(PygAPPNP):
    def forward(self, x, edge_index, edge_weight=None):
        why = propagation_reason(self, x, edge_index, edge_weight)
        if why is not None:
            return fall_back(self, PygAPPNP, why, x, edge_index, edge_weight)
        drop = self.dropout > 0 and self.training
        cached = self.cached or self._cached_edge_index is not None  # PyG reads a filled cache either way
        views, weight = propagation_graph(self, x, edge_index, edge_weight, self.normalize, self.add_self_loops,
                                          cached, weights=drop)
        if drop and weight is None:
            raise AssertionError("APPNP's edge dropout needs edge weights (got normalize=False, an edge_index "
                                 "and no edge_weight). Fix: pass edge_weight=torch.ones(edge_index.size(1)), "
                                 "or normalize=True.")
        reduce, keep = reduce_of(self), 1 - self.alpha
        teleport = self.alpha * x
        for _ in range(self.K):
            if drop:
                weight = F.dropout(weight, p=self.dropout)
            x = propagate(views, reduce, x, weight)
            x = x.mul_(keep).add_(teleport)
        return x


__all__ = ["APPNP"]
