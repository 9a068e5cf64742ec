"""Where a max/min aggregation on a DGL graph runs (issue 31): the core's extrema op, or DGL's own
kernel (``dgl.ops.gspmm``, LIBXSMM's code on x86).

The core's compiled loop keeps each row's running maximum and its position in memory and merges
three in-edges per pass over the features; DGL's kernel keeps them in registers for the whole row.
Where rows are long and the features fit in cache, DGL's wins; elsewhere ours does.  Measured on an
Intel Xeon with AVX-512 (2026-11-29; the forward with positions, copy_u max, one thread, DGL's
time / ours; average in-degree in brackets):

==================  =====  =====  =====
graph               F 16   F 128  F 767
Cora (3.9)          1.50   1.83   1.40
Slashdot (11.6)     1.02   1.17   1.15
Amazon-CS (35.8)    0.82   0.69   1.20
Cornell5 (85.8)     0.70   0.68   1.00
==================  =====  =====  =====

On the AMD CPUs of earlier runs ours won every ``SAGEConv`` pool cell, so the rule is Intel's alone.
The values-only forward (no gradient asked: GIN's max over input features) is at parity with DGL's
on Cornell5 (49.5 vs 49.3 ms at F 128) and stays on the core.

Rule (:func:`dgl_kernel_reason`): DGL's kernel for ``copy_u`` max/min of a float32/float64 CPU
tensor that needs a gradient, on the native backend of an Intel CPU, where the average in-degree is at least
:data:`DGL_MIN_DEGREE` and a row holds at most :data:`DGL_MAX_WIDTH` features.  The front door keeps
its own contract there: rows without in-edges hold ``fill`` and pass no gradient back.
"""
from __future__ import annotations

import math

import torch

from ..core import backend
from ..core.machine import intel_cpu

__all__ = ["DGL_MIN_DEGREE", "DGL_MAX_WIDTH", "dgl_kernel_reason"]

DGL_MIN_DEGREE = 32   # average in-degree from which DGL's kernel wins (Amazon-CS, Cornell5 above)
DGL_MAX_WIDTH = 256   # features per row up to which it does (at 767 ours is at parity or faster)


def dgl_kernel_reason(op: str, ufeat: torch.Tensor | None, num_edges: int, num_dst: int) -> str | None:
    """Why DGL's kernel runs this max/min aggregation, or None where the core's op does (also for
    anything but a tensor, so that the core's check names what was wrong)."""
    if op != "copy_u" or not isinstance(ufeat, torch.Tensor) or ufeat.device.type != "cpu":
        return None
    if ufeat.dtype not in (torch.float32, torch.float64) or not (torch.is_grad_enabled() and ufeat.requires_grad):
        return None
    if num_dst == 0 or num_edges < DGL_MIN_DEGREE * num_dst or math.prod(ufeat.shape[1:]) > DGL_MAX_WIDTH:
        return None
    if not intel_cpu() or backend.choose_path(ufeat) != "native":
        return None
    return f"long rows on an Intel CPU (average in-degree >= {DGL_MIN_DEGREE}, <= {DGL_MAX_WIDTH} features)"
