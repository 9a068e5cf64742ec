"""Timing: CUDA events on a GPU, the wall clock elsewhere; warm-up first, then the median of repeats.

Also the two ceilings every rate in the report is read against: the device-to-device copy
bandwidth measured in the same run (bytes read + bytes written per second).
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch


class Deadline:
    """A run's wall-clock budget (``None``: none); sections and cases check it before they start.

    >>> Deadline(None).passed(), Deadline(-1).passed(), Deadline(60).left() > 59
    (False, True, True)
    """

    def __init__(self, seconds: float | None):
        self.end = None if seconds is None else time.perf_counter() + seconds

    def left(self) -> float:
        return math.inf if self.end is None else self.end - time.perf_counter()

    def passed(self) -> bool:
        return self.left() <= 0


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], object], device: torch.device, *, warmup: int = 2, repeats: int = 5) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` untimed ones.

    >>> median_seconds(lambda: sum(range(100)), torch.device("cpu"), warmup=0, repeats=3) > 0
    True
    """
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(max(1, repeats)):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth(device: torch.device, nbytes: int, *, repeats: int = 5) -> float:
    """Device-to-device copy bandwidth in bytes/s: (read + write) / time of ``dst.copy_(src)``."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    t = median_seconds(lambda: dst.copy_(src), device, warmup=2, repeats=repeats)
    return 2 * src.numel() * 4 / t


def gflops(flop: float, seconds: float) -> float:
    """GFLOP/s.

    >>> gflops(2e9, 0.5)
    4.0
    """
    return flop / seconds / 1e9 if seconds > 0 else float("nan")


def gbps(nbytes: float, seconds: float) -> float:
    """GB/s (10^9 bytes).

    >>> gbps(3e9, 1.5)
    2.0
    """
    return nbytes / seconds / 1e9 if seconds > 0 else float("nan")


def matmul_rate(device: torch.device, n: int, dtype: torch.dtype, *, repeats: int = 5) -> float:
    """FLOP/s of an n x n x n product in ``dtype`` (the compute ceiling of the roofline plot)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    t = median_seconds(lambda: a @ b, device, warmup=2, repeats=repeats)
    return 2 * n**3 / t
