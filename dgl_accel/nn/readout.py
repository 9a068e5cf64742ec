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
Every subgraph holds at least its target, so no pool is empty.
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

    def forward(self, h: torch.Tensor, graph_ids: torch.Tensor, target_pos: torch.Tensor) -> torch.Tensor:
        if h.dim() < 1 or graph_ids.shape != h.shape[:1] or target_pos.dim() != 1:
            raise expected("h [N, ...], graph_ids [N] and target_pos [B]",
                           f"h {tuple(h.shape)}, graph_ids {tuple(graph_ids.shape)}, target_pos "
                           f"{tuple(target_pos.shape)}", "pass shadow_index(sg) of the batch h was computed on.")
        B = target_pos.numel()
        center = h[target_pos.long()]
        if self.mode == "center":
            return center
        idx = graph_ids.long()
        pool_kind = self.mode.split("+")[-1]
        shape = (B,) + tuple(h.shape[1:])
        view = idx.view(-1, *([1] * (h.dim() - 1))).expand_as(h)
        if pool_kind == "mean":
            total = h.new_zeros(shape).index_add(0, idx, h)
            count = torch.bincount(idx, minlength=B).to(h.dtype).clamp(min=1)
            pool = total / count.view(-1, *([1] * (h.dim() - 1)))
        else:
            pool = h.new_zeros(shape).scatter_reduce(0, view, h, reduce="amax", include_self=False)
        return pool if "+" not in self.mode else torch.cat([center, pool], -1)
