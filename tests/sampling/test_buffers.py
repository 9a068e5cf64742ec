"""The recycled-buffer pool of the bulk sampler: a buffer is reused only once nothing views it, so
blocks handed out earlier are never overwritten by later passes."""
import dgl
import pytest
import torch

from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.bulk.buffers import BufferPool, default_pool
from dgl_accel.sampling import BulkNeighborSampler

MB = 1 << 20


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
