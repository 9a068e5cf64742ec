"""Launcher of the PPR spread kernel (``kernels/ppr.py``): residuals plus each key's contributions in
segment order, the CPU reference's sequential float64 sums bit for bit; compiled on CUDA tensors,
interpreted on CPU tensors when backend "triton" is forced.  The rounds around it:
:mod:`.ppr_device`.
"""
from __future__ import annotations

import torch

from ...launch import triton_kernel

__all__ = ["ppr_spread_triton"]


def ppr_spread_triton(r: torch.Tensor, keys: torch.Tensor, seg: torch.Tensor, vals: torch.Tensor) -> None:
    """In place: ``r[keys[i]] += vals[seg[i]], vals[seg[i] + 1], ..., vals[seg[i + 1] - 1]`` in that
    order (``r`` float64 flat, ``keys`` distinct int64, ``seg`` int64 offsets [len(keys) + 1])."""
    from ....kernels.ppr import BLOCK  # lazy: Triton's mode is fixed per process

    k = keys.numel()
    if k:
        triton_kernel("ppr", "_ppr_spread_kernel", r.device)[(-(-k // BLOCK),)](
            r, keys, seg, vals, k, BLOCK=BLOCK, num_warps=4, enable_fp_fusion=False)
