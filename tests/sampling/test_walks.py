"""Random walks (dgl_accel.sampling.walks): validity, reproducibility, distributions, DGL
compatibility and input validation.

Statistical tests use fixed seeds and chi-square / mean checks at alpha = 1e-3 each, so with
correct code a given test can only fail for an unlucky seed (about 1 in 1000 per check); the
seeds are fixed, so the outcome is deterministic.
"""
import dgl
import numpy as np
import pytest
import torch
from scipy import stats

from dgl_accel.core.sampling.rng import philox4x32, philox_randint
from dgl_accel.sampling import multi_dimensional_random_walk, node2vec_random_walk, random_walk

ALPHA = 1e-3


def _random_graph(n=40, m=200, seed=0, self_loops=False):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(n, (m,), generator=gen)
    dst = torch.randint(n, (m,), generator=gen)
    if not self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    return dgl.graph((src, dst), num_nodes=n)


def _edge_set(g):
    s, d = g.edges()
    return set(zip(s.tolist(), d.tolist()))


def _check_traces(g, traces, eids=None):
    edges = _edge_set(g)
    src, dst = g.edges()
    outdeg = g.out_degrees()
    for i, row in enumerate(traces.tolist()):
        assert row[0] >= 0
        stop = row.index(-1) if -1 in row else len(row)
        assert all(v == -1 for v in row[stop:]), "-1 must only be a suffix"
        for a, b in zip(row[: stop - 1], row[1:stop]):
            assert (a, b) in edges
        if eids is not None:
            er = eids[i].tolist()
            for k in range(stop - 1):
                e = er[k]
                assert (int(src[e]), int(dst[e])) == (row[k], row[k + 1])
            assert all(e == -1 for e in er[stop - 1:])
        yield row, stop, outdeg


def test_philox4x32_matches_rng():
    off = torch.arange(5000, dtype=torch.int64) * 7919 + (3 << 32)
    for seed in (0, 1, 2 ** 40 + 11, 2 ** 64 - 1):
        assert torch.equal(philox4x32(seed, off)[0], philox_randint(seed, off))
        for w in philox4x32(seed, off):
            assert int(w.min()) >= 0 and int(w.max()) < 2 ** 32


@pytest.mark.parametrize("kind", ["uniform", "weighted", "restart", "node2vec"])
def test_traces_are_walks(kind):
    g = _random_graph()
    g.edata["w"] = torch.rand(g.num_edges(), generator=torch.Generator().manual_seed(1))
    nodes = torch.arange(g.num_nodes()).repeat(5)
    if kind == "node2vec":
        tr, ei = node2vec_random_walk(g, nodes, 0.5, 2.0, 12, seed=3, return_eids=True)
    else:
        kw = {"prob": "w"} if kind == "weighted" else {"restart_prob": 0.2} if kind == "restart" else {}
        tr, ei, types = random_walk(g, nodes, length=12, seed=3, return_eids=True, **kw)
        assert torch.equal(types, torch.zeros(13, dtype=g.idtype))
    assert tr.shape == (nodes.numel(), 13) and ei.shape == (nodes.numel(), 12)
    assert torch.equal(tr[:, 0], nodes)
    for row, stop, outdeg in _check_traces(g, tr, ei):
        if stop < 13 and kind != "restart":
            assert outdeg[row[stop - 1]] == 0, "walks stop only at dead ends"


def test_dead_ends_stop_walks():
    g = dgl.graph(([0, 1], [1, 2]), num_nodes=4)
    tr, _ = random_walk(g, [0, 1, 2, 3], length=3, seed=0)
    assert tr.tolist() == [[0, 1, 2, -1], [1, 2, -1, -1], [2, -1, -1, -1], [3, -1, -1, -1]]
    tr2 = node2vec_random_walk(g, [0, 1, 2, 3], 1.0, 1.0, 3, seed=0)
    assert tr2.tolist() == tr.tolist()


