"""One layer of neighbour sampling that stays on the CSR's device (family ``neighbor``).

:func:`.neighbor.sample_neighbors` runs this when the backend picks the Triton path (a CUDA CSR, or
``DGL_ACCEL_BACKEND=triton`` on the CPU, where the kernel is interpreted) and no ``prob`` is given.
The choice kernel writes padded positions [T, fanout]; compaction, the destinations and the
gathers are torch ops on the same device, so nothing graph-sized crosses to the host.

Host reads (:data:`HOST_READS_PER_LAYER`): the seeds' range check (one read of min and max) and the
number of sampled edges (the compaction's output size).  The samples are the CPU path's, sample for
sample: the same counter-based draws (:mod:`.choice`), compacted in the same order (by seed, then
slot).  This module and its launcher import no numpy (an import-linter contract).
"""
from __future__ import annotations

import torch

from ..csr import Structure
from .neighbor_triton import neighbor_choice_triton

__all__ = ["sample_neighbors_device", "HOST_READS_PER_LAYER"]

HOST_READS_PER_LAYER = 2  # the seeds' range check, the number of sampled edges


def sample_neighbors_device(csr: Structure, seeds: torch.Tensor, fanout: int, *, seed: int, step: int,
                            replace: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(src, dst, eids)`` of :func:`.neighbor.sample_neighbors` for checked arguments, on the
    CSR's device; ``fanout`` -1 takes every in-edge of each seed, in CSR order."""
    seeds = seeds.to(device=csr.device, dtype=torch.int64)
    if fanout == -1:
        starts = csr.indptr[seeds]
        counts = csr.indptr[seeds + 1] - starts
        total = int(counts.sum())  # the one size read
        firsts = torch.cumsum(counts, 0) - counts  # where each seed's run starts in the output
        flat = torch.arange(total, device=csr.device) + torch.repeat_interleave(starts - firsts, counts,
                                                                                output_size=total)
    else:
        pos = neighbor_choice_triton(csr.indptr, seeds, fanout, seed=seed, step=step, num_nodes=csr.num_rows,
                                     replace=replace)
        valid = pos >= 0
        counts = valid.sum(1)
        flat = pos[valid]  # the one size read: row-major, so by seed, then slot
    dst = torch.repeat_interleave(seeds, counts, output_size=flat.numel())
    return csr.indices[flat], dst.to(csr.indices.dtype), csr.eids[flat]
