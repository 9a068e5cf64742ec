"""Every sampler in DGL DataLoader worker processes (num_workers > 0, forked): the blocks and
subgraphs that come back are the graph's own nodes and edges.

Two bugs this guards against: (1) a block whose dst ids were a view of the seed tensor shared one
buffer between two torch storages, and moving the seed tensor to shared memory left the block
reading freed memory (every batch corrupted); (2) the bulk sampler's numba parallel regions on GNU
OpenMP crash or hang in a forked worker.  Both passed unnoticed with num_workers=0."""
import dgl
import pytest
import torch

from dgl_accel.sampling import BulkNeighborSampler, LADIESSampler, NeighborSampler, SAINTSampler


@pytest.fixture(scope="module")
def graph():
    torch.manual_seed(0)
    dgl.seed(0)
    return dgl.to_simple(dgl.rand_graph(3000, 60000))


def _loader(g, ids, sampler, **kw):
    # timeout: a hung worker fails the test instead of the CI run
    return dgl.dataloading.DataLoader(g, ids, sampler, num_workers=2, timeout=120, **kw)


def _check_edges(g, sub, src_ids, dst_ids):
    u, v = sub.edges()
    gu, gv = g.find_edges(sub.edata[dgl.EID])
    assert torch.equal(gu, src_ids[u.long()]) and torch.equal(gv, dst_ids[v.long()])


@pytest.mark.parametrize("make", [
    lambda: NeighborSampler([5, 5], seed=1),
    lambda: BulkNeighborSampler([5, 5], bulk=3, seed=1),
    lambda: LADIESSampler([300, 300], seed=1),
    lambda: LADIESSampler([300, 300], bulk=3, seed=1),
], ids=["neighbor", "bulk", "ladies", "ladies_bulk"])
def test_block_samplers_in_workers(graph, make):
    sampler = make()
    if isinstance(sampler, BulkNeighborSampler):  # parallel kernels in this process first
        sampler.bulk_sample(graph, [torch.arange(i, 3000, 5)[:400] for i in range(3)])
    seen = 0
    for inp, out, blocks in _loader(graph, torch.arange(3000), sampler, batch_size=400):
        assert torch.equal(blocks[-1].dstdata[dgl.NID], out)
        assert torch.equal(blocks[0].srcdata[dgl.NID], inp)
        for b in blocks:
            assert torch.equal(b.srcdata[dgl.NID][:b.num_dst_nodes()], b.dstdata[dgl.NID])
            _check_edges(graph, b, b.srcdata[dgl.NID], b.dstdata[dgl.NID])
        seen += out.numel()
    assert seen == 3000


@pytest.mark.parametrize("mode, budget", [("node", 400), ("edge", 1500), ("walk", (150, 2)), ("frontier", (80, 400))])
def test_saint_samplers_in_workers(graph, mode, budget):
    count = 0
    for sg in _loader(graph, torch.arange(6), SAINTSampler(mode, budget, seed=1)):
        _check_edges(graph, sg, sg.ndata[dgl.NID], sg.ndata[dgl.NID])
        count += 1
    assert count == 6
