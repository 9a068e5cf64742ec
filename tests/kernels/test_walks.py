"""Random-walk Triton kernels (kernels/walks.py) under the interpreter: for the same seed they
return exactly the traces and edge ids of the CPU path (dgl_accel/core/sampling/walks*.py), for
DeepWalk, weighted walks, restarts, node2vec (rejection trials and the exact fallback), the
frontier sampler (multi_dimensional_random_walk) and dead ends, and the backend stats show which
path ran.  No statistics here: equality is exact.
"""
import dgl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.sampling import multi_dimensional_random_walk, node2vec_random_walk, random_walk
from dgl_accel.testing.cpu_loops import forced_jit
from dgl_accel.testing.strategies import graphs


def _both(fn):
    """``fn()`` on the native CPU path and on the Triton path (interpreter), as tuples."""
    with dgl_accel.use_backend("native"):
        a = fn()
    with dgl_accel.use_backend("triton"):
        b = fn()
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return a, b


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert torch.equal(x, y), (x, y)


def _weighted(g, seed):
    """Edge weights with exact zeros, so some rows sum to 0 (dead ends for weighted walks)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.rand(g.num_edges(), generator=gen)
    g.edata["w"] = w * (torch.rand(g.num_edges(), generator=gen) > 0.3)
    return g


def _start_nodes(g, k=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(g.num_nodes(), (k,), generator=gen)


@pytest.mark.interpreter
@settings(max_examples=20, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=16, max_edges=48), seed=st.integers(0, 2 ** 64 - 1),
       weighted=st.booleans(), restart=st.sampled_from([0.0, 0.3]))
def test_random_walk_kernel_equals_cpu(g, seed, weighted, restart):
    prob = "w" if weighted else None
    if weighted:
        _weighted(g, seed % 1000)
    nodes = _start_nodes(g, seed=seed % 1000)
    a, b = _both(lambda: random_walk(g, nodes, length=5, prob=prob, restart_prob=restart, seed=seed,
                                     return_eids=True))
    _assert_same(a, b)


@pytest.mark.interpreter
@settings(max_examples=15, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=12, max_edges=40), seed=st.integers(0, 2 ** 64 - 1),
       weighted=st.booleans(), pq=st.sampled_from([(1.0, 1.0), (0.5, 2.0), (2.0, 0.25), (0.3, 3.0)]))
def test_node2vec_kernel_equals_cpu(g, seed, weighted, pq):
    prob = "w" if weighted else None
    if weighted:
        _weighted(g, seed % 1000)
    nodes = _start_nodes(g, k=8, seed=seed % 1000)
    a, b = _both(lambda: node2vec_random_walk(g, nodes, pq[0], pq[1], 4, prob=prob, seed=seed, return_eids=True))
    _assert_same(a, b)


def _dense(n=10, seed=0):
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = src != dst
    g = dgl.graph((src[keep], dst[keep]), num_nodes=n)
    g.edata["w"] = torch.rand(g.num_edges(), generator=torch.Generator().manual_seed(seed))
    return g


@pytest.mark.interpreter
@pytest.mark.parametrize("prob", [None, "w"])
def test_node2vec_exact_fallback_equals_cpu(prob, monkeypatch):
    # On a complete graph every candidate is a neighbour of the previous node, so with q = 1/64
    # (envelope 64) and p = 1/2 a trial accepts with probability <= 2/64 and many steps end in the
    # exact fallback; a spy on the CPU fallback checks that it really ran.
    from dgl_accel.core.sampling.walks import node2vec as walks_node2vec

    g = _dense()
    calls = []
    original = walks_node2vec._n2v_exact
    monkeypatch.setattr(walks_node2vec, "_n2v_exact", lambda *a, **k: calls.append(a[3].numel()) or original(*a, **k))
    nodes = torch.arange(g.num_nodes()).repeat(2)
    with forced_jit(False):  # the numpy path's fallback (the compiled loop has its own, in core/jit)
        a, b = _both(lambda: node2vec_random_walk(g, nodes, 0.5, 1 / 64, 5, prob=prob, seed=7, return_eids=True))
    assert sum(calls) >= 10
    _assert_same(a, b)


@pytest.mark.interpreter
def test_dead_ends_and_restart_tensor():
    # 0 -> 1 -> 2 -> 3 (3 has no out-edges), 4 isolated, 5 -> 5 self-loop.
    g = dgl.graph((torch.tensor([0, 1, 2, 5]), torch.tensor([1, 2, 3, 5])), num_nodes=6)
    nodes = torch.tensor([0, 2, 3, 4, 5, 1])
    a, b = _both(lambda: random_walk(g, nodes, length=4, seed=1, return_eids=True))
    _assert_same(a, b)
    traces, eids = b[0], b[1]
    assert traces[0].tolist() == [0, 1, 2, 3, -1]
    assert traces[2].tolist() == [3, -1, -1, -1, -1] and traces[3].tolist() == [4, -1, -1, -1, -1]
    assert traces[4].tolist() == [5] * 5 and eids[4].tolist() == [3] * 4
    # Restart probability per step, including an always-terminate step (1.0).
    rp = torch.tensor([0.0, 0.5, 1.0, 0.0])
    a, b = _both(lambda: random_walk(g, nodes, length=4, restart_prob=rp, seed=3, return_eids=True))
    _assert_same(a, b)
    assert (b[0][:, 3:] == -1).all()
    a, b = _both(lambda: node2vec_random_walk(g, nodes, 0.5, 2.0, 4, seed=2, return_eids=True))
    _assert_same(a, b)
    assert b[0][0].tolist() == [0, 1, 2, 3, -1] and b[0][4].tolist() == [5] * 5


@pytest.mark.interpreter
def test_weighted_zero_rows_and_large_seed():
    g = dgl.graph((torch.tensor([0, 0, 1, 1, 2, 2, 3]), torch.tensor([1, 2, 2, 3, 0, 3, 0])), num_nodes=4)
    g.edata["w"] = torch.tensor([1.0, 3.0, 0.0, 0.0, 0.5, 0.25, 2.0])  # node 1's weights sum to 0
    nodes = torch.tensor([0, 1, 2, 3] * 4)
    seed = 2 ** 64 - 12345  # a seed past 2^63: the kernel receives its bit pattern as int64
    a, b = _both(lambda: random_walk(g, nodes, length=6, prob="w", seed=seed, return_eids=True))
    _assert_same(a, b)
    assert (b[0][nodes == 1, 1:] == -1).all()
    a, b = _both(lambda: node2vec_random_walk(g, nodes, 2.0, 0.5, 6, prob="w", seed=seed, return_eids=True))
    _assert_same(a, b)


@pytest.mark.interpreter
def test_triton_path_is_recorded_and_degenerate_calls():
    g = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 0])), num_nodes=3, idtype=torch.int32)
    dgl_accel.reset_stats()
    with dgl_accel.use_backend("triton"):
        tr, types = random_walk(g, torch.tensor([0, 2]), length=3, seed=0)
        assert tr.dtype == torch.int32 and tr.tolist() == [[0, 1, 0, 1], [2, -1, -1, -1]]
        assert types.tolist() == [0, 0, 0, 0]
        # length 0 and no walks: nothing to launch, shapes as on the CPU path
        a = random_walk(g, torch.tensor([1]), length=0, seed=0, return_eids=True)
        assert a[0].tolist() == [[1]] and a[1].shape == (1, 0)
        assert node2vec_random_walk(g, torch.tensor([], dtype=torch.int64), 1.0, 1.0, 3, seed=0).shape == (0, 4)
    stats = dgl_accel.stats()
    assert stats["random_walk"] == {"triton-interpreter": 2}
    assert stats["node2vec_random_walk"] == {"triton-interpreter": 1}
    with dgl_accel.use_backend("native"):
        random_walk(g, torch.tensor([0]), length=2, seed=0)
    assert dgl_accel.stats()["random_walk"]["native-cpu"] == 1


@pytest.mark.interpreter
@settings(max_examples=10, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=16, max_edges=48), seed=st.integers(0, 2 ** 64 - 1),
       m=st.integers(1, 4), extra=st.integers(0, 12), instances=st.integers(1, 3))
def test_mdrw_kernel_equals_cpu(g, seed, m, extra, instances):
    # Graphs with dead ends make some frontiers run out of out-edges (the rest stays -1).
    a, b = _both(lambda: multi_dimensional_random_walk(g, m, m + extra, num_instances=instances, seed=seed))
    _assert_same(tuple(a[0]), tuple(b[0]))


@pytest.mark.interpreter
def test_mdrw_kernel_chunked_frontier():
    # A frontier larger than the kernel's scan chunk (MDRW_BLOCK_M = 1024 slots), given as roots [I, m].
    from dgl_accel.kernels.walks import MDRW_BLOCK_M

    g = _dense(12)
    gen = torch.Generator().manual_seed(3)
    roots = torch.randint(12, (2, MDRW_BLOCK_M + 77), generator=gen)
    a, b = _both(lambda: multi_dimensional_random_walk(g, roots, roots.shape[1] + 6, seed=11))
    _assert_same(tuple(a[0]), tuple(b[0]))
    assert dgl_accel.stats()["multi_dimensional_random_walk"]["triton-interpreter"] == 1
