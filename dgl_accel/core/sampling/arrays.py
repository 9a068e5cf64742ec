"""Small array helpers shared by the sampling families: zero-copy numpy views of tensors, scans,
kernel-argument conversions and the one-intra-op-thread guard of the CPU loops.

>>> np64(torch.tensor([3, 1], dtype=torch.int32))
array([3, 1])
>>> offsets(np.array([2, 0, 3]))
array([0, 2, 2, 5])
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["np64", "offsets", "signed64", "index_counts", "OneThread"]


def np64(t: torch.Tensor) -> np.ndarray:
    """Zero-copy int64 numpy view of a CPU tensor (a converted copy for other dtypes/devices)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype != torch.int64:
        t = t.to(torch.int64)
    return t.contiguous().numpy()


def offsets(counts: np.ndarray) -> np.ndarray:
    """Exclusive scan with the total appended: int64 [len(counts) + 1], row i at ``offs[i]:offs[i+1]``."""
    offs = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    return offs


def signed64(seed: int) -> int:
    """The seed's bit pattern as a signed int64 kernel argument (``tl.randint4x`` reads it back as
    uint64, so seeds in [2^63, 2^64) keep their Philox key)."""
    return seed - (1 << 64) if seed >= (1 << 63) else seed


def index_counts(index: torch.Tensor, size: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``bincount(index, weights, minlength=size)`` (int64) for ``index < size``, on ``index``'s device
    without the host read of the maximum that ``bincount`` makes on a GPU.

    >>> index_counts(torch.tensor([2, 0, 2]), 4).tolist()
    [1, 0, 2, 0]
    """
    ones = torch.ones_like(index) if weights is None else weights
    return torch.zeros(size, dtype=torch.int64, device=index.device).index_add_(0, index, ones)


class OneThread:
    """Run a CPU sampling loop on one intra-op thread (restored afterwards).  Its ops are small (one
    chunk of walks or instances) so intra-op threading only adds fork/join cost, which explodes
    when the cores are shared: measured 10-30x slower with 2 threads on a loaded 2-core machine.

    ``work``: the loop's largest array length, when known.  Below torch's grain size (32,768
    elements) its ops run on one thread anyway, and switching costs more than the loop: each
    ``torch.set_num_threads`` call took ~5 ms on the loaded machine, 10 ms a call for the 16-walk
    batches of DGL's node2vec example (3-5x its whole sampling time)."""

    GRAIN = 32768  # at::internal::GRAIN_SIZE: torch parallelises an op only above it

    def __init__(self, work: int | None = None):
        self.skip = work is not None and work < self.GRAIN

    def __enter__(self):
        self.n = 1 if self.skip else torch.get_num_threads()
        if self.n != 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.n != 1:
            torch.set_num_threads(self.n)
