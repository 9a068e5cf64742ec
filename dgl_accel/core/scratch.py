"""Per-thread scratch buffers for intermediates that never leave the op that fills them.

Fresh allocations of a few MB and more come from the kernel as new pages (glibc serves them with
mmap, or trims them back after use), and the page faults cost as much as the passes over the data:
a ReLU backward over 13752 x 128 floats took 0.09 ms on reused memory and 0.8 ms inside a training
step.  A buffer here lives as long as its thread; its ``name`` says which intermediate it holds, so
that two intermediates alive at once never share one.  Callers must not hand these out.
"""
from __future__ import annotations

import math
import threading

import numpy as np
import torch

_LOCAL = threading.local()
MAX_BYTES = 256 << 20  # larger requests get a fresh array: do not pin huge buffers for the thread's life


def array(name: str, size: int, dtype) -> np.ndarray:
    """A reusable numpy buffer: a view of exactly ``size`` items (contents undefined)."""
    dtype = np.dtype(dtype)
    if size * dtype.itemsize > MAX_BYTES:
        return np.empty(size, dtype=dtype)
    bufs = _LOCAL.__dict__.setdefault("bufs", {})
    key = (name, dtype.str)
    buf = bufs.get(key)
    if buf is None or buf.shape[0] < size:
        buf = bufs[key] = np.empty(max(size, 1024, 0 if buf is None else buf.shape[0] * 3 // 2), dtype=dtype)
    return buf[:size]


_NUMPY = {torch.float32: np.float32, torch.float64: np.float64, torch.int32: np.int32, torch.int64: np.int64}


def tensor(name: str, shape, dtype: torch.dtype) -> torch.Tensor:
    """A reusable contiguous CPU tensor of ``shape`` (contents undefined), sharing memory with
    :func:`array`'s buffer of the same name."""
    if dtype not in _NUMPY:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(array(name, math.prod(shape), _NUMPY[dtype])).view(shape)
