"""Node-induced subgraphs without DGL: the device version (``core/sampling/induced/subgraph_device.py``)
gives the CPU path's arrays (``induced_entries``) and reads the host a bounded number of times; the
edges from one node list into another (``induced_between``, both paths) are those of the definition."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.induced.subgraph import InCSR, induced_between, induced_entries
from dgl_accel.core.sampling.induced.subgraph_device import HOST_READS, induced_between_device, induced_device
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.host_reads import HostReads


@settings(max_examples=40)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=50, max_edges=300), data=st.data())
def test_device_subgraph_is_the_cpu_paths(e, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")
    chosen = sorted(data.draw(st.sets(st.integers(0, e.num_src - 1), max_size=e.num_src)))
    nodes = torch.tensor(chosen, dtype=torch.int64)
    host = InCSR.from_structure(csr)  # the CPU path's arrays (one index dtype)
    want = induced_entries(host.indptr, host.indices, host.eids, nodes.numpy(), e.num_src)
    got = induced_device(csr, nodes)
    for a, b in zip(got, want):
        assert a.dtype == torch.int64 and np.array_equal(a.numpy(), b)
    # any order of the node list: the same subgraph, relabelled by the list's positions
    perm = torch.randperm(len(chosen), generator=torch.Generator().manual_seed(0))
    ptr, local, eids = induced_device(csr, nodes[perm])
    dst = torch.repeat_interleave(nodes[perm], ptr.diff())
    assert torch.equal(e.src[eids].long(), nodes[perm][local]) and torch.equal(e.dst[eids].long(), dst)
    assert sorted(eids.tolist()) == sorted(want[2].tolist())


def test_device_subgraph_reads_the_host_at_most_twice():
    gen = torch.Generator().manual_seed(1)
    csr = TensorGraph(torch.randint(0, 300, (3000,), generator=gen), torch.randint(0, 300, (3000,), generator=gen),
                      num_nodes=300).csr("in")
    with HostReads() as reads:
        induced_device(csr, torch.arange(0, 300, 4))
    assert 0 < len(reads.events) <= HOST_READS, reads.events


def _between_reference(src, dst, rows, sources):
    """The edges from ``sources`` into ``rows`` by the definition: destination after destination
    (every position, a repeated one again), its in-edges in edge-id order, the source's first position."""
    first = {}
    for i, v in enumerate(sources):
        first.setdefault(v, i)
    out = [(first[s], i, e) for i, v in enumerate(rows) for e, (s, d) in enumerate(zip(src, dst))
           if d == v and s in first]
    return [list(t) for t in zip(*out)] if out else [[], [], []]


@settings(max_examples=40)
@given(e=st.one_of(tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=150), tst.block_edge_lists()),
       data=st.data(), compiled=st.booleans())
def test_between_is_every_edge_from_one_list_into_another(e, data, compiled):
    """Two node lists in any order with repeats (a relation between two node types; a neighbour
    sampler's list that repeats a seed): CPU path (compiled, numpy) and device path."""
    csr = tst.tensor_graph(e).csr("in")
    ids = lambda n: st.lists(st.integers(0, n - 1), max_size=2 * n) if n else st.just([])  # noqa: E731
    rows, sources = data.draw(ids(e.num_dst)), data.draw(ids(e.num_src))
    want = _between_reference(e.src.tolist(), e.dst.tolist(), rows, sources)
    host = InCSR.from_structure(csr)
    r, s = np.array(rows, dtype=np.int64), np.array(sources, dtype=np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "MIN_WORK", 0 if compiled else 1 << 40)
        got = induced_between(host.indptr, host.indices, host.eids, r, s, e.num_src)
    assert [a.tolist() for a in got] == want and all(a.dtype == np.int64 for a in got)
    got = induced_between_device(csr, torch.tensor(rows, dtype=torch.int64), torch.tensor(sources))
    assert [a.tolist() for a in got] == want and all(a.dtype == torch.int64 for a in got)


def test_between_on_the_device_reads_the_host_at_most_twice():
    gen = torch.Generator().manual_seed(2)
    csr = TensorGraph(torch.randint(0, 300, (3000,), generator=gen), torch.randint(0, 200, (3000,), generator=gen),
                      num_src=300, num_dst=200).csr("in")
    with HostReads() as reads:
        induced_between_device(csr, torch.arange(0, 200, 3), torch.arange(0, 300, 4))
    assert 0 < len(reads.events) <= HOST_READS, reads.events
