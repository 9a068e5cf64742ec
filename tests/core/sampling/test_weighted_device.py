"""Weighted neighbour choice on the device (``core/sampling/neighbor/choice_device.py``): with ``prob``,
``sample_neighbors`` and ``sample_layers`` on the Triton path (torch ops where the CSR lives) give
the CPU path's samples for the same seed, on graphs with zero weights, hubs above 1,024 in-edges,
multi-edges, isolated nodes and both id types, and read the host at most their stated bounds."""
import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.neighbor import choice_device as weighted_device
from dgl_accel.core.sampling.neighbor import sample_device as neighbor_device
from dgl_accel.core.sampling.neighbor.choice import clear_cache, weight_tables
from dgl_accel.core.sampling.neighbor.sample import sample_layers, sample_neighbors
from dgl_accel.core.sampling.output import SampledLayer
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import native_and_triton
from dgl_accel.testing.host_reads import HostReads
from dgl_accel.testing.marks import quick_first


def _weights(num_edges: int, seed: int, zeros: float, dtype=torch.float32):
    """Weights in [0, 2) with about ``zeros`` of them exactly 0 (never chosen)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.rand(num_edges, generator=gen) * 2
    w[torch.rand(num_edges, generator=gen) < zeros] = 0
    return w.to(dtype)


def _star(hub_degree: int, idtype):
    """Node 0 has ``hub_degree`` in-edges (from 1..hub_degree, node 1 twice: a multi-edge); node
    hub_degree + 1 is isolated."""
    src = torch.cat([torch.arange(1, hub_degree + 1), torch.tensor([1, 0])]).to(idtype)
    dst = torch.cat([torch.zeros(hub_degree, dtype=torch.int64), torch.tensor([0, 1])]).to(idtype)
    return TensorGraph(src, dst, num_nodes=hub_degree + 2).csr("in")


@settings(max_examples=30)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300), fanout=st.sampled_from([-1, 0, 1, 3, 10]),
       replace=st.booleans(), seed=st.integers(0, 2**64 - 1), step=st.integers(0, 3),
       zeros=st.sampled_from([0.0, 0.3, 1.0]), wseed=st.integers(0, 99), data=st.data())
def test_weighted_sample_neighbors_same_on_both_paths(e, fanout, replace, seed, step, zeros, wseed, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")
    prob = _weights(e.src.numel(), wseed, zeros)
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), max_size=12)), dtype=e.src.dtype)
    native, device = native_and_triton(lambda: sample_neighbors(csr, seeds, fanout, seed=seed, replace=replace, step=step,
                                                       prob=prob))
    for a, b in zip(native, device):
        assert a.dtype == b.dtype and torch.equal(a, b)
    src, dst, eid = device
    assert torch.equal(e.src[eid.long()], src) and torch.equal(e.dst[eid.long()], dst)
    assert bool((prob[eid.long()] > 0).all())  # a zero-weight edge is never chosen
    if not replace:
        for v in seeds.unique().tolist():  # distinct edges per seed, all positive ones when few
            mine = eid[dst == v]
            assert mine.unique().numel() == mine.numel() // int((seeds == v).sum())
            positive = int(((e.dst == v) & (prob > 0)).sum())
            if fanout == -1 or positive <= fanout:
                assert mine.numel() == positive * int((seeds == v).sum())


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("fanout, replace", quick_first([(5, False), (5, True), (700, False), (1500, True), (-1, False)]))
def test_weighted_device_choice_gives_the_cpu_samples_on_hubs(idtype, fanout, replace):
    csr = _star(1100, idtype)  # a hub above 1,024 in-edges, a multi-edge, an isolated node
    prob = _weights(csr.num_edges, 7, 0.25, torch.float64)
    seeds = torch.tensor([0, 1101, 0, 1, 1101, 2], dtype=idtype)
    native, device = native_and_triton(lambda: sample_neighbors(csr, seeds, fanout, seed=2**63 + 5, replace=replace,
                                                       step=2, prob=prob))
    for a, b in zip(native, device):
        assert a.dtype == b.dtype == idtype and torch.equal(a, b)
    hub = int((prob[csr.eids[:1101].long()] > 0).sum())
    assert device[1].tolist().count(0) == 2 * (fanout if replace else min(hub, fanout if fanout > 0 else hub))


@settings(max_examples=20)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300),
       fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5]), min_size=1, max_size=3), replace=st.booleans(),
       seed=st.integers(0, 2**64 - 1), wseed=st.integers(0, 99), data=st.data())
def test_weighted_sample_layers_same_on_both_paths(e, fanouts, replace, seed, wseed, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")
    prob = _weights(e.src.numel(), wseed, 0.3)
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), max_size=10)), dtype=e.src.dtype)
    exclude = torch.tensor(data.draw(st.lists(st.integers(0, max(e.src.numel() - 1, 0)), max_size=6))
                           if e.src.numel() else [], dtype=torch.int64)
    tables = weight_tables(csr.indptr, csr.eids, prob)
    native, device = native_and_triton(lambda: sample_layers(csr, seeds, fanouts, seed=seed, replace=replace, tables=tables,
                                                    exclude=exclude))
    for a, b in zip(native.layers, device.layers):
        for field in dataclasses.fields(SampledLayer):
            x, y = getattr(a, field.name), getattr(b, field.name)
            assert x.dtype == y.dtype == torch.int64 and torch.equal(x, y), field.name
    for layer in device.layers:
        assert bool((prob[layer.eids] > 0).all()) and not set(exclude.tolist()) & set(layer.eids.tolist())


@pytest.mark.parametrize("fanout, replace", [(4, False), (4, True), (-1, False)])
def test_weighted_device_pipeline_reads_the_host_at_most_its_bound(fanout, replace):
    csr = _star(300, torch.int64)
    prob = _weights(csr.num_edges, 3, 0.2)
    seeds = torch.arange(0, 200, 3)
    with dgl_accel.use_backend("triton"):
        sample_neighbors(csr, seeds, fanout, seed=1, prob=prob)  # builds the tables: once per weight tensor
        # the interpreter reads the kernel's arguments on the host and the CPU's Philox runs in numpy;
        # on a GPU both are device work without a read
        with HostReads(leave_out=[(neighbor_device, "neighbor_choice_triton"),
                                  (weighted_device, "philox_uniform")]) as reads:
            sample_neighbors(csr, seeds, fanout, seed=1, replace=replace, prob=prob)
            one = len(reads.events)
            sample_layers(csr, seeds, [fanout, fanout], seed=2, replace=replace,
                          tables=weight_tables(csr.indptr, csr.eids, prob))
    assert 0 < one <= neighbor_device.HOST_READS_PER_LAYER + neighbor_device.WEIGHTED_EXTRA_READS, reads.events
    blocks = len(reads.events) - one
    assert blocks <= 1 + 2 * (neighbor_device.HOST_READS_PER_BLOCK_LAYER + neighbor_device.WEIGHTED_EXTRA_READS), \
        reads.events


def test_weight_tables_are_built_and_copied_once_and_checked_before_any_sampling():
    clear_cache()
    csr = _star(50, torch.int64)
    prob = _weights(csr.num_edges, 1, 0.0)
    first = weight_tables(csr.indptr, csr.eids, prob)
    assert weight_tables(csr.indptr, csr.eids, prob) is first
    assert first.on("cpu") is first.on("cpu")
    prob.mul_(2)  # an in-place change: new tables
    assert weight_tables(csr.indptr, csr.eids, prob) is not first
    bad = prob.clone()
    bad[3] = -1.0
    with dgl_accel.use_backend("triton"), pytest.raises(ValueError, match="non-negative"):
        sample_neighbors(csr, torch.tensor([0]), 2, seed=0, prob=bad)
    with pytest.raises(ValueError, match="one value per edge"):
        sample_neighbors(csr, torch.tensor([0]), 2, seed=0, prob=prob[:-1])
