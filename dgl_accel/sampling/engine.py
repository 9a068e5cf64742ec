"""Transit-parallel sampling engine (NextDoor, EuroSys'21).

A sampling step maps (sample, transit) pairs to work.  The engine inverts that map: all samples
sharing a transit vertex are processed together (sort by transit, run-length encode, scan), and
transits are split by their work (neighbours to draw across their samples) into three kernel
classes:

* sub-warp (< 32 slots)  -> many transits per program, their slots side by side in one tile
                            (NextDoor's sub-warp: lanes of one warp serve several transits);
* block (32 .. 1024)     -> one transit per program, its slots spread across the program
                            (NextDoor's thread block);
* grid (> 1024)          -> several programs per transit, each filling a chunk of 1024 slots
                            (NextDoor's grid kernel).  Floyd's rule (no replacement, more
                            neighbours than slots) is sequential over slots: there the first
                            program of a transit fills its chunks in order.

In Triton a "program" is a thread block; ``num_warps`` warps execute each tile, so the sub-warp
class maps 32 transits x K_PAD slots onto one program rather than onto individual warps.
Thresholds are configurable (``SUBWARP_MAX``, ``BLOCK_MAX``), defaults from the paper.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core import backend

SUBWARP_MAX = 32
BLOCK_MAX = 1024


@dataclass(frozen=True)
class TransitGroups:
    """Samples grouped by transit: transit ``transits[g]`` serves ``order[ptr[g]:ptr[g+1]]``."""

    transits: torch.Tensor  # unique transit vertices, ascending
    ptr: torch.Tensor       # int64 [G+1] offsets into ``order``
    order: torch.Tensor     # sample indices sorted by transit (stable)

    @property
    def counts(self) -> torch.Tensor:
        return self.ptr[1:] - self.ptr[:-1]


def group_by_transit(transit_of_sample: torch.Tensor) -> TransitGroups:
    """Invert sample -> transit: sort by transit, run-length encode, exclusive scan."""
    order = torch.argsort(transit_of_sample, stable=True)
    transits, counts = torch.unique_consecutive(transit_of_sample[order], return_counts=True)
    ptr = torch.zeros(transits.numel() + 1, dtype=torch.int64, device=transit_of_sample.device)
    torch.cumsum(counts, 0, out=ptr[1:])
    return TransitGroups(transits=transits, ptr=ptr, order=order)


def classify(work: torch.Tensor, subwarp_max: int = SUBWARP_MAX, block_max: int = BLOCK_MAX):
    """Indices of the transits in the sub-warp, block and grid classes, by work per transit."""
    if not 0 < subwarp_max <= block_max:
        raise ValueError(f"expected 0 < subwarp_max <= block_max (got {subwarp_max}, {block_max}).")
    sub = (work < subwarp_max).nonzero().flatten()
    blk = ((work >= subwarp_max) & (work <= block_max)).nonzero().flatten()
    grid = (work > block_max).nonzero().flatten()
    return sub, blk, grid


def neighbor_choice_triton(indptr: torch.Tensor, transits: torch.Tensor, fanout: int, *, seed: int, step: int,
                           num_nodes: int, replace: bool, counter_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The Triton launcher of ``_neighbor_choice_kernel``: positions [T, fanout] (-1 padded), the
    same values as :func:`dgl_accel.sampling.choice.neighbor_choice` for the same arguments.
    ``counter_ids`` (int64 [T], < num_nodes) replace the transit ids in the Philox counters."""
    from ..kernels.sampling import SUBWARP_BLOCK_T, k_pad
    from ..core.launch import triton_kernel

    transits = transits.to(torch.int64).contiguous()
    has_cids = counter_ids is not None
    cids = counter_ids.to(torch.int64).contiguous() if has_cids else transits
    out = torch.full((transits.numel(), fanout), -1, dtype=torch.int64, device=transits.device)
    if transits.numel() == 0 or fanout == 0:
        return out
    if fanout > BLOCK_MAX:  # grid class
        from ..kernels.sampling import GRID_CHUNK

        kernel = triton_kernel("sampling", "_neighbor_choice_grid_kernel", transits.device)
        grid = (transits.numel(), -(-fanout // GRID_CHUNK))
        kernel[grid](indptr.to(torch.int64).contiguous(), transits, cids, out, fanout, seed, step, num_nodes,
                     REPLACE=bool(replace), CHUNK=GRID_CHUNK, HAS_CIDS=has_cids, num_warps=8)
        return out
    kernel = triton_kernel("sampling", "_neighbor_choice_kernel", transits.device)
    block_t = SUBWARP_BLOCK_T if fanout < SUBWARP_MAX else 1  # sub-warp class, else block class
    grid = (-(-transits.numel() // block_t),)
    kernel[grid](indptr.to(torch.int64).contiguous(), transits, cids, out, transits.numel(), fanout, seed, step,
                 num_nodes, REPLACE=bool(replace), BLOCK_T=block_t, K_PAD=k_pad(fanout), HAS_CIDS=has_cids,
                 num_warps=4)
    return out


def choose_neighbors(indptr, transits, fanout, *, seed, step, num_nodes, replace=False):
    """Uniform neighbour choice on the path the backend picks (Triton kernel or native CPU)."""
    path = backend.choose_path(indptr, transits)
    backend.record("neighbor_choice", path, transits.device)
    if path == "triton" and fanout >= 0:
        return neighbor_choice_triton(indptr, transits, fanout, seed=seed, step=step, num_nodes=num_nodes,
                                      replace=replace)
    from .choice import neighbor_choice

    return neighbor_choice(indptr, transits, fanout, seed=seed, step=step, num_nodes=num_nodes, replace=replace)
