"""Temporal neighbour choice (PyG's ``time_attr`` sampling): a node of subgraph ``b`` draws only
in-edges whose time is at most its subgraph's seed time, uniformly among them
(``strategy="uniform"``, the core's counter-based choice, with or without replacement) or the
latest ones (``"last"``: the ``fanout`` entries of greatest time, ties in CSR order).  An entry's
time is its edge's (edge-level time) or its source node's (node-level time).

Each row of the in-CSR is sorted by entry time once (:func:`by_time`), so the entries a node may
take at a limit form a prefix of its row, found for every frontier node at once with one sorted
search over ``row * U + rank(time)`` (``U`` distinct times): no per-row loop, on the CSR's device.
The uniform choice then runs on a virtual CSR whose row ``i`` is frontier node ``i``'s prefix (keyed
by frontier position), and positions map back to the real CSR.  Both paths (the Triton kernels
and the CPU loops) take the virtual CSR as they take any CSR, so they give the same samples.

>>> csr = Structure(indptr=torch.tensor([0, 3]), indices=torch.tensor([5, 6, 7]), eids=torch.tensor([0, 1, 2]),
...                 num_rows=1, num_cols=8, device=torch.device("cpu"))
>>> csr, times = by_time(csr, torch.tensor([30, 10, 20]))
>>> csr.indices.tolist(), times.prefix(csr.indptr, torch.tensor([0, 0]), torch.tensor([25, 5])).tolist()
([6, 7, 5], [2, 0])
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...csr import Structure

__all__ = ["EntryTimes", "by_time", "temporal_positions", "STRATEGIES"]

STRATEGIES = ("uniform", "last")


@dataclass(frozen=True, eq=False)
class EntryTimes:
    """The entry times of a CSR sorted by time within each row, as searchable keys."""

    values: torch.Tensor  # the distinct entry times, increasing
    keys: torch.Tensor    # per CSR entry: row * len(values) + rank of its time (increasing over the CSR)

    def prefix(self, indptr: torch.Tensor, rows: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        """Per (row, limit): how many of the row's first entries have time <= limit."""
        u = self.values.numel()
        rank = torch.searchsorted(self.values, limits.to(self.values.dtype), right=True) - 1  # -1: none
        ends = torch.searchsorted(self.keys, rows * u + rank, right=True)
        return ends - indptr[rows]


def by_time(csr: Structure, entry_time: torch.Tensor) -> tuple[Structure, EntryTimes]:
    """``csr`` with each row's entries in increasing ``entry_time`` (one time per CSR entry, ties
    kept in CSR order), and their :class:`EntryTimes`."""
    num_rows = csr.num_rows
    counts = csr.indptr[1:] - csr.indptr[:-1]
    row = torch.repeat_interleave(torch.arange(num_rows, device=csr.indptr.device), counts,
                                  output_size=csr.indices.numel())
    values, rank = torch.unique(entry_time, sorted=True, return_inverse=True)
    keys = row * max(values.numel(), 1) + rank
    keys, order = torch.sort(keys, stable=True)
    sorted_csr = Structure(csr.indptr, csr.indices[order], csr.eids[order], csr.num_rows, csr.num_cols, csr.device)
    return sorted_csr, EntryTimes(values, keys)


def temporal_positions(csr: Structure, times: EntryTimes, frontier: torch.Tensor, limits: torch.Tensor, fanout: int,
                       strategy: str, choose) -> tuple[torch.Tensor, torch.Tensor]:
    """(CSR positions of the chosen in-edges, grouped by frontier node; counts per frontier node)
    of ``frontier`` (node ids, repeats allowed) at ``limits`` (one time each).  ``choose(virtual,
    transits)``: the path's uniform choice on a CSR, giving (flat positions, counts)."""
    indptr = csr.indptr
    start = indptr[frontier]
    allowed = times.prefix(indptr, frontier, limits)
    if strategy == "last" or fanout < 0:
        take = allowed if fanout < 0 else allowed.clamp(max=fanout)
        first = start + allowed - take
        offsets = torch.arange(int(take.sum()), device=indptr.device)
        owner = torch.repeat_interleave(torch.arange(frontier.numel(), device=indptr.device), take,
                                        output_size=offsets.numel())
        base = torch.cumsum(take, 0) - take
        return first[owner] + offsets - base[owner], take
    vptr = torch.zeros(frontier.numel() + 1, dtype=indptr.dtype, device=indptr.device)
    vptr[1:] = torch.cumsum(allowed, 0)
    virtual = Structure(vptr, vptr.new_empty(0), vptr.new_empty(0), frontier.numel(), csr.num_cols, csr.device)
    flat, counts = choose(virtual, torch.arange(frontier.numel(), device=indptr.device))
    flat, counts = torch.as_tensor(flat, device=indptr.device), torch.as_tensor(counts, device=indptr.device)
    owner = torch.repeat_interleave(torch.arange(frontier.numel(), device=indptr.device), counts,
                                    output_size=flat.numel())
    return start[owner] + flat - vptr[owner], counts