def test_reproducible_and_batch_independent():
    g = _random_graph()
    nodes = torch.arange(g.num_nodes()).repeat(3)
    a, _ = random_walk(g, nodes, length=20, seed=7)
    b, _ = random_walk(g, nodes, length=20, seed=7)
    c, _ = random_walk(g, nodes, length=20, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    # Walk i depends only on (seed, i, nodes[i]): a prefix batch gives the same rows.
    p, _ = random_walk(g, nodes[:10], length=20, seed=7)
    assert torch.equal(p, a[:10])
    n1 = node2vec_random_walk(g, nodes, 0.5, 2.0, 20, seed=7)
    n2 = node2vec_random_walk(g, nodes, 0.5, 2.0, 20, seed=7)
    n3 = node2vec_random_walk(g, nodes, 0.5, 2.0, 20, seed=9)
    assert torch.equal(n1, n2) and not torch.equal(n1, n3)
    assert torch.equal(node2vec_random_walk(g, nodes[:10], 0.5, 2.0, 20, seed=7), n1[:10])
    # Chunking does not change results either.
    from dgl_accel.core.sampling.walks import node2vec as walks_node2vec
    from dgl_accel.core.sampling.walks import random_walk as walks
    old = walks._CHUNK, walks_node2vec._CHUNK
    walks._CHUNK = walks_node2vec._CHUNK = 7
    try:
        assert torch.equal(random_walk(g, nodes, length=20, seed=7)[0], a)
        assert torch.equal(node2vec_random_walk(g, nodes, 0.5, 2.0, 20, seed=7), n1)
    finally:
        walks._CHUNK, walks_node2vec._CHUNK = old
    torch.manual_seed(0)
    d1, _ = random_walk(g, nodes, length=5)
    torch.manual_seed(0)
    d2, _ = random_walk(g, nodes, length=5)
    assert torch.equal(d1, d2)


def _chisq_ok(counts, probs):
    counts = np.asarray(counts, dtype=float)
    exp = np.asarray(probs, dtype=float) * counts.sum()
    keep = exp > 0
    assert counts[~keep].sum() == 0, "sampled an impossible outcome"
    return stats.chisquare(counts[keep], exp[keep]).pvalue > ALPHA


def test_uniform_and_weighted_transitions():
    # Node 0 -> 1..5 with weights 1..5 (plus a zero-weight edge to 6 that must never be taken).
    dst = [1, 2, 3, 4, 5, 6]
    g = dgl.graph(([0] * 6, dst), num_nodes=7)
    g.edata["w"] = torch.tensor([1.0, 2, 3, 4, 5, 0])
    nodes = torch.zeros(30000, dtype=torch.int64)
    tr, _ = random_walk(g, nodes, length=1, seed=11)
    counts = np.bincount(tr[:, 1].numpy(), minlength=7)[1:]
    assert _chisq_ok(counts, [1 / 6] * 6)
    tr, _ = random_walk(g, nodes, length=1, seed=12, prob="w")
    counts = np.bincount(tr[:, 1].numpy(), minlength=7)[1:]
    assert _chisq_ok(counts, np.array([1, 2, 3, 4, 5, 0]) / 15)


def test_restart_lengths_geometric():
    g = dgl.graph(([0, 1, 2], [1, 2, 0]))  # a cycle: no dead ends
    L, rp, W = 10, 0.3, 20000
    tr, _ = random_walk(g, torch.zeros(W, dtype=torch.int64), length=L, restart_prob=rp, seed=5)
    steps = (tr >= 0).sum(1) - 1  # transitions made
    # P(steps >= k) = (1 - rp)^k for k <= L.
    probs = [(1 - rp) ** k * rp for k in range(L)] + [(1 - rp) ** L]
    assert _chisq_ok(np.bincount(steps.numpy(), minlength=L + 1), probs)
    mean = sum((1 - rp) ** k for k in range(1, L + 1))
    assert abs(float(steps.double().mean()) - mean) < 4 * float(steps.double().std()) / W ** 0.5
    # Per-step tensor: terminate only before transition 2.
    tr2, _ = random_walk(g, torch.zeros(1000, dtype=torch.int64), length=4,
                         restart_prob=torch.tensor([0.0, 0.0, 1.0, 0.0]), seed=5)
    assert bool((tr2[:, :3] >= 0).all()) and bool((tr2[:, 3:] == -1).all())


def _n2v_exact_probs(g, t, v, p, q, w=None):
    src, dst = g.edges()
    edges = _edge_set(g)
    probs = np.zeros(g.num_nodes())
    for e in range(g.num_edges()):
        if int(src[e]) != v:
            continue
        x = int(dst[e])
        b = 1 / p if x == t else (1.0 if (t, x) in edges else 1 / q)
        probs[x] += b * (1.0 if w is None else float(w[e]))
    return probs / probs.sum()


@pytest.mark.parametrize("p,q,weighted", [(0.5, 2.0, False), (2.0, 0.5, False), (0.25, 4.0, True),
                                          (1.0, 1.0, False), (0.01, 1.0, False),
                                          (1.0, 200.0, False)])
@pytest.mark.parametrize("max_trials", [32, 1])  # 1: most walks go through the exact fallback
def test_node2vec_second_order_distribution(p, q, weighted, max_trials, monkeypatch):
    from dgl_accel.core.sampling.walks import node2vec as walks_node2vec
    monkeypatch.setattr(walks_node2vec, "MAX_TRIALS", max_trials)
    # Undirected: t=0 -> v=1; v's neighbours: 0 (return), 2, 3 (common with t), 4, 5 (distance 2).
    und = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (1, 4), (1, 5), (4, 5), (5, 6)]
    s = [a for a, b in und] + [b for a, b in und]
    d = [b for a, b in und] + [a for a, b in und]
    g = dgl.graph((s, d), num_nodes=7)
    w = None
    if weighted:
        w = torch.arange(1, g.num_edges() + 1, dtype=torch.float32)
        g.edata["w"] = w
    # Force the first step 0 -> 1 by weighting: use start node 0 and keep only walks that went to 1.
    W = 40000
    tr = node2vec_random_walk(g, torch.zeros(W, dtype=torch.int64), p, q, 2, seed=21,
                              prob="w" if weighted else None)
    sel = tr[:, 1] == 1
    counts = np.bincount(tr[sel, 2].numpy(), minlength=7)
    assert _chisq_ok(counts, _n2v_exact_probs(g, 0, 1, p, q, w))


