"""Launcher of the neighbour-choice kernels (``kernels/sampling.py``): ``_neighbor_choice_kernel``
(sub-warp and block classes of :mod:`.engine`) and ``_neighbor_choice_grid_kernel`` (grid class).
Compiled on CUDA tensors, interpreted on CPU tensors when backend "triton" is forced; the same
positions as the CPU twin :func:`.choice.neighbor_choice`.
"""
from __future__ import annotations

import torch

from ...launch import triton_kernel
from ..arrays import signed64
from .engine import BLOCK_MAX, SUBWARP_MAX

__all__ = ["neighbor_choice_triton"]


def neighbor_choice_triton(indptr: torch.Tensor, transits: torch.Tensor, fanout: int, *, seed: int, step: int,
                           num_nodes: int, replace: bool, counter_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The Triton launcher of ``_neighbor_choice_kernel``: positions [T, fanout] (-1 padded), the
    same values as :func:`.choice.neighbor_choice` for the same arguments.
    ``counter_ids`` (int64 [T], < num_nodes) replace the transit ids in the Philox counters."""
    from ....kernels.sampling import SUBWARP_BLOCK_T, k_pad  # lazy: Triton's mode is fixed per process

    transits = transits.to(torch.int64).contiguous()
    seed = signed64(seed)  # the kernel's int64 key: the same 64 bits
    has_cids = counter_ids is not None
    cids = counter_ids.to(torch.int64).contiguous() if has_cids else transits
    out = torch.full((transits.numel(), fanout), -1, dtype=torch.int64, device=transits.device)
    if transits.numel() == 0 or fanout == 0:
        return out
    if fanout > BLOCK_MAX:  # grid class
        from ....kernels.sampling import GRID_CHUNK  # lazy: Triton's mode is fixed per process

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
