"""Node-induced subgraphs without DGL: the device version (``core/sampling/induced/subgraph_device.py``)
gives the CPU path's arrays (``induced_entries``) and reads the host a bounded number of times."""
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.induced.subgraph import InCSR, induced_entries
from dgl_accel.core.sampling.induced.subgraph_device import HOST_READS, induced_device
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
