"""CSR views on plain tensors: the only graph the DGL-free core sees.

A view is a sparse matrix of shape ``(num_rows, num_cols)``: ``in_csr`` of a graph has one row per
destination node (forward aggregation), ``out_csr`` one row per source node (the backward pass).
Host libraries (the DGL adapter in ``dgl_accel.graph``) build and cache them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Structure", "sort_by_row", "row_positions"]


@dataclass(frozen=True, eq=False)  # eq=False: tensors have no meaningful ==; identity is enough
class Structure:
    """A CSR matrix of shape ``(num_rows, num_cols)``.

    ``indptr`` is always int64 (edge counts can exceed 2**31); ``indices`` and ``eids`` keep
    the graph's idtype.  Row ``r``'s entries are ``indices[indptr[r]:indptr[r+1]]``.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    eids: torch.Tensor
    num_rows: int
    num_cols: int
    device: torch.device

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())


def sort_by_row(rows: torch.Tensor, num_rows: int):
    """``(indptr, order)`` that turn a COO list into CSR: entry ``order[k]`` goes to position ``k``,
    row ``r`` holding positions ``indptr[r]:indptr[r+1]`` (int64; stable, so a row keeps its entries'
    order).

    >>> indptr, order = sort_by_row(torch.tensor([2, 0, 2]), 3)
    >>> indptr.tolist(), order.tolist()
    ([0, 1, 1, 3], [1, 0, 2])
    """
    rows = rows.long()
    indptr = torch.zeros(num_rows + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=num_rows), 0, out=indptr[1:])
    return indptr, torch.argsort(rows, stable=True)


def row_positions(indptr: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the CSR positions of every entry of ``rows``, row after row in CSR order; entries per row),
    on ``indptr``'s device in torch ops, with one host read (the total, the output's size).

    >>> [t.tolist() for t in row_positions(torch.tensor([0, 2, 2, 5]), torch.tensor([2, 0]))]
    [[2, 3, 4, 0, 1], [3, 2]]
    """
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    total = int(counts.sum())  # the one host read
    firsts = torch.cumsum(counts, 0) - counts  # where each row's run starts in the output
    shift = torch.repeat_interleave(starts - firsts, counts, output_size=total)
    return torch.arange(total, device=indptr.device) + shift, counts
