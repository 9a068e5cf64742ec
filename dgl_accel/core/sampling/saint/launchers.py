"""Launcher of the frontier kernel (``kernels/saint_frontier.py``, family ``saint``): one
program per instance with the dashboard in global scratch; the same samples as the CPU twin
:mod:`.frontier_cpu` for the same seed.
"""
from __future__ import annotations

import torch

from ...launch import triton_kernel
from ..arrays import signed64
from .frontier_cpu import ETA_SCALE

__all__ = ["frontier_triton"]


def _phys_cap(cap0: int, eta_q: int, m: int, deg: torch.Tensor, degc: torch.Tensor) -> int:
    """Scratch per instance: room for eta * 1.5 * m * (stationary mean deg_c), the walk's typical
    live content (a walk visits u with probability ~ deg(u)); instances that need more rerun."""
    d = deg.double()
    stat = float((d * degc.double()).sum() / d.sum().clamp(min=1))
    need = eta_q / ETA_SCALE * 1.5 * m * stat + float(degc.max())
    cap = cap0
    while cap < need:
        cap *= 2
    return cap


def frontier_triton(indptr, indices, degc, roots, inst, n, max_steps, seed, eta_q, cap0, clip):
    """Launch ``_frontier_kernel`` (one program per instance); reruns instances whose dashboard
    outgrew the scratch with 4x more.  Returns out [I, n] (-1 padded) and counts [I] on the
    tensors' device."""
    from ....kernels.saint_frontier import PROBES_MAX, block_for  # lazy: fixes Triton's process mode

    dev = indptr.device
    kernel = triton_kernel("saint_frontier", "_frontier_kernel", dev)
    n_inst, m = roots.shape
    N = indptr.numel() - 1
    deg = indptr[1:] - indptr[:-1]
    phys = _phys_cap(cap0, eta_q, m, deg, degc)
    out = torch.full((n_inst, n), -1, dtype=torch.int64, device=dev)
    cnt = torch.zeros(n_inst, dtype=torch.int64, device=dev)
    todo = torch.arange(n_inst, dtype=torch.int64, device=dev)
    vis_words = (N + 31) // 32
    block = block_for(dev.type == "cuda")
    while todo.numel():
        k = todo.numel()
        o = torch.full((k, n), -1, dtype=torch.int64, device=dev)
        c = torch.zeros(k, dtype=torch.int64, device=dev)
        status = torch.zeros(k, dtype=torch.int64, device=dev)
        db = torch.empty((k, phys), dtype=torch.int64, device=dev)
        ftag = torch.empty((k, m), dtype=torch.int64, device=dev)
        fvert = torch.empty((k, m), dtype=torch.int64, device=dev)
        vis = torch.zeros((k, vis_words), dtype=torch.int32, device=dev)
        kernel[(k,)](indptr, indices, roots[todo].contiguous(), inst[todo].contiguous(), db, ftag, fvert, vis, o,
                     c, status, m, n, max_steps, cap0, phys, vis_words, clip, eta_q, signed64(seed),
                     BLOCK=block, PROBES=PROBES_MAX, num_warps=4 if block >= 128 else 1, num_stages=1)
        done = status == 0
        out[todo[done]] = o[done]
        cnt[todo[done]] = c[done]
        todo = todo[~done]
        phys *= 4
    return out, cnt
