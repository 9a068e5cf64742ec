"""``ShaDowReadout``: shaDow-GNN's target readout (Zeng et al., NeurIPS'21, section 3.3) on a batch
of per-target subgraphs (``dgl_accel.sampling.ShaDowKHopSampler(per_target=True)`` or
``ShaDowPPRSampler``): one row per subgraph from the embeddings of its nodes.

Modes (``F`` the embedding width):

* ``"center"``: the target's own row, ``[B, F]``;
* ``"mean"`` / ``"max"``: the mean / elementwise max over the subgraph's nodes, ``[B, F]``;
* ``"center+mean"`` / ``"center+max"``: the target's row concatenated with the pool, ``[B, 2F]``
  (the paper's concatenation of the target embedding and the subgraph pooling).

Inputs: ``h`` [N, F] node embeddings of the batch, ``graph_ids`` [N] the subgraph of each node,
``target_pos`` [B] each subgraph's target row; ``dgl_accel.sampling.shadow_index(sg)`` gives both.
Every subgraph holds at least its target, so no pool is empty.  Optional ``weights`` [N] (mean
pools only): the weighted mean ``sum_i w_i h_i / sum_i w_i`` per subgraph, e.g. the PPR scores
``sg.ndata[dgl_accel.sampling.shadow.PPR_SCORE]`` (a pool that leans on the nodes nearest the
target, as APPNP's propagation does); every subgraph needs a positive total weight.
"""
from __future__ import annotations

import torch
from torch import nn

from ..core.sampling.checks import check_choice, expected

__all__ = ["ShaDowReadout", "MODES"]

MODES = ("center", "mean", "max", "center+mean", "center+max")


class ShaDowReadout(nn.Module):
    """One embedding per subgraph: the target's row, a pool, or both concatenated (module docstring).

    >>> h = torch.tensor([[1.0], [3.0], [5.0]])
    >>> gid, tpos = torch.tensor([0, 0, 1]), torch.tensor([1, 2])
    >>> ShaDowReadout("center+mean")(h, gid, tpos).tolist()
    [[3.0, 2.0], [5.0, 5.0]]
    """

    def __init__(self, mode: str = "center"):
        super().__init__()
        self.mode = check_choice(mode, "mode", MODES)

    def out_dim(self, in_dim: int) -> int:
        """Width of the output for embeddings of width ``in_dim``."""
        return 2 * in_dim if "+" in self.mode else in_dim

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}"

    def forward(self, h: torch.Tensor, graph_ids: torch.Tensor, target_pos: torch.Tensor,
                weights: torch.Tensor | None = None) -> torch.Tensor:
        if h.dim() < 1 or graph_ids.shape != h.shape[:1] or target_pos.dim() != 1:
            raise expected("h [N, ...], graph_ids [N] and target_pos [B]",
                           f"h {tuple(h.shape)}, graph_ids {tuple(graph_ids.shape)}, target_pos "
                           f"{tuple(target_pos.shape)}", "pass shadow_index(sg) of the batch h was computed on.")
        B = target_pos.numel()
        if weights is not None:
            self._check_weights(weights, h, graph_ids, B)
        center = h[target_pos.long()]
        if self.mode == "center":
            return center
        idx = graph_ids.long()
        pool_kind = self.mode.split("+")[-1]
        shape = (B,) + tuple(h.shape[1:])
        view = idx.view(-1, *([1] * (h.dim() - 1))).expand_as(h)
        if pool_kind == "mean":
            def col(t):  # [N] or [B] -> broadcastable against h's trailing dims
                return t.view(-1, *([1] * (h.dim() - 1)))
            w = None if weights is None else weights.to(h.dtype)
            total = h.new_zeros(shape).index_add(0, idx, h if w is None else h * col(w))
            denom = (torch.bincount(idx, minlength=B).to(h.dtype).clamp(min=1) if w is None
                     else h.new_zeros(B).index_add(0, idx, w))
            pool = total / col(denom)
        else:
            pool = h.new_zeros(shape).scatter_reduce(0, view, h, reduce="amax", include_self=False)
        return pool if "+" not in self.mode else torch.cat([center, pool], -1)

    def _check_weights(self, weights, h, graph_ids, num_graphs: int) -> None:
        if not self.mode.endswith("mean"):
            raise expected("weights only with a mean pool ('mean' or 'center+mean')", f"mode {self.mode!r}",
                           "drop weights, or construct ShaDowReadout('center+mean').")
        if not isinstance(weights, torch.Tensor) or weights.shape != h.shape[:1] or not weights.is_floating_point():
            raise expected("weights a float tensor [N], one per row of h",
                           f"{type(weights).__name__} {tuple(getattr(weights, 'shape', ()))}",
                           "pass sg.ndata[PPR_SCORE] of the batch h was computed on.")
        totals = h.new_zeros(num_graphs, dtype=torch.float64).index_add(0, graph_ids.long(), weights.double())
        # one host sync for the three conditions (this runs on every forward)
        if bool((weights < 0).any() | ~torch.isfinite(weights).all() | (totals <= 0).any()):
            raise expected("finite weights >= 0 with a positive sum in every subgraph",
                           f"min {float(weights.min()):.3g}, smallest subgraph total {float(totals.min()):.3g}",
                           "clamp the weights, or give each target a positive weight.")
