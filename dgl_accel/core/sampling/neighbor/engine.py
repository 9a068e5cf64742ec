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
Thresholds are configurable (``SUBWARP_MAX``, ``BLOCK_MAX``), defaults from the paper.  The
launcher of the neighbour-choice kernels (:mod:`.launchers`) sorts transits into the classes;
k-hop sampling (:mod:`.khop`) groups samples by transit with :func:`group_by_transit`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import expected

__all__ = ["SUBWARP_MAX", "BLOCK_MAX", "TransitGroups", "group_by_transit", "classify"]

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
    """Invert sample -> transit: sort by transit, run-length encode, exclusive scan.

    >>> grp = group_by_transit(torch.tensor([5, 2, 5]))
    >>> grp.transits.tolist(), grp.ptr.tolist(), grp.order.tolist()
    ([2, 5], [0, 1, 3], [1, 0, 2])
    """
    order = torch.argsort(transit_of_sample, stable=True)
    transits, counts = torch.unique_consecutive(transit_of_sample[order], return_counts=True)
    ptr = torch.zeros(transits.numel() + 1, dtype=torch.int64, device=transit_of_sample.device)
    torch.cumsum(counts, 0, out=ptr[1:])
    return TransitGroups(transits=transits, ptr=ptr, order=order)


def classify(work: torch.Tensor, subwarp_max: int = SUBWARP_MAX, block_max: int = BLOCK_MAX):
    """Indices of the transits in the sub-warp, block and grid classes, by work per transit.

    >>> [c.tolist() for c in classify(torch.tensor([3, 100, 5000]))]
    [[0], [1], [2]]
    """
    if not 0 < subwarp_max <= block_max:
        raise expected("0 < subwarp_max <= block_max", f"{subwarp_max}, {block_max}",
                       "pass thresholds with subwarp_max <= block_max, e.g. the defaults 32 and 1024.")
    sub = (work < subwarp_max).nonzero().flatten()
    blk = ((work >= subwarp_max) & (work <= block_max)).nonzero().flatten()
    grid = (work > block_max).nonzero().flatten()
    return sub, blk, grid
