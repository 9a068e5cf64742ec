"""shaDow-GNN scopes on CSR views without DGL (``core/sampling/shadow/scope.py``): per-target k-hop sets
are the exact L-hop balls with full fanouts and real neighbourhoods with sampled ones (min(fanout,
degree) new neighbours at one hop), depend only on (seed, target), are the same on the Triton
kernels (interpreter) and the CPU twin; every per-target subgraph of a batch is exactly the
subgraph its set induces, on the compiled loop and the numpy path."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.checks import SamplingInputError
from dgl_accel.core.sampling.induced.subgraph import InCSR, half_csr
from dgl_accel.core.sampling.induced.subgraph_device import induced_sets_device
from dgl_accel.core.sampling.shadow.ppr import ppr_node_sets
from dgl_accel.core.sampling.shadow.scope import induced_batch, induced_batch_symmetric, khop_node_sets
from dgl_accel.testing import tensors as tst


def _csr(e):
    return TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")


def _nbrs(csr, v):
    ip, ix = csr.indptr.long(), csr.indices.long()
    return ix[ip[v]:ip[v + 1]].tolist()


def _ball(csr, t, hops):
    seen, front = {t}, {t}
    for _ in range(hops):
        front = {u for v in front for u in _nbrs(csr, v)} - seen
        seen |= front
    return sorted(seen)


def _sets(sets):
    return [sets.nodes[int(a):int(b)].tolist() for a, b in zip(sets.offsets[:-1], sets.offsets[1:])]


@settings(max_examples=25, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=200), fanouts=st.lists(st.sampled_from([-1, 1, 2, 4]),
       min_size=1, max_size=3), replace=st.booleans(), seed=st.integers(0, 2**64 - 1), data=st.data())
def test_khop_sets_are_real_neighbourhoods(e, fanouts, replace, seed, data):
    csr = _csr(e)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=8)))
    sets = khop_node_sets(csr, targets, fanouts, replace=replace, seed=seed)
    for t, (s, got) in enumerate(zip(targets.tolist(), _sets(sets))):
        assert got == sorted(set(got)) and int(sets.nodes[sets.target_pos[t]]) == s
        ball = _ball(csr, s, len(fanouts))
        assert set(got) <= set(ball)
        if all(f == -1 for f in fanouts):
            assert got == ball
    # a target's set depends on (seed, target) only: alone or in another batch, the same
    t0 = int(targets[-1])
    alone = khop_node_sets(csr, torch.tensor([t0]), fanouts, replace=replace, seed=seed)
    assert _sets(alone)[0] == _sets(sets)[-1]


@settings(max_examples=25, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300, self_loops=False, multi_edges=False),
       fanout=st.integers(1, 6), seed=st.integers(0, 2**64 - 1))
def test_one_hop_takes_min_fanout_degree_distinct_neighbours(e, fanout, seed):
    csr = _csr(e)
    targets = torch.arange(e.num_src)
    sets = khop_node_sets(csr, targets, [fanout], seed=seed)
    for s, got in zip(targets.tolist(), _sets(sets)):
        nb = _nbrs(csr, s)
        assert set(got) - {s} <= set(nb) and len(got) == 1 + min(fanout, len(nb))


def test_khop_draws_are_uniform():
    # a star: centre 0 with 20 in-neighbours; fanout 5 without replacement, over 4000 seeds each
    # neighbour is drawn with probability 1/4
    n = 21
    csr = TensorGraph(torch.arange(1, n), torch.zeros(n - 1, dtype=torch.int64), num_nodes=n).csr("in")
    hits = np.zeros(n)
    for seed in range(4000):
        hits[_sets(khop_node_sets(csr, torch.tensor([0]), [5], seed=seed))[0]] += 1
    freq = hits[1:] / 4000
    assert np.abs(freq - 0.25).max() < 0.035, freq


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
@settings(max_examples=25, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=50, max_edges=1500), fanouts=st.lists(st.integers(0, 24), min_size=1,
       max_size=3), replace=st.booleans(), seed=st.integers(0, 2**64 - 1), data=st.data())
def test_compiled_khop_twin_equals_the_numpy_path(e, fanouts, replace, seed, data):
    csr = _csr(e)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=10)))
    a = khop_node_sets(csr, targets, fanouts, replace=replace, seed=seed, compiled=False)
    b = khop_node_sets(csr, targets, fanouts, replace=replace, seed=seed, compiled=True)
    for x, y in zip(a[:3], b[:3]):
        assert torch.equal(x, y)


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
@pytest.mark.parametrize("replace", [False, True])
def test_compiled_khop_twin_on_hubs(replace):
    # two hubs of in-degree 30 and 60 fed by a ring: fanout 20 of 30 repeats in Floyd's draws every time
    n = 91
    src = torch.cat([torch.arange(1, 31), torch.arange(31, 91), torch.arange(n)])
    dst = torch.cat([torch.zeros(30, dtype=torch.int64), torch.full((60,), 1), (torch.arange(n) + 1) % n])
    csr = TensorGraph(src, dst, num_nodes=n).csr("in")
    for seed in range(40):
        a = khop_node_sets(csr, torch.tensor([0, 1, 5]), [20, 3], replace=replace, seed=seed, compiled=False)
        b = khop_node_sets(csr, torch.tensor([0, 1, 5]), [20, 3], replace=replace, seed=seed, compiled=True)
        assert all(torch.equal(x, y) for x, y in zip(a[:3], b[:3]))


@settings(max_examples=12, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=150), fanouts=st.lists(st.integers(-1, 3), min_size=1,
       max_size=2), replace=st.booleans(), seed=st.integers(0, 2**64 - 1))
@pytest.mark.interpreter
def test_khop_sets_same_on_triton_and_cpu(e, fanouts, replace, seed):
    """The Triton path builds the sets on the device (``shadow/scope_device.py``); repeated targets too."""
    csr = _csr(e)
    targets = torch.cat([torch.arange(min(e.num_src, 6)), torch.zeros(1, dtype=torch.int64)])
    out = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out[name] = khop_node_sets(csr, targets, fanouts, replace=replace, seed=seed)
    for a, b in zip(out["native"][:3], out["triton"][:3]):
        assert torch.equal(a, b)


@settings(max_examples=25, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=250), kind=st.sampled_from(["khop", "ppr"]),
       seed=st.integers(0, 2**32), data=st.data())
def test_every_subgraph_of_a_batch_is_its_induced_subgraph(e, kind, seed, data):
    csr = _csr(e)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=6)))
    sets = khop_node_sets(csr, targets, [2, 2], seed=seed) if kind == "khop" else \
        ppr_node_sets(csr, targets, topk=5, eps=1e-3)
    ip, ix, ei = csr.indptr.long().numpy(), csr.indices.long().numpy(), csr.eids.long().numpy()
    paths = [False] + ([True] if runtime.enabled() else [])
    outs = [induced_batch(ip, ix, ei, sets, compiled=c) for c in paths]
    outs.append([a.numpy() for a in induced_sets_device(csr, sets.offsets, sets.nodes)])  # the device batch
    for o in outs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(outs[0], o))
    sub_indptr, local, eids = outs[0]
    src, dst = e.src.long().numpy(), e.dst.long().numpy()
    nodes = sets.nodes.numpy()
    gid = sets.graph_ids().numpy()
    for t in range(targets.numel()):
        a, b = int(sets.offsets[t]), int(sets.offsets[t + 1])
        chosen = set(nodes[a:b].tolist())
        want = sorted(i for i in range(src.shape[0]) if src[i] in chosen and dst[i] in chosen)
        rows = range(a, b)
        got = sorted(int(x) for i in rows for x in eids[sub_indptr[i]:sub_indptr[i + 1]])
        assert got == want
        for i in rows:
            for j in range(sub_indptr[i], sub_indptr[i + 1]):
                assert gid[local[j]] == t                                  # never crosses scopes
                assert (src[eids[j]], dst[eids[j]]) == (nodes[local[j]], nodes[i])


@settings(max_examples=20, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=200, multi_edges=False), seed=st.integers(0, 2**32),
       data=st.data())
def test_symmetric_batch_has_the_same_edges(e, seed, data):
    pairs = np.unique(np.concatenate([np.stack([e.src, e.dst], 1), np.stack([e.dst, e.src], 1)]), axis=0)
    csr = TensorGraph(torch.from_numpy(pairs[:, 0]), torch.from_numpy(pairs[:, 1]), num_nodes=e.num_src).csr("in")
    half = half_csr(InCSR.from_structure(csr))
    assert half is not None
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=6)))
    sets = khop_node_sets(csr, targets, [3, 2], seed=seed)
    paths = [False] + ([True] if runtime.enabled() else [])
    outs = [induced_batch_symmetric(half, sets, compiled=c) for c in paths]
    for o in outs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(outs[0], o))
    src, dst, eids, counts = outs[0]
    sub_indptr, local, want = induced_batch(csr.indptr.long().numpy(), csr.indices.long().numpy(),
                                            csr.eids.long().numpy(), sets)
    gid = sets.graph_ids().numpy()
    assert counts.tolist() == np.bincount(gid[local], minlength=targets.numel()).tolist()
    ends = np.repeat(np.arange(sub_indptr.shape[0] - 1), np.diff(sub_indptr))
    assert sorted(zip(eids.tolist(), src.tolist(), dst.tolist())) == sorted(zip(want.tolist(), local.tolist(),
                                                                                ends.tolist()))
    assert (np.repeat(np.arange(targets.numel()), counts) == gid[dst]).all()   # each set's edges together


@pytest.mark.parametrize("fanouts, words", [
    ([], "fanouts to be a non-empty list"),
    ([2, -2], "fanouts[1] to be an int >= 0, or -1"),
    (3, "fanouts to be a non-empty list"),
    ([1.5], "fanouts[0] to be an int"),
])
def test_bad_fanouts_are_refused(fanouts, words):
    csr = TensorGraph(torch.tensor([0]), torch.tensor([1]), num_nodes=2).csr("in")
    with pytest.raises(SamplingInputError) as err:
        khop_node_sets(csr, torch.tensor([0]), fanouts, seed=0)
    assert words in str(err.value) and "Fix:" in str(err.value)


def test_bad_targets_and_seed_are_refused():
    csr = TensorGraph(torch.tensor([0]), torch.tensor([1]), num_nodes=2).csr("in")
    with pytest.raises(SamplingInputError, match=r"targets in \[0, 2\)"):
        khop_node_sets(csr, torch.tensor([2]), [1], seed=0)
    with pytest.raises(SamplingInputError, match=r"seed to be an int in \[0, 2\^64\)"):
        khop_node_sets(csr, torch.tensor([0]), [1], seed=-1)


@pytest.mark.interpreter
def test_device_sets_and_batch_read_the_host_at_most_their_bounds():
    from dgl_accel.core.sampling.induced import subgraph_device as induced_device
    from dgl_accel.core.sampling.shadow import scope_device as shadow_device
    from dgl_accel.testing.host_reads import HostReads
    src = torch.randint(0, 300, (3000,), generator=torch.Generator().manual_seed(0))
    dst = torch.randint(0, 300, (3000,), generator=torch.Generator().manual_seed(1))
    csr = TensorGraph(src, dst, num_nodes=300).csr("in")
    fanouts = [4, -1]
    with dgl_accel.use_backend("triton"):
        # the interpreter reads the kernel's arguments on the host; a compiled launch does not
        with HostReads(leave_out=[(shadow_device, "neighbor_choice_triton")]) as reads:
            offs, nodes, _ = shadow_device.khop_node_sets_device(csr, torch.arange(0, 300, 10), fanouts, seed=3,
                                                                 replace=False)
        assert 0 < len(reads.events) <= len(fanouts) * shadow_device.HOST_READS_PER_HOP, reads.events
        with HostReads() as reads:
            sub_indptr, _, eids = induced_sets_device(csr, offs, nodes, exclude=torch.tensor([0, 5]))
        assert len(reads.events) <= induced_device.HOST_READS, reads.events
    assert eids.numel() and not {0, 5} & set(eids.tolist())
