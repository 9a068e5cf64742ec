"""Neighbour sampling that stays on the CSR's device (family ``neighbor``): one layer
(:func:`sample_neighbors_device`) and multi-layer blocks (:func:`sample_layers_device`).

:func:`.sample.sample_neighbors` and :func:`.sample.sample_layers` run these when the backend
picks the Triton path (a CUDA CSR, or ``DGL_ACCEL_BACKEND=triton`` on the CPU, where the kernel is
interpreted).  The uniform choice kernel writes padded positions [T, fanout] (a weighted choice
runs :mod:`.choice_device`'s torch ops instead); compaction, exclusion, relabelling (sorts and
searches over the sampled edges, no node-sized array) and the gathers are torch ops on the same
device, so nothing graph-sized crosses to the host.

Host reads: :data:`HOST_READS_PER_LAYER` for one layer (the seeds' range check, one read of min and
max, and the number of sampled edges); for blocks, the range check once and
:data:`HOST_READS_PER_BLOCK_LAYER` per layer (sample count, distinct sources, new sources), one more
per layer with an exclusion (the kept edges); a weighted choice adds :data:`WEIGHTED_EXTRA_READS` a
layer.  Distinct seeds (checked once: :data:`HOST_READS_DISTINCT_SEEDS`) save one read a layer: the
new sources' count follows from the distinct ids of destinations and sources together.  The
samples are the CPU path's, sample for sample: the same counter-based draws (:mod:`.choice`),
compacted and relabelled in the same order.  This module and its launcher import no numpy (an
import-linter contract).
"""
from __future__ import annotations

import torch

from ...csr import Structure, row_positions
from ..arrays import index_counts
from .choice_device import HOST_READS as WEIGHTED_READS
from .choice_device import DeviceWeights, weighted_choose_device
from .launchers import neighbor_choice_triton

__all__ = ["sample_neighbors_device", "sample_layers_device", "choose_device", "relabel_device",
           "HOST_READS_PER_LAYER", "HOST_READS_PER_BLOCK_LAYER", "HOST_READS_DISTINCT_SEEDS", "WEIGHTED_EXTRA_READS"]

HOST_READS_PER_LAYER = 2  # sample_neighbors: the seeds' range check, the number of sampled edges
# sample_layers: one range check in all, then per layer the sample count, the distinct sources and the
# new ones (and the kept edges with an exclusion)
HOST_READS_PER_BLOCK_LAYER = 3
# with distinct seeds: one read more in all (the check), one less per layer (the relabelling's second)
HOST_READS_DISTINCT_SEEDS = 1
# a weighted choice reads the host more than the uniform one's single size read (3 at most, see
# :mod:`.choice_device`): add this to either bound
WEIGHTED_EXTRA_READS = max(WEIGHTED_READS.values()) - 1


def choose_device(csr: Structure, seeds: torch.Tensor, fanout: int, seed: int, step: int, replace: bool,
                  weights: DeviceWeights | None):
    """(CSR positions of the chosen in-edges, grouped by seed then slot; counts per seed)."""
    if weights is not None:
        return weighted_choose_device(weights, csr.indptr, seeds, fanout, seed=seed, step=step,
                                      num_nodes=csr.num_rows, replace=replace)
    if fanout == -1:
        return row_positions(csr.indptr, seeds)  # the one size read
    pos = neighbor_choice_triton(csr.indptr, seeds, fanout, seed=seed, step=step, num_nodes=csr.num_rows,
                                 replace=replace)
    valid = pos >= 0
    return pos[valid], valid.sum(1)  # the one size read: row-major, so by seed, then slot


def sample_neighbors_device(csr: Structure, seeds: torch.Tensor, fanout: int, *, seed: int, step: int,
                            replace: bool, weights: DeviceWeights | None = None):
    """``(src, dst, eids)`` of :func:`.sample.sample_neighbors` for checked arguments, on the
    CSR's device; ``fanout`` -1 takes every in-edge of each seed, in CSR order; ``weights``
    (:meth:`.choice.WeightTables.on`) make the choice weighted."""
    seeds = seeds.to(device=csr.device, dtype=torch.int64)
    flat, counts = choose_device(csr, seeds, fanout, seed, step, replace, weights)
    dst = torch.repeat_interleave(seeds, counts, output_size=flat.numel())
    return csr.indices[flat], dst.to(csr.indices.dtype), csr.eids[flat]


def relabel_device(src: torch.Tensor, dst: torch.Tensor, distinct: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(new sources, local ids of ``src``) of a block with destinations ``dst``: as
    :func:`.sample.relabel_sources`, the destinations keep 0..T-1 (a repeated one: its last
    position) and the other sources get T.. in increasing id order.  Work O((E + T) log), no
    node-sized array; two host reads (the distinct sources, the new ones), one when the caller
    knows the destinations are ``distinct`` (the new ones are then the distinct ids of both, less T)."""
    t = dst.shape[0]
    if distinct and t:
        u, inv = torch.unique(torch.cat([dst, src]), sorted=True, return_inverse=True)
        inv, num_new = inv[t:], u.shape[0] - t
    else:
        u, inv = torch.unique(src, sorted=True, return_inverse=True)
        num_new = None
    if t == 0:
        return u, inv
    d_sorted, d_perm = torch.sort(dst, stable=True)
    at = (torch.searchsorted(d_sorted, u, right=True) - 1).clamp_min(0)  # the last equal destination
    is_dst = d_sorted[at] == u
    rank = torch.cumsum(~is_dst, 0) - 1
    local_u = torch.where(is_dst, d_perm[at], t + rank)
    num_new = int((~is_dst).sum()) if num_new is None else num_new
    new = u[torch.argsort(is_dst.to(torch.uint8), stable=True)[:num_new]]
    return new, local_u[inv]


def sample_layers_device(csr: Structure, seeds: torch.Tensor, fanouts: list[int], *, seed: int, replace: bool,
                         exclude: torch.Tensor | None, weights: DeviceWeights | None = None):
    """:func:`.sample.sample_layers` on the CSR's device, for checked arguments: a list of
    ``(dst_nodes, src_nodes, indptr, src_local, eids)``, input layer first, all int64; ``weights``
    as :func:`sample_neighbors_device`'s."""
    cur = seeds.to(device=csr.device, dtype=torch.int64)
    exclude = None if exclude is None or exclude.numel() == 0 else exclude.to(device=csr.device, dtype=torch.int64)
    ordered = torch.sort(cur).values
    # distinct seeds (what loaders pass) keep every layer's destinations distinct: one relabel read less
    distinct = cur.shape[0] < 2 or not bool((ordered[1:] == ordered[:-1]).any())
    layers = []
    for step, fanout in enumerate(reversed(fanouts)):
        flat, counts = choose_device(csr, cur, fanout, seed, step, replace, weights)
        src, eid = csr.indices[flat].to(torch.int64), csr.eids[flat].to(torch.int64)
        if exclude is not None and eid.numel():
            keep = ~torch.isin(eid, exclude)
            rows = torch.arange(cur.shape[0], device=cur.device)
            row = torch.repeat_interleave(rows, counts, output_size=eid.numel())
            counts = index_counts(row, counts.shape[0], keep.to(torch.int64))
            kept = keep.nonzero().squeeze(1)  # the one read of the exclusion
            src, eid = src[kept], eid[kept]
        new, src_local = relabel_device(src, cur, distinct)
        indptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
        src_nodes = torch.cat([cur, new])
        layers.insert(0, (cur, src_nodes, indptr, src_local, eid))
        cur = src_nodes
    return layers
