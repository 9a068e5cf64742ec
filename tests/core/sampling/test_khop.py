"""k-hop sampling on CSR views without DGL (``core/sampling/neighbor/khop.py``): on the Triton path every
step stays on the CSR's device, gives the CPU path's samples, and reads the host a bounded number
of times.  (tests/sampling/test_khop.py runs the DGL adapter.)"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.neighbor import khop
from dgl_accel.testing import tensors as tst


@settings(max_examples=20)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300),
       fanouts=st.lists(st.integers(1, 4), min_size=1, max_size=3), replace=st.booleans(), unique=st.booleans(),
       seed=st.integers(0, 2**64 - 1), data=st.data())
@pytest.mark.interpreter
def test_device_steps_are_the_cpu_samples(e, fanouts, replace, unique, seed, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), max_size=8)), dtype=e.src.dtype)
    out = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out[name] = khop.khop_sample(csr, seeds, fanouts, replace=replace, unique=unique, seed=seed)
    assert torch.equal(out["native"].per_sample(), out["triton"].per_sample())


@pytest.mark.interpreter
@pytest.mark.parametrize("unique", [False, True])
def test_device_steps_read_the_host_at_most_their_bound(unique):
    from dgl_accel.testing.host_reads import HostReads
    gen = torch.Generator().manual_seed(0)
    csr = TensorGraph(torch.randint(0, 200, (2000,), generator=gen), torch.randint(0, 200, (2000,), generator=gen),
                      num_nodes=200).csr("in")
    fanouts = [3, 2, 2]
    # the interpreter reads the kernel's arguments on the host; a compiled launch does not
    with HostReads(leave_out=[(khop, "neighbor_choice_triton")]) as reads:
        with dgl_accel.use_backend("triton"):
            khop.khop_sample(csr, torch.arange(0, 200, 9), fanouts, unique=unique, seed=5)
    bound = 1 + len(fanouts) * (khop.HOST_READS_PER_STEP + unique)
    assert 0 < len(reads.events) <= bound, reads.events
