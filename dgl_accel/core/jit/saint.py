"""Compiled twin of :func:`dgl_accel.core.sampling.rng.uniform53_np` for the GraphSAINT draws
(:mod:`dgl_accel.core.sampling.saint.draw`): the same float64 values, Philox in registers."""
from __future__ import annotations

import numpy as np

from .runtime import M32, S32, njit, philox

__all__ = ["uniform53"]


@njit(cache=True)
def _uniform53(k0, k1, start, out):
    scale = 2.0 ** -53
    for i in range(out.shape[0]):
        w0, w1, _, _ = philox(k0, k1, start + i)
        out[i] = np.float64((w0 >> np.uint64(5)) * np.uint64(1 << 26) + (w1 >> np.uint64(6))) * scale


def uniform53(seed: int, start: int, count: int) -> np.ndarray:
    """``uniform53_np(seed, arange(start, start + count))``."""
    out = np.empty(count, dtype=np.float64)
    _uniform53(np.uint64(seed) & M32, np.uint64(seed) >> S32, np.int64(start), out)
    return out
