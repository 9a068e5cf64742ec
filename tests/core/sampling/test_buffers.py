"""The recycled-buffer pool of the bulk sampler (``core/sampling/bulk/buffers.py``): a buffer is reused only
once nothing views it, small requests bypass it, and it trims what it keeps.  (tests/sampling/test_buffers.py
runs the bulk sampler's blocks through it, with DGL.)"""
import numpy as np
import torch

from dgl_accel.core.sampling.bulk.buffers import BufferPool

MB = 1 << 20


def test_buffer_reused_only_after_its_views_die():
    pool = BufferPool()
    a = pool.empty(MB)  # 8 MiB of int64
    a[:] = 7
    b = pool.empty(MB)
    assert not np.shares_memory(a, b)  # a is alive: a fresh buffer
    b[:] = 1
    assert (a == 7).all()
    view = a[10:20]
    del a
    c = pool.empty(MB)
    assert not np.shares_memory(c, view)  # a slice of the first buffer is still alive
    t = torch.from_numpy(view)  # a tensor on the slice pins it too
    del view
    d = pool.empty(MB)
    assert not np.shares_memory(d, t.numpy())
    del t, c, d
    e = pool.empty(MB)
    assert pool.hits >= 1 and e.shape == (MB,) and e.dtype == np.int64


def test_small_requests_bypass_and_sizes_do_not_mix():
    pool = BufferPool()
    small = pool.empty(10)
    assert small.base is None and pool.misses == 0  # plain np.empty
    big = pool.empty(16 * MB, np.int32)
    assert big.nbytes == 64 * MB
    del big
    tiny = pool.empty(MB // 4 + 1)  # 2 MiB: would waste 32x of the free 64 MiB buffer
    assert tiny.base.nbytes < 64 * MB
    again = pool.empty(15 * MB, np.int32)  # fits the free 64 MiB buffer within 4x
    assert again.base.nbytes == 64 * MB


def test_trim_keeps_at_most_keep_bytes_free():
    pool = BufferPool(keep_bytes=8 * MB)
    held = [pool.empty(MB) for _ in range(4)]  # 4 x 8 MiB
    del held
    keep = pool.empty(5 * MB)  # 40 MiB: no free buffer fits, so a new one, and a trim
    free = [b for b in pool._bufs if b.nbytes == 8 * MB]
    assert len(free) == 1 and keep.base.nbytes == 40 * MB