def test_node2vec_directed_no_return_edge():
    # 0 -> 1 -> {2, 3}, 0 -> 2: no edge 1 -> 0, so the return bias never applies.
    g = dgl.graph(([0, 1, 1, 0], [1, 2, 3, 2]))
    tr = node2vec_random_walk(g, torch.zeros(20000, dtype=torch.int64), 0.25, 4.0, 2, seed=3)
    sel = tr[:, 1] == 1
    counts = np.bincount(tr[sel, 2].numpy(), minlength=4)
    assert _chisq_ok(counts, _n2v_exact_probs(g, 0, 1, 0.25, 4.0))


@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_compatible_with_dgl(idtype):
    g = _random_graph(n=30, m=90, seed=4).astype(idtype)
    g.edata["p"] = torch.rand(g.num_edges())
    nodes = torch.arange(g.num_nodes(), dtype=idtype)
    for kw in ({}, {"prob": "p"}, {"restart_prob": 0.3}):
        ref = dgl.sampling.random_walk(g, nodes, length=6, **kw)
        out = random_walk(g, nodes, length=6, seed=0, **kw)
        assert len(out) == len(ref)
        for a, b in zip(out, ref):
            assert a.shape == b.shape and a.dtype == b.dtype
        ref = dgl.sampling.random_walk(g, nodes, length=6, return_eids=True, **kw)
        out = random_walk(g, nodes, length=6, seed=0, return_eids=True, **kw)
        for a, b in zip(out, ref):
            assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.equal(out[2], ref[2])
    ref = dgl.sampling.node2vec_random_walk(g, nodes, 0.5, 2.0, 6)
    out = node2vec_random_walk(g, nodes, 0.5, 2.0, 6, seed=0)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    ref = dgl.sampling.node2vec_random_walk(g, nodes, 0.5, 2.0, 6, return_eids=True)
    out = node2vec_random_walk(g, nodes, 0.5, 2.0, 6, seed=0, return_eids=True)
    for a, b in zip(out, ref):
        assert a.shape == b.shape and a.dtype == b.dtype
    # Same padding on a graph with dead ends.
    gd = dgl.graph(([0, 1], [1, 2]), num_nodes=3).astype(idtype)
    ref, _ = dgl.sampling.random_walk(gd, torch.tensor([0, 1, 2], dtype=idtype), length=3)
    out, _ = random_walk(gd, torch.tensor([0, 1, 2], dtype=idtype), length=3, seed=0)
    assert torch.equal(out, ref)


