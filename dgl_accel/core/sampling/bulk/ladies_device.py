"""Matrix-based bulk LADIES on the device: one layer of :func:`.ladies.sample_layer` (with the
matrix of :func:`.ladies.ladies_matrix`) for ``k`` minibatches at once, in torch ops and ITS's
weighted kernel where the gathered in-edges live, with the CPU path's draws.

The steps are :mod:`.ladies`'s: ``P_R`` (parallel edges summed), ``P = Q_B (P_R ∘ P_R)``,
NORM (:func:`.its.quantise`'s integer weights, exact as float64 prefix sums), SAMPLE
(``_its_rows_kernel``, one row per minibatch, label ``layer * n``) and the block-diagonal column
extraction with the node-at-a-time sampler's weights.  The sums of ``P_R`` and ``P`` add floats: on
the CPU in the numpy path's order, on a GPU in the atomics' order, so there a sum may differ in its
last bit; a quantised weight changes only if that bit crosses an integer of ``2^24 x`` the row's
largest value, and a draw only if its uniform falls in that one unit.  The weights of the kept edges
agree with the CPU path's to rounding (the CPU's row totals are pairwise sums).  Host reads per
layer: :data:`HOST_READS` (the matrix's two ``unique`` calls, the rows that draw and their picks,
the drawn columns, the kept edges, the per-minibatch sizes).  This module imports no numpy (an
import-linter contract).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from ...backend import record
from ..arrays import index_counts
from .its import W_SCALE
from .neighbor_device import its_draws_device, signed_keys

__all__ = ["ladies_layer_device", "HOST_READS"]

HOST_READS = 7


def ladies_layer_device(row_pos: torch.Tensor, src: torch.Tensor, eid: torch.Tensor, c: torch.Tensor,
                        sizes: Sequence[int], n: int, layer: int, s: int, keys: Sequence[int], replace: bool):
    """Per minibatch ``(destination position in V_b, source, edge id, weight)`` of
    :func:`.ladies.sample_layer` for the gathered in-edges ``(row_pos, src, eid, c)`` of the
    destinations of ``k = len(sizes)`` minibatches (minibatch b owns ``sizes[b]`` consecutive rows)."""
    dev, k = src.device, len(sizes)
    record("bulk_its", "triton", dev)
    sizes_t = torch.tensor(list(sizes), dtype=torch.int64, device=dev)
    row_ptr = torch.cat([sizes_t.new_zeros(1), torch.cumsum(sizes_t, 0)])
    c = c.to(torch.float64)
    # P_R: one entry per (row, u), parallel edges summed; P: per (minibatch, u), squares summed
    key, inv = torch.unique(row_pos * n + src, return_inverse=True)
    entry = torch.zeros(key.shape[0], dtype=torch.float64, device=dev).index_add_(0, inv, c)
    batch = torch.searchsorted(row_ptr, torch.div(key, n, rounding_mode="floor"), right=True) - 1
    key2, inv2 = torch.unique(batch * n + key % n, return_inverse=True)
    p_val = torch.zeros(key2.shape[0], dtype=torch.float64, device=dev).index_add_(0, inv2, entry * entry)
    p_cols, prow = key2 % n, torch.div(key2, n, rounding_mode="floor")
    p_cnt = index_counts(prow, k)
    p_ptr = torch.cat([p_cnt.new_zeros(1), torch.cumsum(p_cnt, 0)])
    tot = torch.zeros(k, dtype=torch.float64, device=dev).index_add_(0, prow, p_val)
    p = p_val / torch.where(p_cnt > 0, tot, torch.ones_like(tot))[prow]
    # NORM (quantise) and SAMPLE: one weighted row per minibatch
    rowmax = torch.zeros(k, dtype=torch.float64, device=dev).scatter_reduce_(0, prow, p_val, "amax")
    w = torch.where(p_val > 0, torch.clamp_min(torch.floor(p_val / rowmax[prow] * W_SCALE), 1.0),
                    torch.zeros_like(p_val))
    prefix = torch.cat([w.new_zeros(1), torch.cumsum(w, 0)])
    flat, counts = its_draws_device(p_ptr, torch.arange(k, device=dev), signed_keys(keys, dev), 0, s, replace,
                                    prefix, labels=torch.full((k,), layer * n, dtype=torch.int64, device=dev))
    full = torch.zeros(k, dtype=torch.bool, device=dev) if replace else p_cnt <= s
    # column extraction: keep edge (v in V_b, u) iff minibatch b drew u
    pick_key = torch.repeat_interleave(torch.arange(k, device=dev), counts, output_size=flat.shape[0]) * n \
        + p_cols[flat]
    drawn, times = torch.unique(pick_key, return_counts=True)
    e_batch = torch.searchsorted(row_ptr, row_pos, right=True) - 1
    e_key = e_batch * n + src
    at = torch.searchsorted(drawn, e_key).clamp_max(max(drawn.shape[0] - 1, 0))
    keep = (drawn[at] == e_key) if drawn.shape[0] else torch.zeros_like(e_key, dtype=torch.bool)
    kept = keep.nonzero().squeeze(1)
    pu = p[torch.searchsorted(key2, e_key[kept])]  # p(u) of each kept edge: its entry in P (row b, column u)
    cc = c[kept]
    if replace:
        wt = cc * times[at[kept]] / (s * pu)
    else:
        wt = torch.where(full[e_batch[kept]], cc, cc / torch.clamp_max(s * pu, 1.0))
    eb = e_batch[kept]
    per = index_counts(eb, k).tolist()
    return [(rp - row_ptr[b], sr, ei, ww) for b, (rp, sr, ei, ww) in enumerate(zip(
        *(torch.split(t, per) for t in (row_pos[kept], src[kept], eid[kept], wt))))]
