"""Neighbour groups (GNNAdvisor): each CSR row split into consecutive pieces of at most ``gs`` entries.

Group ``k`` of row ``r`` covers CSR positions ``indptr[r] + k*gs`` up to ``min(indptr[r+1], ...)``;
a row's groups are consecutive, so ``row_ptr`` (a CSR over groups) lets a second pass combine a
row's partial sums in a fixed order.  Everything is int64 except the lengths (<= gs).
Built with vectorised torch ops; the DGL adapter caches them per (graph, direction, gs).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .csr import Structure


@dataclass(frozen=True, eq=False)
class Groups:
    row: torch.Tensor      # int64 [G]: the CSR row each group belongs to
    start: torch.Tensor    # int64 [G]: first CSR position of the group
    length: torch.Tensor   # int32 [G]: number of entries, 1..gs
    row_ptr: torch.Tensor  # int64 [rows+1]: groups of row r are row_ptr[r]:row_ptr[r+1]
    gs: int

    @property
    def num_groups(self) -> int:
        return int(self.row.numel())

    @property
    def max_groups_per_row(self) -> int:
        return int((self.row_ptr[1:] - self.row_ptr[:-1]).max()) if self.row_ptr.numel() > 1 else 0


def build_groups(structure: Structure, gs: int) -> Groups:
    if not isinstance(gs, int) or isinstance(gs, bool) or gs < 1:
        raise ValueError(f"expected a group size gs >= 1 (got {gs!r}). Fix: pass group_size=None "
                         f"to let dgl_accel choose, or a positive int.")
    indptr = structure.indptr
    degree = indptr[1:] - indptr[:-1]
    per_row = (degree + gs - 1) // gs
    row_ptr = torch.zeros(structure.num_rows + 1, dtype=torch.int64, device=indptr.device)
    torch.cumsum(per_row, 0, out=row_ptr[1:])
    row = torch.repeat_interleave(torch.arange(structure.num_rows, device=indptr.device), per_row)
    k = torch.arange(row.numel(), device=indptr.device) - row_ptr[row]  # index of the group in its row
    start = indptr[row] + k * gs
    length = torch.minimum(indptr[row + 1] - start, torch.full_like(start, gs)).to(torch.int32)
    return Groups(row=row, start=start, length=length, row_ptr=row_ptr, gs=gs)
