"""The walk family on CSR views without DGL (``dgl_accel.core.sampling.walks.random_walk*``): random walks,
node2vec and the multi-dimensional random walk give the same traces on the Triton kernels
(``kernels/walks.py``, under the interpreter) as on the CPU twin, and every trace follows real edges.
(tests/sampling/test_walks.py and tests/kernels/test_walks.py run the DGL adapter.)"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.walks.mdrw import multi_dimensional_random_walk
from dgl_accel.core.sampling.walks.node2vec import node2vec_random_walk
from dgl_accel.core.sampling.walks.random_walk import WalkCSR, random_walk
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit


def walk_csr(e: tst.EdgeList) -> WalkCSR:
    return WalkCSR(TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("out"))


def both(fn):
    """``fn()`` on the native CPU path and on the Triton path (interpreter), as tuples."""
    out = []
    dgl_accel.reset_stats()
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            r = fn()
        out.append(tuple(r) if isinstance(r, tuple) else (r,))
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None
            continue
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), (x, y)


def assert_follows_edges(e: tst.EdgeList, traces, eids):
    """Each step u -> v of a trace is edge eids[i, s] = (u, v); -1 only after the walk stopped."""
    src, dst = e.src.long(), e.dst.long()
    for i in range(traces.shape[0]):
        for s in range(traces.shape[1] - 1):
            u, v = int(traces[i, s]), int(traces[i, s + 1])
            if u < 0:
                assert v < 0 and int(eids[i, s]) == -1
            elif v >= 0:
                k = int(eids[i, s])
                assert (int(src[k]), int(dst[k])) == (u, v), (i, s, u, v, k)


def weights_with_zeros(num_edges: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(num_edges, generator=gen) * (torch.rand(num_edges, generator=gen) > 0.3)


@settings(max_examples=20)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=16, max_edges=48), seed=st.integers(0, 2**64 - 1),
       weighted=st.booleans(), restart=st.sampled_from([0.0, 0.3]))
@pytest.mark.interpreter
def test_random_walk_kernel_equals_cpu_and_follows_edges(e, seed, weighted, restart):
    csr = walk_csr(e)
    w = weights_with_zeros(e.src.numel(), seed % 1000) if weighted else None
    nodes = torch.randint(e.num_src, (12,), generator=torch.Generator().manual_seed(seed % 1000))
    a, b = both(lambda: random_walk(csr, nodes, 5, weights=w, restart_prob=restart, seed=seed, return_eids=True))
    assert_same(a, b)
    traces, eids = a
    assert traces.shape == (12, 6) and torch.equal(traces[:, 0], nodes.long())
    assert_follows_edges(e, traces, eids)
    if w is not None:  # zero-weight edges are never taken
        taken = eids[eids >= 0]
        assert bool((w[taken] > 0).all())


@settings(max_examples=15)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=12, max_edges=40), seed=st.integers(0, 2**64 - 1),
       weighted=st.booleans(), pq=st.sampled_from([(1.0, 1.0), (0.5, 2.0), (2.0, 0.25), (0.3, 3.0)]))
@pytest.mark.interpreter
def test_node2vec_kernel_equals_cpu_and_follows_edges(e, seed, weighted, pq):
    csr = walk_csr(e)
    w = weights_with_zeros(e.src.numel(), seed % 1000) if weighted else None
    nodes = torch.randint(e.num_src, (8,), generator=torch.Generator().manual_seed(seed % 1000))
    a, b = both(lambda: node2vec_random_walk(csr, nodes, pq[0], pq[1], 4, weights=w, seed=seed, return_eids=True))
    assert_same(a, b)
    assert_follows_edges(e, *a)


@pytest.mark.interpreter
@pytest.mark.parametrize("weighted", [False, True])
def test_node2vec_exact_fallback_equals_cpu(weighted, monkeypatch):
    # A complete graph with q = 1/64: a trial accepts with probability <= 2/64, so many steps end
    # in the exact fallback; a spy on the CPU fallback checks that it really ran.
    from dgl_accel.core.sampling.walks import node2vec as walks_node2vec

    n = 10
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = src != dst
    e = tst.EdgeList(src[keep], dst[keep], n, n)
    w = torch.rand(e.src.numel(), generator=torch.Generator().manual_seed(0)) if weighted else None
    calls = []
    original = walks_node2vec._n2v_exact
    monkeypatch.setattr(walks_node2vec, "_n2v_exact", lambda *a, **k: calls.append(a[3].numel()) or original(*a, **k))
    csr = walk_csr(e)
    with forced_jit(False):  # the numpy path's fallback (the compiled loop has its own, in core/jit)
        a, b = both(lambda: node2vec_random_walk(csr, torch.arange(n).repeat(2), 0.5, 1 / 64, 5, weights=w, seed=7,
                                                 return_eids=True))
    assert sum(calls) >= 10
    assert_same(a, b)
    assert_follows_edges(e, *a)


@settings(max_examples=10)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=16, max_edges=48), seed=st.integers(0, 2**64 - 1),
       m=st.integers(1, 4), extra=st.integers(0, 12), instances=st.integers(1, 3))
@pytest.mark.interpreter
def test_mdrw_kernel_equals_cpu(e, seed, m, extra, instances):
    csr = walk_csr(e)
    a, b = both(lambda: multi_dimensional_random_walk(csr, m, m + extra, num_instances=instances, seed=seed))
    assert_same(a, b)
    assert dgl_accel.stats()["multi_dimensional_random_walk"] == {"native-cpu": 1, "triton-interpreter": 1}
