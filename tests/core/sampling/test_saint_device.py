"""GraphSAINT node sets on the device (``core/sampling/saint/draw_device.py``): for a seed, the node,
edge and walk draws and the counted normalisation's pre-sampling give the CPU path's sets and
counts (``saint/draw.py`` / ``saint/norm.py``), on graphs with isolated nodes, dead ends, multi-edges,
hubs above 1,024 in-edges and both id types, and read the host at most their stated bounds."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling import rng
from dgl_accel.core.sampling.checks import SamplingInputError
from dgl_accel.core.sampling.induced.subgraph import InCSR
from dgl_accel.core.sampling.saint import draw_device as saint_device
from dgl_accel.core.sampling.saint.draw import build_tables, draw_edge, draw_node, draw_walk, edge_weights, node_weights
from dgl_accel.core.sampling.saint.draw_device import (
    DeviceTables,
    count_inclusion_device,
    draw_edge_device,
    draw_node_device,
    draw_walk_device,
)
from dgl_accel.core.sampling.saint.norm import count_inclusion
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.host_reads import HostReads

# the uniforms of CPU tensors come from numpy (a read of the offsets); a device computes them in place
UNIFORMS = [(saint_device, "uniform53")]


def _tables(src, dst, n):
    """(numpy Tables, torch in-CSR) of the graph ``src -> dst``."""
    g = TensorGraph(src, dst, num_nodes=n)
    s_in, s_out = g.csr("in"), g.csr("out")
    csr = InCSR(*(a.numpy().astype(np.int64) for a in (s_in.indptr, s_in.indices, s_in.eids)), n)
    return build_tables(csr, s_out), s_in


def _star(hub_degree: int, idtype):
    """Node 0 has ``hub_degree`` in-edges (node 1 twice: a multi-edge); node hub_degree + 1 has no
    edges; nodes 2.. have no in-edges and node 0 no out-edges (a dead end of every walk)."""
    src = torch.cat([torch.arange(1, hub_degree + 1), torch.tensor([1, 2])]).to(idtype)
    dst = torch.cat([torch.zeros(hub_degree, dtype=torch.int64), torch.tensor([0, 1])]).to(idtype)
    return src, dst, hub_degree + 2


def _assert_same_draws(t, budget, roots, length, seed):
    dt = DeviceTables.on(t, "cpu")
    for kind in ("norm", "degree"):
        cdf = np.cumsum(node_weights(t, kind))
        assert torch.equal(draw_node_device(torch.from_numpy(cdf), budget, seed),
                           torch.from_numpy(draw_node(cdf, budget, seed))), kind
    if t.dst.shape[0]:
        cdf = np.cumsum(edge_weights(t))
        assert torch.equal(draw_edge_device(dt, torch.from_numpy(cdf), budget, seed),
                           torch.from_numpy(draw_edge(t, cdf, budget, seed)))
    walked = draw_walk_device(dt, roots, length, seed)
    assert walked.dtype == torch.int64 and torch.equal(walked, torch.from_numpy(draw_walk(t, roots, length, seed)))


@settings(max_examples=40)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300), budget=st.integers(1, 3000),
       roots=st.integers(1, 50), length=st.integers(0, 4), seed=st.integers(0, 2**64 - 1))
def test_device_draws_are_the_cpu_paths(e, budget, roots, length, seed):
    t, _ = _tables(e.src, e.dst, e.num_src)
    _assert_same_draws(t, budget, roots, length, seed)


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_device_draws_with_a_hub_above_1024(idtype):
    t, _ = _tables(*_star(1100, idtype))
    _assert_same_draws(t, 5000, 300, 3, 2**63 + 7)
    hits = draw_edge_device(DeviceTables.on(t, "cpu"), torch.from_numpy(np.cumsum(edge_weights(t))), 5000, 3)
    assert 0 in hits.tolist() and hits.numel() > 1000  # draws spread over the hub's 1,101 in-edges


def test_uniform53_device_formula_and_compiled_twin_match_numpy():
    off = torch.arange(20_000, dtype=torch.int64) * 7919 + (5 << 32)
    for seed in (0, 2**40 + 11, 2**64 - 1):
        ref = rng.uniform53_np(seed, off.numpy())
        assert torch.equal(rng._uniform53_torch(seed, off), torch.from_numpy(ref))  # the branch a GPU runs
        assert 0.0 <= ref.min() and ref.max() < 1.0
        bits = ref * 2.0**53
        assert np.array_equal(bits, np.floor(bits)) and (bits % 2**29 != 0).mean() > 0.99  # 53 bits, not 24
        if runtime.enabled():
            from dgl_accel.core.jit import saint as jit_saint  # numba only where it is installed
            assert np.array_equal(jit_saint.uniform53(seed, 3, 5000), rng.uniform53_np(seed, np.arange(3, 5003)))


@settings(max_examples=15, deadline=None)
@given(e=tst.edge_lists(min_nodes=2, max_nodes=30, max_edges=200), seed=st.integers(0, 2**64 - 1),
       mode=st.sampled_from(["node", "walk"]))
def test_device_presampling_counts_are_the_cpu_paths(e, seed, mode):
    seed %= 2**63  # seed + i stays a 64-bit key
    t, s_in = _tables(e.src, e.dst, e.num_src)
    cdf = np.cumsum(node_weights(t))
    train = np.arange(e.num_src) % 3 != 1
    if mode == "node":
        cpu, dev = (lambda i: draw_node(cdf, 5, seed + i)), (lambda i: draw_node_device(torch.from_numpy(cdf), 5,
                                                                                         seed + i))
    else:
        dt = DeviceTables.on(t, "cpu")
        cpu, dev = (lambda i: draw_walk(t, 2, 2, seed + i)), (lambda i: draw_walk_device(dt, 2, 2, seed + i))
    c_node, c_pos, N = count_inclusion(t, cpu, train, 3.0)
    with HostReads(leave_out=UNIFORMS) as reads:
        d_node, d_eid, dN = count_inclusion_device(s_in, dev, torch.from_numpy(train), 3.0)
    assert N == dN and np.array_equal(d_node.numpy(), c_node) and np.array_equal(d_eid.numpy()[t.csr.eids], c_pos)
    assert len(reads.events) <= 1 + N * saint_device.PRESAMPLE_READS, reads.events


def test_draws_read_the_host_at_most_their_bound():
    t, _ = _tables(*_star(1100, torch.int64))
    dt = DeviceTables.on(t, "cpu")
    cdf = torch.from_numpy(np.cumsum(edge_weights(t)))
    for draw in (lambda: draw_node_device(cdf, 400, 1), lambda: draw_edge_device(dt, cdf, 400, 1),
                 lambda: draw_walk_device(dt, 64, 4, 1)):
        with HostReads(leave_out=UNIFORMS) as reads:
            draw()
        assert 0 < len(reads.events) <= saint_device.HOST_READS, reads.events


def test_presampling_that_cannot_reach_its_coverage_is_refused_alike():
    t, s_in = _tables(*_star(40, torch.int64))
    train = np.zeros(42, dtype=bool)
    train[41] = True  # the node without edges: a walk reaches it only as a root
    dt = DeviceTables.on(t, "cpu")
    with pytest.raises(SamplingInputError, match="pre-sampling") as cpu:
        count_inclusion(t, lambda i: draw_walk(t, 1, 1, i), train, 50.0, max_presample=100)
    with pytest.raises(SamplingInputError, match="pre-sampling") as dev:
        count_inclusion_device(s_in, lambda i: draw_walk_device(dt, 1, 1, i), torch.from_numpy(train), 50.0,
                               max_presample=100)
    assert str(cpu.value) == str(dev.value)
