"""Approximate personalised PageRank (``core/sampling/shadow/ppr.py``) without DGL: the push estimates are
within the push method's bound of exact PPR (power iteration in float64), the top-K sets hold the
target and the best-scored nodes (ties by id, threshold respected), the compiled twin is
bit-identical to the numpy reference, and bad arguments are refused before any work."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.checks import SamplingInputError
from dgl_accel.core.sampling.shadow.ppr import PPRTable, ppr_node_sets, ppr_push_np, ppr_topk_np
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first


def _symmetric_csr(e):
    """In-CSR of the graph with every edge in both directions (symmetric adjacency, multi-edges and
    self-loops kept with their multiplicity)."""
    src, dst = torch.cat([e.src, e.dst]), torch.cat([e.dst, e.src])
    return TensorGraph(src, dst, num_nodes=e.num_src).csr("in")


def _exact_ppr(csr, s, alpha):
    """Power iteration in float64: pi = alpha e_s + (1 - alpha) M pi, M[v, u] = mult(u -> v) / deg(u)."""
    indptr, indices = csr.indptr.long().numpy(), csr.indices.long().numpy()
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    M = np.zeros((n, n))
    for u in range(n):
        for v in indices[indptr[u]:indptr[u + 1]]:
            M[v, u] += 1.0 / deg[u]
    e = np.zeros(n)
    e[s] = 1.0
    pi = alpha * e
    for _ in range(2000):
        nxt = alpha * e + (1 - alpha) * M @ pi
        if np.abs(nxt - pi).max() < 1e-15:
            break
        pi = nxt
    return nxt, np.maximum(deg, 1)


@settings(max_examples=30, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=120), alpha=st.floats(0.05, 0.9),
       eps=st.sampled_from([1e-1, 1e-2, 1e-3, 1e-4]), data=st.data())
def test_push_is_within_the_error_bound_of_exact_ppr(e, alpha, eps, data):
    csr = _symmetric_csr(e)
    s = data.draw(st.integers(0, e.num_src - 1))
    p = ppr_push_np(csr.indptr.long().numpy(), csr.indices.long().numpy(), s, alpha, eps)
    pi, deg = _exact_ppr(csr, s, alpha)
    gap = pi - p
    assert (gap >= -1e-12).all()                      # the push never overestimates
    assert (gap < eps * deg + 1e-12).all(), (gap / deg).max()   # 0 <= pi - p < eps * max(deg, 1)
    # the sets carry the same estimates (topk = n: every node with a positive estimate)
    sets = ppr_node_sets(csr, torch.tensor([s]), topk=e.num_src, alpha=alpha, eps=eps, compiled=False)
    assert torch.equal(sets.nodes, torch.from_numpy(np.flatnonzero(p > 0)))
    assert torch.equal(sets.scores, torch.from_numpy(p[p > 0]))


@settings(max_examples=30, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=200), topk=st.integers(1, 12),
       threshold=st.sampled_from([None, 0.0, 1e-3, 0.02]), data=st.data())
def test_topk_sets_hold_the_target_and_the_best_scores(e, topk, threshold, data):
    csr = _symmetric_csr(e)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=6)))
    sets = ppr_node_sets(csr, targets, topk=topk, alpha=0.15, eps=1e-4, threshold=threshold, compiled=False)
    ip, ix = csr.indptr.long().numpy(), csr.indices.long().numpy()
    for t, s in enumerate(targets.tolist()):
        a, b = int(sets.offsets[t]), int(sets.offsets[t + 1])
        got = sets.nodes[a:b].tolist()
        assert got == sorted(set(got)) and s in got and int(sets.nodes[sets.target_pos[t]]) == s
        p = ppr_push_np(ip, ix, s, 0.15, 1e-4)
        cand = [v for v in np.flatnonzero(p > 0).tolist() if v != s and p[v] >= (threshold or 0.0)]
        best = sorted(cand, key=lambda v: (-p[v], v))[:topk - 1]     # ties: smaller id first
        assert got == sorted([s] + best)
        assert sets.scores[a:b].tolist() == p[got].tolist()


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
@settings(max_examples=25, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=60, max_edges=400), topk=st.integers(1, 30),
       alpha=st.floats(0.05, 0.9), eps=st.sampled_from([1e-2, 1e-4, 1e-6]), directed=st.booleans(), data=st.data())
def test_compiled_twin_is_bit_identical(e, topk, alpha, eps, directed, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in") if directed else _symmetric_csr(e)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=10)))
    a = ppr_node_sets(csr, targets, topk=topk, alpha=alpha, eps=eps, compiled=False)
    b = ppr_node_sets(csr, targets, topk=topk, alpha=alpha, eps=eps, compiled=True)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


@settings(max_examples=15, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=200), topk=st.integers(1, 8), data=st.data())
def test_table_serves_the_same_sets(e, topk, data):
    csr = _symmetric_csr(e)
    table = PPRTable(csr, topk=topk, eps=1e-4)
    for _ in range(3):  # overlapping batches with repeats: computed once, served after
        targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=8)))
        got, want = table.node_sets(csr, targets), ppr_node_sets(csr, targets, topk=topk, eps=1e-4)
        for x, y in zip(got, want):
            assert torch.equal(x, y)
    assert table.computed <= e.num_src


@pytest.mark.interpreter
# 25 examples: over 2 s on 2 cores under the interpreter (the slow case); the quick case draws 5 of the same
@pytest.mark.parametrize("examples", quick_first([5, 25]))
def test_device_pipeline_equals_the_reference(examples):
    """``shadow/ppr_device.py`` (torch ops and the spread kernel, interpreted): the reference's nodes, scores
    and counts bit for bit, whatever the targets per group (repeats included), within its host-read
    bound."""
    from dgl_accel.core.sampling.shadow import ppr_device
    from dgl_accel.testing.host_reads import HostReads

    @settings(max_examples=examples, deadline=None)
    @given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=200), topk=st.integers(1, 12),
           threshold=st.sampled_from([0.0, 1e-3, 0.02]), eps=st.sampled_from([1e-2, 1e-3]), directed=st.booleans(),
           group=st.sampled_from([None, 1, 2]), data=st.data())
    def check(e, topk, threshold, eps, directed, group, data):
        csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in") if directed else _symmetric_csr(e)
        ip, ix = csr.indptr.long().numpy(), csr.indices.long().numpy()
        tnp = np.array(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=6)), dtype=np.int64)
        with pytest.MonkeyPatch.context() as mp, HostReads() as reads:
            if group is not None:
                mp.setattr(ppr_device, "WORKSPACE_BYTES", 16 * e.num_src * group)
            *got, rounds = ppr_device.ppr_topk_device(csr.indptr, csr.indices, torch.from_numpy(tnp), 0.15, eps, topk,
                                                      threshold)
        for x, want in zip(got, ppr_topk_np(ip, ix, tnp, 0.15, eps, topk, threshold)):
            assert np.array_equal(x.numpy(), want)
        groups = -(-len(tnp) // (group or len(tnp)))
        assert len(reads.events) <= ppr_device.HOST_READS_PER_ROUND * rounds + ppr_device.HOST_READS_PER_GROUP * groups

    check()


@settings(max_examples=8, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=16, max_edges=50), topk=st.integers(1, 8),
       eps=st.sampled_from([1e-2, 1e-3]), directed=st.booleans(), data=st.data())
@pytest.mark.interpreter
def test_triton_kernel_equals_the_cpu_path(e, topk, eps, directed, data):
    """The device pipeline and kernels/ppr.py under the interpreter: the CPU's estimates bit for bit (parallel edges,
    self-loops, nodes without neighbours included), so the same sets."""
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in") if directed else _symmetric_csr(e)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=3)))
    want = ppr_node_sets(csr, targets, topk=topk, eps=eps, compiled=False)
    with dgl_accel.use_backend("triton"):
        dgl_accel.reset_stats()
        got = ppr_node_sets(csr, targets, topk=topk, eps=eps)
        assert "ppr_push" in str(dgl_accel.stats())
    for x, y in zip(got, want):
        assert torch.equal(x, y)


def test_table_grows_past_its_first_rows():
    n = 3000  # a ring: 800-target batches outgrow the first 1024 rows twice
    csr = TensorGraph(torch.arange(n), (torch.arange(n) + 1) % n, num_nodes=n).csr("in")
    table = PPRTable(csr, topk=3, eps=1e-3)
    for first in (0, 700, 1500, 2300, 0):
        targets = torch.arange(first, first + 800) % n
        got, want = table.node_sets(csr, targets), ppr_node_sets(csr, targets, topk=3, eps=1e-3)
        assert all(torch.equal(x, y) for x, y in zip(got, want))
    assert table.computed == n


def test_isolated_target_keeps_alpha():
    csr = TensorGraph(torch.tensor([0]), torch.tensor([1]), num_nodes=3).csr("in")
    sets = ppr_node_sets(csr, torch.tensor([2]), topk=5, alpha=0.2)
    assert sets.nodes.tolist() == [2] and sets.scores.tolist() == [0.2]


@pytest.mark.parametrize("kwargs, words", [
    (dict(topk=0), "topk to be a positive int"),
    (dict(topk=2.5), "topk to be a positive int"),
    (dict(alpha=0.0), "alpha (the teleport probability) in (0, 1)"),
    (dict(alpha=1.0), "alpha (the teleport probability) in (0, 1)"),
    (dict(alpha="x"), "alpha to be a number"),
    (dict(eps=0.0), "eps > 0"),
    (dict(eps=-1e-5), "eps > 0"),
    (dict(threshold=-1.0), "threshold to be None or a finite number >= 0"),
])
def test_bad_arguments_are_refused(kwargs, words):
    csr = TensorGraph(torch.tensor([0]), torch.tensor([1]), num_nodes=2).csr("in")
    with pytest.raises(SamplingInputError) as err:
        ppr_node_sets(csr, torch.tensor([0]), **kwargs)
    assert words in str(err.value) and "Fix:" in str(err.value)


def test_targets_out_of_range_are_refused():
    csr = TensorGraph(torch.tensor([0]), torch.tensor([1]), num_nodes=2).csr("in")
    with pytest.raises(SamplingInputError, match=r"targets in \[0, 2\).*values in \[0, 5\]"):
        ppr_node_sets(csr, torch.tensor([0, 5]))


def test_device_selection_breaks_ties_by_id():
    """The device selection picks what the reference's sort does: the target, then the best
    ``topk - 1`` positive scores at or above the threshold, equal scores by lower id (scores drawn
    from five values: ties everywhere)."""
    from dgl_accel.core.sampling.shadow.ppr_device import _select
    gen = torch.Generator().manual_seed(0)
    for _ in range(100):
        g, n = int(torch.randint(1, 5, (1,), generator=gen)), int(torch.randint(1, 30, (1,), generator=gen))
        targets = torch.randint(0, n, (g,), generator=gen)
        p = torch.randint(-1, 4, (g, n), generator=gen).double().clamp(min=0) / 4
        p[torch.arange(g), targets] = 0.5  # the target's own estimate is positive, as after a push
        for topk in (1, 2, 5, n + 1):
            threshold = float(torch.randint(0, 2, (1,), generator=gen)) / 4
            nodes, scores, counts = _select(p.flatten(), targets, n, topk, threshold)
            for t in range(g):
                s_ = int(targets[t])
                cand = [v for v in range(n) if v != s_ and p[t, v] > 0 and p[t, v] >= threshold]
                want = sorted([s_] + sorted(cand, key=lambda v: (-float(p[t, v]), v))[:topk - 1])
                assert nodes[t, :int(counts[t])].tolist() == want and (nodes[t, int(counts[t]):] == -1).all()
                assert scores[t, :int(counts[t])].tolist() == p[t, want].tolist()
