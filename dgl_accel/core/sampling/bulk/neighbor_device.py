"""Bulk neighbour sampling that stays on the device (family ``bulk``): every layer of ``k``
minibatches at once, on the device of the adjacency (``P = Q @ A`` is ``A``'s rows, sampled by
ITS's exact uniform rule, or by its weighted rule over the multiplicities where parallel edges were
merged; :mod:`.its`).

:func:`sample_bulk_device` gives :func:`.neighbor.sample_layer`'s samples, sample for sample
(the same Philox draws: key per minibatch, label ``layer * n + node`` per row), as one
:class:`~..output.SamplerOutput` per minibatch.  Per layer, for all minibatches together: the rows
that draw run ``_its_rows_kernel`` (the other rows take all their entries), the picks are sorted
and compacted, the excluded edge ids dropped, and the sources relabelled per minibatch by one sort
over ``minibatch * n + id`` keys (:func:`..neighbor.sample_device.relabel_device`): no node-sized array,
nothing graph-sized crosses to the host.  Host reads per layer: :data:`HOST_READS_PER_BULK_LAYER`
(the rows that draw, the number of picks, the relabelling's two, the per-minibatch sizes), one more
with an exclusion (the kept edges).  This module imports no numpy (an import-linter contract).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from ...backend import record
from ...csr import row_positions
from ...launch import triton_kernel
from ..arrays import index_counts, signed64
from ..checks import expected
from ..neighbor.sample_device import relabel_device
from ..output import SampledLayer, SamplerOutput
from .its import LABEL_SHIFT, MAX_DRAWS

__all__ = ["sample_bulk_device", "its_draws_device", "HOST_READS_PER_BULK_LAYER", "signed_keys"]

HOST_READS_PER_BULK_LAYER = 5
SEARCH_ITERS = 41  # the weighted rule's binary search: enough for rows of up to 2^40 entries, no read of the max


def signed_keys(keys: Sequence[int], device) -> torch.Tensor:
    """Philox keys in [0, 2^64) as the int64 words the kernel reads (two's complement)."""
    return torch.tensor([signed64(k) for k in keys], dtype=torch.int64, device=device)


def its_draws_device(indptr: torch.Tensor, rows: torch.Tensor, key_of_row: torch.Tensor, label_base: int,
                     fanout: int, replace: bool, prefix: torch.Tensor | None = None,
                     labels: torch.Tensor | None = None):
    """(CSR positions of every row's picks, grouped by row; picks per row): ITS's uniform rule, or
    with ``prefix`` (the quantised entry weights summed before each position, E + 1 values) its
    weighted rule; ``labels``: each row's counter label (default ``row + label_base``)."""
    from ....kernels.bulk_sampling import its_block_r, its_num_warps, s_pad  # lazy: fixes Triton's mode

    start = indptr[rows]
    deg = indptr[rows + 1] - start
    if fanout == -1:
        return row_positions(indptr, rows)
    if replace:
        counts = torch.where(deg > 0, torch.full_like(deg, fanout), torch.zeros_like(deg))
        draw = torch.arange(rows.shape[0], device=rows.device)
    else:
        counts = deg.clamp(max=fanout)
        draw = torch.nonzero(deg > fanout).flatten()  # read: the rows with more entries than picks
    S = s_pad(max(fanout, 1))
    pad = start[:, None] + torch.arange(fanout, device=rows.device)  # take-all rows: their first deg
    R = draw.shape[0]
    if R and fanout:
        out = torch.empty((R, S), dtype=torch.int64, device=rows.device)
        dummy = torch.zeros(1, dtype=torch.float64, device=rows.device)
        uniform = prefix is None
        if uniform:
            before = total = dummy
        else:  # the rows' prefix before their first entry and their totals, as RowSet.totals
            st = start[draw]
            before = prefix[st]
            total = prefix[st + deg[draw]] - before
        label = rows[draw] + label_base if labels is None else labels[draw]
        triton_kernel("bulk_sampling", "_its_rows_kernel", rows.device)[(-(-R // its_block_r(S)),)](
            dummy if uniform else prefix[1:], start[draw].contiguous(), deg[draw].contiguous(),
            key_of_row[draw].contiguous(), label.contiguous(), before.contiguous(), total.contiguous(), out, R,
            fanout, MAX_DRAWS, 1 if uniform else SEARCH_ITERS, UNIFORM=uniform, REPLACE=replace,
            BLOCK_R=its_block_r(S), S_PAD=S, num_warps=its_num_warps(uniform))
        picks = out[:, :fanout]
        pad[draw] = picks if replace else torch.sort(picks, dim=1).values  # the spec: ascending column
    return pad[torch.arange(fanout, device=rows.device)[None, :] < counts[:, None]], counts  # read: the picks


def sample_bulk_device(indptr: torch.Tensor, indices: torch.Tensor, eids: torch.Tensor, num_nodes: int,
                       batches: Sequence[torch.Tensor], keys: Sequence[int], fanouts: Sequence[int], *,
                       replace: bool, exclude: torch.Tensor | None = None,
                       prefix: torch.Tensor | None = None) -> list[SamplerOutput]:
    """Blocks of every minibatch: ``batches[b]`` (unique int64 seed ids, checked by the caller) keyed
    by ``keys[b]``; ``fanouts`` input layer first (DGL's order; layer ``step`` 0 is the last);
    ``exclude``: edge ids dropped after the draws.  The in-CSR ``(indptr, indices, eids)`` must be
    canonical (:class:`.matrix.Canonical`: columns ascending per row, parallel edges merged);
    with parallel edges, ``prefix`` is its :meth:`~.matrix.Canonical.weight_prefix` (ITS's
    weighted rule over the multiplicities), None without them.  Every tensor of the result is
    int64 on ``indptr``'s device."""
    device, n, k = indptr.device, int(num_nodes), len(batches)
    if len(fanouts) * n > 1 << (63 - LABEL_SHIFT):  # .bulk_sampling.row_label's bound: every label < 2^39
        raise expected("layers * num_nodes <= 2^39 (the rows' counter labels)", f"{len(fanouts)} x {n}",
                       "use fewer layers or partition the graph.")
    indptr, indices, eids = (t.to(torch.int64) for t in (indptr, indices, eids))
    exclude = None if exclude is None or exclude.numel() == 0 else exclude.to(device=device, dtype=torch.int64)
    record("bulk_its", "triton", device)
    key_words = signed_keys(keys, device)
    fronts = [b.to(device=device, dtype=torch.int64) for b in batches]
    sizes = [int(f.shape[0]) for f in fronts]
    size_t = torch.tensor(sizes, dtype=torch.int64, device=device)  # the same sizes on the device
    layers: list[list[SampledLayer]] = [[] for _ in range(k)]
    for step, fanout in enumerate(reversed(list(fanouts))):
        rows = torch.cat(fronts) if fronts else torch.empty(0, dtype=torch.int64, device=device)
        bid = torch.repeat_interleave(torch.arange(k, device=device), size_t, output_size=rows.shape[0])
        flat, counts = its_draws_device(indptr, rows, key_words[bid], step * n, fanout, replace, prefix)
        src, eid = indices[flat], eids[flat]
        if exclude is not None and eid.numel():
            keep = torch.nonzero(~torch.isin(eid, exclude)).flatten()  # read: the kept edges
            row_of = torch.repeat_interleave(torch.arange(rows.shape[0], device=device), counts,
                                             output_size=eid.numel())
            src, eid, row_of = src[keep], eid[keep], row_of[keep]
            counts = index_counts(row_of, rows.shape[0])
        ebid = torch.repeat_interleave(bid, counts, output_size=src.numel())
        new_keys, local = relabel_device(ebid * n + src, bid * n + rows)
        first_row = torch.cumsum(size_t, 0) - size_t
        new_bid = torch.div(new_keys, n, rounding_mode="floor")
        new_counts = index_counts(new_bid, k)
        new_before = torch.cumsum(new_counts, 0) - new_counts
        # relabel_device numbers the rows 0..R-1, then the new keys R..: per minibatch, rows 0..T_b-1
        # (the row's position in its frontier), then its new sources T_b..
        is_new = local >= rows.shape[0]
        local = torch.where(is_new, local - rows.shape[0] - new_before[ebid] + size_t[ebid], local - first_row[ebid])
        edge_counts = index_counts(bid, k, counts)
        sizes_e = torch.cat([edge_counts, new_counts]).tolist()  # read: the per-minibatch sizes
        news = torch.split(new_keys - new_bid * n, sizes_e[k:])
        offs = torch.cat([torch.zeros(1, dtype=torch.int64, device=device), torch.cumsum(counts, 0)])
        row0 = 0
        for b, (front, new, loc, e) in enumerate(zip(fronts, news, torch.split(local, sizes_e[:k]),
                                                      torch.split(eid, sizes_e[:k]))):
            indptr_b = offs[row0:row0 + sizes[b] + 1] - offs[row0]  # this minibatch's rows, from 0
            row0 += sizes[b]
            src_nodes = torch.cat([front, new])
            layers[b].insert(0, SampledLayer(dst_nodes=front, src_nodes=src_nodes, indptr=indptr_b, src_local=loc,
                                             eids=e))
            fronts[b] = src_nodes
        sizes = [s + m for s, m in zip(sizes, sizes_e[k:])]
        size_t = size_t + new_counts  # no upload per layer
    return [SamplerOutput(seeds=b.to(device=device, dtype=torch.int64), layers=tuple(ls))
            for b, ls in zip(batches, layers)]