def test_mdrw_valid_and_budget():
    g = _random_graph(n=30, m=120, seed=2)
    edges = _edge_set(g)
    src_all, dst_all = g.edges()
    res = multi_dimensional_random_walk(g, 4, 25, num_instances=50, seed=1)
    assert res.nodes.shape == (50, 25) and res.src.shape == (50, 21)
    for i in range(50):
        for k in range(21):
            s_, d_, e = int(res.src[i, k]), int(res.dst[i, k]), int(res.eids[i, k])
            if s_ == -1:
                assert bool((res.src[i, k:] == -1).all())
                break
            assert (s_, d_) in edges and (int(src_all[e]), int(dst_all[e])) == (s_, d_)
            assert int(res.nodes[i, 4 + k]) == d_
    assert int(res.nodes.max()) < g.num_nodes()
    same = multi_dimensional_random_walk(g, 4, 25, num_instances=50, seed=1)
    assert torch.equal(same.nodes, res.nodes)


def test_mdrw_pop_probability_proportional_to_degree():
    # Frontier {0, 1, 2} with out-degrees 1, 2, 3: the first pop is proportional to degree.
    g = dgl.graph(([0, 1, 1, 2, 2, 2], [3, 3, 3, 3, 3, 3]), num_nodes=4)
    roots = torch.tensor([0, 1, 2])
    res = multi_dimensional_random_walk(g, roots, 4, num_instances=30000, seed=3)
    counts = np.bincount(res.src[:, 0].numpy(), minlength=3)
    assert _chisq_ok(counts, [1 / 6, 2 / 6, 3 / 6])
    # Node 3 is a dead end: after it replaces every root, nothing is left to pop.
    res = multi_dimensional_random_walk(g, roots, 8, num_instances=5, seed=3)
    assert bool((res.src[:, 3:] == -1).all()) and bool((res.nodes[:, :6] >= 0).all())


def test_bad_inputs():
    g = _random_graph()
    g.edata["neg"] = -torch.ones(g.num_edges())
    g.edata["short"] = torch.ones(g.num_edges(), 2)  # not one scalar per edge
    bad = [
        lambda: random_walk(g, [0], length=-1),
        lambda: random_walk(g, [0, g.num_nodes()], length=3),
        lambda: random_walk(g, [-1], length=3),
        lambda: random_walk(g, [0], length=3, prob="missing"),
        lambda: random_walk(g, [0], length=3, prob="neg"),
        lambda: random_walk(g, [0], length=3, prob="short"),
        lambda: random_walk(g, [0], length=3, restart_prob=1.5),
        lambda: random_walk(g, [0], length=3, restart_prob=-0.1),
        lambda: random_walk(g, [0], length=3, restart_prob=torch.tensor([0.1, 0.2])),
        lambda: random_walk(g, [0], length=3, seed=-1),
        lambda: node2vec_random_walk(g, [0], 0.0, 1.0, 3),
        lambda: node2vec_random_walk(g, [0], 1.0, -2.0, 3),
        lambda: node2vec_random_walk(g, [0], 1.0, 1.0, -3),
        lambda: multi_dimensional_random_walk(g, 0, 5),
        lambda: multi_dimensional_random_walk(g, 5, 3),
    ]
    for f in bad:
        with pytest.raises(ValueError, match="expected"):
            f()


def test_edge_membership_matches_edge_set():
    # The node2vec neighbour test (hash set of edges, with spill-over into the overflow array
    # forced by a tiny bucket width) must agree exactly with the edge set, including queries
    # (t, x) where x is larger than every out-neighbour of t and equals the first out-neighbour of
    # t + 1 (a false positive of the former binary search).
    from dgl_accel.core.sampling.walks import node2vec as walks_node2vec
    from dgl_accel.sampling.walks import walk_csr
    g = _random_graph(n=60, m=900, seed=5, self_loops=True)
    g = dgl.add_edges(g, [3, 4], [10, 50])  # row 3 ends at 10 < 50 = the first entry of row 4
    edges = _edge_set(g)
    a, b = torch.meshgrid(torch.arange(60), torch.arange(60), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    want = torch.tensor([(x, y) in edges for x, y in zip(a.tolist(), b.tolist())])
    for width in (4, 1):
        old = walks_node2vec._HASH_WIDTH
        walks_node2vec._HASH_WIDTH = width
        try:
            eh = walks_node2vec.EdgeHash(walk_csr(g))
        finally:
            walks_node2vec._HASH_WIDTH = old
        if width == 1:
            assert eh.overflow.numel() > 0
        assert torch.equal(eh.contains(a, b), want)
