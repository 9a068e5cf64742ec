"""How the compiled CSR loops share rows among parallel tasks: ranges of about equal entry counts (real
graphs have a few hub rows among many light ones, frontier rows are few and heavy next to many empty
ones), one task each."""
from __future__ import annotations

import numpy as np

from .runtime import njit

__all__ = ["bounds_of"]


@njit(cache=True)
def bounds_of(indptr, nch):
    """Row range boundaries [nch + 1] cutting the CSR into ``nch`` ranges of about equal entries."""
    n = indptr.shape[0] - 1
    bounds = np.searchsorted(indptr, np.arange(nch + 1) * (indptr[n] // nch + 1))
    bounds = np.minimum(bounds, n)  # searchsorted may answer n + 1 past the last row pointer
    bounds[0] = 0
    bounds[nch] = n
    return bounds
