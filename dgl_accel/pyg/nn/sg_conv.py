"""Drop-in ``torch_geometric.nn.SGConv`` (Wu et al.'s simplified graph convolution): PyG's module
(constructor, ``lin``, state_dict keys, ``cached`` state) with its K propagations on dgl-accel's
core.

PyG's forward: ``gcn_norm`` (PyG's own function, without ``improved``), K weighted sums ``x <- A_hat
x`` over the normalised graph, then ``lin``.  The normalised graph is built once per graph and kept
with it (:mod:`.propagation`), and the K sums run on it as the core's ``u_mul_e`` aggregation
(``copy_u`` with the core's ``both`` degree norm where that stands for ``gcn_norm``'s weights:
:func:`.propagation.propagation_graph`).  ``cached=True`` keeps PyG's semantics: the first call's
propagated features (``_cached_x``) serve every later call, detached, and only ``lin`` runs.  Without
``cached``, where ``lin`` narrows the features (fewer outputs than inputs), its product runs first
(in the autocast dtype under autocast, as PyG's ``lin``) and the K sums run over the narrower rows
(``A^K (x W^T) + b``: the same sums in another order, rounding apart).  A ``torch.sparse`` adjacency
(CSR or coalesced COO) is normalised by ``gcn_norm`` too and aggregated with its values.  Under
``torch.compile`` (torch >= 2.4) the layer is traced into the model's graph, its sums the core's
custom ops on the kept normalised graph; ``cached``, ``edge_weight`` and sparse adjacencies keep it
behind its compile boundary (:func:`.propagation.untraced`), run eagerly.

Left to PyG's forward (``pyg.SGConv: fallthrough: <reason>`` in ``dgl_accel.stats()``): an
``aggr`` other than add / sum / mean, features other than [N, F] floats, float ``edge_weight`` not
of shape [E] or of another dtype than the features, a sparse adjacency with ``edge_weight``, with
values that need a gradient or of another dtype, ``torch_sparse.SparseTensor`` and ``EdgeIndex``
inputs, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and the
``target_to_source`` flow.
"""
from __future__ import annotations

import torch.nn.functional as F
import torch_geometric.nn as pyg_nn

from .inputs import dropin, fall_back, reduce_of
from .products import projects_first
from .propagation import propagate, propagation_graph, propagation_reason, untraced

PygSGConv = pyg_nn.SGConv


@dropin(PygSGConv, "propagate", untraced=untraced)
class SGConv(PygSGConv):
    def forward(self, x, edge_index, edge_weight=None):
        if self._cached_x is not None:  # PyG's cached path: no graph is read
            return self.lin(self._cached_x.detach())
        why = propagation_reason(self, x, edge_index, edge_weight)
        if why is not None:
            return fall_back(self, PygSGConv, why, x, edge_index, edge_weight)
        views, weight = propagation_graph(self, x, edge_index, edge_weight, True, self.add_self_loops, False)
        reduce = reduce_of(self)
        if not self.cached and projects_first(self.lin, reduce, x):
            h = F.linear(x, self.lin.weight)
            for _ in range(self.K):
                h = propagate(views, reduce, h, weight)
            return h if self.lin.bias is None else h + self.lin.bias.to(h.dtype)
        for _ in range(self.K):
            x = propagate(views, reduce, x, weight)
            if self.cached:
                self._cached_x = x
        return self.lin(x)


__all__ = ["SGConv"]
