"""Recycled large buffers for the bulk sampler's per-layer arrays (family ``bulk``: the
compiled loops of :mod:`dgl_accel.core.jit.bulk_sampling` write into them).

Why: a bulk pass writes a few arrays of tens of MB per layer (sampled sources, edge ids; the
blocks of all ``k`` minibatches are views into them).  Arrays that large are fresh ``mmap``s in
glibc: every pass takes them from the kernel again and faults every page in, and on the virtual
machines this was measured on, first-touching 40 MB from two threads cost 9-26 ms against 4 ms for
warm memory (``bench/bench_bulk.py`` swung by 40% with it).  The pool hands out views of buffers it
keeps, and takes a buffer back once no view of it is alive (the blocks built on it were dropped),
which it reads off the buffer's reference count: nothing has to be released by hand, and a buffer
a user still holds a block of is never reused.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = ["BufferPool", "default_pool"]

_MIN_POOLED = 1 << 20     # smaller requests: plain np.empty (glibc's heap recycles those itself)
_ROUND = 1 << 21          # buffers grow in 2 MiB steps so nearby sizes share one


class BufferPool:
    """``empty(n, dtype)`` like ``np.empty``, served from recycled buffers.

    keep_bytes : int
        Free (unreferenced) buffers kept beyond this total are released to the allocator.

    >>> pool = BufferPool()
    >>> a = pool.empty(1 << 20)              # 8 MiB of int64: from the pool
    >>> del a
    >>> b = pool.empty(1 << 20)              # nothing views the first buffer any more: reused
    >>> pool.misses, pool.hits
    (1, 1)
    """

    def __init__(self, keep_bytes: int = 512 << 20):
        self.keep_bytes = int(keep_bytes)
        self._bufs: list = []
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.enabled = self._refcounts_reliable()

    @staticmethod
    def _refcounts_reliable() -> bool:
        """Whether a view shows up in its buffer's reference count here (CPython's rule; an
        interpreter with deferred or biased counting would make reuse unsafe: then no pooling)."""
        probe = [np.empty(8, dtype=np.uint8)]
        before = sys.getrefcount(probe[0])
        view = probe[0][:4]
        ok = before == 2 and sys.getrefcount(probe[0]) == 3
        del view
        return ok and sys.getrefcount(probe[0]) == 2

    def _free(self, i: int) -> bool:
        # references: the list and getrefcount's argument; any live view adds one (its .base)
        return sys.getrefcount(self._bufs[i]) <= 2

    def empty(self, n: int, dtype=np.int64) -> np.ndarray:
        dtype = np.dtype(dtype)
        need = int(n) * dtype.itemsize
        if need < _MIN_POOLED or not self.enabled:
            return np.empty(int(n), dtype=dtype)
        with self._lock:
            best = -1
            for i in range(len(self._bufs)):
                size = self._bufs[i].nbytes
                # a free buffer that fits without wasting more than 4x (big ones stay for big asks)
                if need <= size <= 4 * need and self._free(i) and (best < 0 or size < self._bufs[best].nbytes):
                    best = i
            if best >= 0:
                self.hits += 1
                buf = self._bufs[best]
            else:
                self.misses += 1
                buf = np.empty(-(-need // _ROUND) * _ROUND, dtype=np.uint8)
                self._bufs.append(buf)
                self._trim()
            return buf[:need].view(dtype)

    def _trim(self) -> None:
        """Drop the largest free buffers while the free ones exceed ``keep_bytes``."""
        free = sorted((i for i in range(len(self._bufs)) if self._free(i)), key=lambda i: -self._bufs[i].nbytes)
        total = sum(self._bufs[i].nbytes for i in free)
        drop = set()
        for i in free:
            if total <= self.keep_bytes:
                break
            drop.add(i)
            total -= self._bufs[i].nbytes
        if drop:
            self._bufs = [b for i, b in enumerate(self._bufs) if i not in drop]

    def clear(self) -> None:
        """Forget every buffer (views handed out stay valid: they own a reference)."""
        with self._lock:
            self._bufs = []

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._bufs)


_DEFAULT = BufferPool()  # a bulk of 32 Slashdot minibatches ([15, 10, 5]) holds ~150 MB while alive


def default_pool() -> BufferPool:
    """The process's pool (each DataLoader worker process has its own).  It keeps up to
    ``keep_bytes`` (512 MB) of free buffers for the next passes; ``default_pool().clear()`` lets
    them go."""
    return _DEFAULT
