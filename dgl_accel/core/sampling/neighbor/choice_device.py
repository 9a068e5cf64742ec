"""Weighted neighbour choice on the CSR's device: the positions of the CPU path
(:func:`.choice.weighted_choice_np`, whose docstring on :func:`.choice.weighted_neighbor_choice` is
the specification) computed with torch ops where the tables live, for :mod:`.sample_device`.

The per-graph weight tables (row-normalised prefix sums, weights in CSR order, positive edges per
row) are built once per (CSR, weight tensor) on the host and copied to the device once
(:meth:`.choice.WeightTables.on`); a call then reads nothing graph-sized.  Draws are the same
counter-based Philox uniforms as the CPU path's, so the samples are the CPU path's, slot for slot:

* with replacement (inverse CDF): the same float64 target ``base + u * (top - base)`` and the same
  global binary search over the prefix sums, one host read (the rows with a positive weight);
* without replacement (Efraimidis-Spirakis): every positive-weight in-edge of a transit gets the
  key ``log(u) / w`` (rows with at most ``fanout`` such edges keep CSR order); two stable sorts
  give each row's keys in decreasing order, ties by CSR position; three host reads (the in-edges,
  the positive ones, the chosen ones);
* ``fanout`` -1: every positive-weight in-edge in CSR order, two host reads.

``log`` is the one operation whose last bit may differ between numpy and a device's math library;
a differing bit can only swap two keys of one row that agree to the last bit, which no test graph
and no realistic weight produces.  This module imports no numpy (an import-linter contract).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...csr import row_positions
from ..rng import philox_uniform

__all__ = ["DeviceWeights", "weighted_choose_device", "HOST_READS"]

# host reads of one choice: with replacement, fanout -1, without replacement
HOST_READS = {"replace": 1, "all": 2, "without": 3}


@dataclass(frozen=True)
class DeviceWeights:
    """:class:`.choice.WeightTables` on a device: ``cum0`` float64 [E + 1] prefix sums of the
    row-normalised weights in CSR order, ``w`` float64 [E] the weights in CSR order, ``npos``
    int64 [N] positive-weight in-edges per row."""
    cum0: torch.Tensor
    w: torch.Tensor
    npos: torch.Tensor


def weighted_choose_device(weights: DeviceWeights, indptr: torch.Tensor, v: torch.Tensor, fanout: int, *,
                           seed: int, step: int, num_nodes: int, replace: bool):
    """(CSR positions of the chosen in-edges of the transits ``v``, grouped by transit in slot
    order; counts per transit), int64 on ``v``'s device: ``_valid(weighted_choice_np(...))`` of the
    CPU path for checked arguments."""
    t = v.shape[0]
    start, end = indptr[v], indptr[v + 1]
    npos = weights.npos[v]
    if fanout == 0 or t == 0:
        return v.new_zeros(0), torch.zeros(t, dtype=torch.int64, device=v.device)
    if replace and fanout > 0:
        slots = torch.arange(fanout, dtype=torch.int64, device=v.device)
        counter = (step * num_nodes + v)[:, None] * fanout + slots  # c(i, j), int64 wrapping as numpy's
        u = philox_uniform(seed, counter).to(torch.float64)
        base, top = weights.cum0[start], weights.cum0[end]
        target = base[:, None] + u * (top - base)[:, None]
        cum = weights.cum0[1:]
        k = torch.searchsorted(cum, target, right=True)  # first k with W(k) > target
        last = torch.searchsorted(cum, top, right=False)  # the row's last positive edge
        k = torch.where(k >= end[:, None], last[:, None], k)  # rounding pushed past the row
        ok = npos > 0
        return k[ok].reshape(-1), ok.to(torch.int64) * fanout  # the one read
    pos, deg = row_positions(indptr, v)  # read 1: every in-edge of the transits
    row = torch.repeat_interleave(torch.arange(t, device=v.device), deg, output_size=pos.numel())
    kept = (weights.w[pos] > 0).nonzero().squeeze(1)  # read 2: the positive ones, CSR order kept
    pos, row = pos[kept], row[kept]
    if fanout == -1:
        return pos, npos
    heavy = npos[row] > fanout
    u = philox_uniform(seed, step * weights.w.shape[0] + pos).to(torch.float64)
    key = torch.where(heavy, torch.log(u) / weights.w[pos], torch.zeros_like(u))  # light rows: CSR order
    by_key = torch.sort(key, descending=True, stable=True).indices  # ties: lower CSR position first
    order = by_key[torch.sort(row[by_key], stable=True).indices]  # then by row, key order kept
    first = torch.cumsum(npos, 0) - npos
    rank = torch.arange(order.shape[0], device=v.device) - first[row[order]]
    chosen = order[(rank < fanout).nonzero().squeeze(1)]  # read 3
    return pos[chosen], torch.clamp(npos, max=fanout)
