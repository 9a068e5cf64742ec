"""Launcher of the PPR push kernel (``kernels/ppr.py``): the estimates of the CPU reference
(:func:`dgl_accel.core.sampling.ppr.ppr_push_np`) bit for bit, one target per program, compiled on
CUDA tensors and interpreted on CPU tensors when backend "triton" is forced.
"""
from __future__ import annotations

import torch

from ..launch import triton_kernel

__all__ = ["ppr_push_triton", "WORKSPACE_BYTES"]

WORKSPACE_BYTES = 1 << 30  # dense per-target workspaces (32 bytes x n per target) per launch


def ppr_push_triton(indptr: torch.Tensor, indices: torch.Tensor, targets: torch.Tensor, alpha: float,
                    eps: float) -> torch.Tensor:
    """Dense estimates float64 [T, n] on the CSR's device (targets: int64 node ids)."""
    from ...kernels.ppr import BLOCK, BLOCK_E  # lazy: Triton's mode is fixed per process

    dev = indptr.device
    n = indptr.numel() - 1
    indptr = indptr.to(torch.int64).contiguous()
    indices = indices.contiguous() if indices.dtype in (torch.int32, torch.int64) else indices.to(torch.int64)
    deg = (indptr[1:] - indptr[:-1]).clamp(min=1).to(torch.float64)
    thr = eps * deg  # the CPU's eps * max(deg, 1), one rounding
    targets = targets.to(device=dev, dtype=torch.int64).contiguous()
    T = targets.numel()
    out = torch.zeros((T, n), dtype=torch.float64, device=dev)
    group = max(1, WORKSPACE_BYTES // max(32 * n, 1))
    kernel = triton_kernel("ppr", "_ppr_push_kernel", dev)
    for a in range(0, T, group):
        g = min(group, T - a)
        r = torch.zeros((g, n), dtype=torch.float64, device=dev)
        act = torch.empty((g, n), dtype=torch.int64, device=dev)
        amt = torch.empty((g, n), dtype=torch.float64, device=dev)
        kernel[(g,)](indptr, indices, thr, targets[a:a + g], out[a:a + g], r, act, amt, n, float(alpha),
                     1.0 - float(alpha), BLOCK=BLOCK, BLOCK_E=BLOCK_E, num_warps=4, enable_fp_fusion=False)
    return out
