"""The recycled-buffer pool of the bulk sampler: a buffer is reused only once nothing views it, so
blocks handed out earlier are never overwritten by later passes."""
import dgl
import numpy as np
import pytest
import torch

from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.buffers import BufferPool, default_pool
from dgl_accel.sampling import BulkNeighborSampler

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


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed: the bulk path allocates plainly")
def test_earlier_bulk_blocks_survive_later_passes():
    g = dgl.rand_graph(4000, 80000, idtype=torch.int64)
    g = dgl.to_simple(g)  # unit entries: the compiled gather path that draws from the pool
    batches = [torch.randperm(4000, generator=torch.Generator().manual_seed(i))[:400] for i in range(8)]
    sampler = BulkNeighborSampler([10, 10], bulk=8, seed=1)
    first = sampler.bulk_sample(g, batches)
    snapshot = [[(b.edges()[0].clone(), b.edges()[1].clone(), b.edata[dgl.EID].clone()) for b in blocks]
                for _, _, blocks in first]
    for i in range(4):  # later passes (other seeds) draw from the pool while `first` is alive
        others = [torch.randperm(4000, generator=torch.Generator().manual_seed(100 + i + j))[:400] for j in range(8)]
        sampler.bulk_sample(g, others)
    for (_, _, blocks), snap in zip(first, snapshot):
        for b, (u, v, e) in zip(blocks, snap):
            bu, bv = b.edges()
            assert torch.equal(bu, u) and torch.equal(bv, v) and torch.equal(b.edata[dgl.EID], e)
    assert default_pool().hits > 0  # the later passes did recycle buffers (of their own dropped results)


def test_pool_is_on_here_and_off_where_refcounts_cannot_be_trusted(monkeypatch):
    assert BufferPool().enabled  # CPython 3.11: views count
    monkeypatch.setattr(BufferPool, "_refcounts_reliable", staticmethod(lambda: False))
    pool = BufferPool()
    a = pool.empty(MB)
    assert not pool.enabled and a.base is None and pool.misses == 0  # plain np.empty, nothing kept
