"""Measure-and-cache group size selection, for CUDA where timing is meaningful.

The winner for a ``(graph_signature(g), feat_dim, dtype, device)`` key is cached in a module-level
dict, so each graph shape is timed once per process; the dict keeps the :data:`AUTOTUNE_CACHE_MAX`
most recently used keys.  Sampled blocks are never timed (``size.choose_group_size``): each
minibatch's block is a new shape.  Each candidate runs ``repeats`` times and
the median counts: the first call of a Triton kernel includes compilation, and the median of three
discards that one outlier without a separate warm-up run.
"""
from __future__ import annotations

import hashlib
import operator
import statistics
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

import numpy as np

__all__ = ["autotune_group_size", "graph_signature", "clear_autotune_cache", "autotune_cache",
           "AUTOTUNE_CACHE_MAX"]

AUTOTUNE_CACHE_MAX = 512  # winners kept (least recently used first out)
_CACHE: OrderedDict[Hashable, int] = OrderedDict()
_LOCK = threading.Lock()


def _signature(views) -> tuple:
    indptr = views.csr("in").indptr
    deg = indptr[1:] - indptr[:-1]
    # The degree histogram is what grouping sees (row lengths, not which row has which), so
    # relabelled copies of a graph share a winner.  bincount runs on the graph's device; only
    # the histogram (max_degree + 1 counts) comes to the host.
    hist = deg.bincount().cpu().numpy().astype(np.int64) if deg.numel() else np.zeros(0, np.int64)
    digest = hashlib.blake2b(hist.tobytes(), digest_size=8).hexdigest()
    return (views.num_src, views.num_dst, views.num_edges, views.idtype, digest)


def graph_signature(views) -> tuple:
    """``(num_src, num_dst, num_edges, idtype, hash of the in-degree histogram)``, cached per graph."""
    return views.cached("grouping.signature", lambda: _signature(views))


def autotune_group_size(key: Hashable, candidates: Iterable[int], time_fn: Callable[[int], float],
                        repeats: int = 3) -> int:
    """The candidate with the smallest median ``time_fn(gs)`` (seconds), cached under ``key``.

    ``key`` is typically ``(graph_signature(g), feat_dim, dtype, device)``.  A cached key returns
    its winner without calling ``time_fn``.  Ties go to the smaller gs (deterministic).
    """
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    cands = sorted({operator.index(c) for c in candidates})
    if not cands or cands[0] < 1:
        raise ValueError(f"expected a non-empty list of group sizes >= 1 (got {cands}). "
                         f"Fix: pass e.g. [1, 2, 4, 8, 16, 32, 64].")
    repeats = operator.index(repeats)
    if repeats < 1:
        raise ValueError(f"expected repeats >= 1 (got {repeats}). Fix: pass repeats=3.")
    # Timing runs outside the lock (it launches kernels); a racing duplicate just re-times.
    medians = {gs: statistics.median(float(time_fn(gs)) for _ in range(repeats)) for gs in cands}
    best = min(cands, key=lambda gs: (medians[gs], gs))
    with _LOCK:
        best = _CACHE.setdefault(key, best)
        while len(_CACHE) > AUTOTUNE_CACHE_MAX:
            _CACHE.popitem(last=False)
        return best


def autotune_cache() -> dict:
    """A copy of the cached winners (for tests and debugging)."""
    with _LOCK:
        return dict(_CACHE)


def clear_autotune_cache() -> None:
    with _LOCK:
        _CACHE.clear()
