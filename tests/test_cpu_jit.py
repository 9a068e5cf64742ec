"""The compiled CPU loops (numba, ``dgl_accel.core.jit``) reproduce the numpy path bit for bit:
neighbour choice (uniform, with and without replacement, all neighbours) and block relabelling,
induced subgraphs, node2vec walks and the aggregation's ``rows_spmm``; NeighborSampler blocks are
identical with and without them."""
import contextlib
from unittest import mock

import dgl
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.jit import aggregation, runtime
from dgl_accel.core.jit import neighbor as jit_neighbor
from dgl_accel.core.sampling import choice, walks_node2vec
from dgl_accel.sampling import NeighborSampler
from dgl_accel.testing.strategies import graphs

pytestmark = pytest.mark.skipif(not runtime.enabled(), reason="numba not installed (the numpy path runs)")


@contextlib.contextmanager
def jit(on: bool):
    """Force the compiled loops on (every size) or off (the numpy path) inside the block."""
    saved = runtime.MIN_WORK
    runtime.MIN_WORK = 0 if on else 2**62
    try:
        yield
    finally:
        runtime.MIN_WORK = saved


@st.composite
def csr_and_transits(draw):
    n = draw(st.integers(1, 60))
    # light rows (deg <= fanout: copied) and heavy rows (Floyd / modulo draws), hubs above 2^8
    degrees = draw(st.lists(st.one_of(st.integers(0, 6), st.integers(20, 70), st.integers(300, 400)),
                            min_size=n, max_size=n))
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(degrees)
    v = np.asarray(draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=40, unique=True)), dtype=np.int64)
    return indptr, v, n


@settings(max_examples=40, deadline=None)
@given(case=csr_and_transits(), fanout=st.sampled_from([-1, 0, 1, 3, 4, 5, 10, 15, 33]), replace=st.booleans(),
       seed=st.integers(0, 2**64 - 1), step=st.integers(0, 5))
def test_choice_matches_numpy(case, fanout, replace, seed, step):
    indptr, v, n = case
    with jit(True):
        pos, counts = choice.uniform_choice_flat(indptr, v, fanout, seed, step, n, replace)
    with jit(False):
        ref_pos, ref_counts = choice.uniform_choice_flat(indptr, v, fanout, seed, step, n, replace)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(pos, ref_pos)
    if not replace:  # a k-subset per transit: no position twice
        offs = np.concatenate([[0], np.cumsum(counts)])
        for i in range(v.size):
            row = pos[offs[i]:offs[i + 1]]
            assert np.unique(row).size == row.size


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 500), data=st.data())
def test_relabel_matches_numpy(n, data):
    dst = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=50, unique=True)), dtype=np.int64)
    src = np.asarray(data.draw(st.lists(st.integers(0, n - 1), max_size=300)), dtype=np.int64)
    new, local = jit_neighbor.relabel(src, dst, n)
    expect_new = np.setdiff1d(np.unique(src), dst)
    np.testing.assert_array_equal(new, expect_new)
    ids = np.concatenate([dst, new])
    np.testing.assert_array_equal(ids[local], src)  # local ids point back at the sources


@settings(max_examples=15, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=80, max_edges=600), replace=st.booleans(), seed=st.integers(0, 2**32))
def test_sampler_blocks_identical_with_and_without_jit(g, replace, seed):
    seeds = torch.arange(0, g.num_nodes(), 2, dtype=g.idtype)
    with jit(True):
        got = NeighborSampler([4, 3], replace=replace, seed=seed).sample_blocks(g, seeds)
    with jit(False):
        ref = NeighborSampler([4, 3], replace=replace, seed=seed).sample_blocks(g, seeds)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    for b, r in zip(got[2], ref[2]):
        assert b.num_src_nodes() == r.num_src_nodes() and b.num_dst_nodes() == r.num_dst_nodes()
        for x, y in zip(b.edges(order="eid"), r.edges(order="eid")):
            assert torch.equal(x, y)
        assert torch.equal(b.edata[dgl.EID], r.edata[dgl.EID])
        assert torch.equal(b.srcdata[dgl.NID], r.srcdata[dgl.NID])


def test_disabled_by_environment(tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "from dgl_accel.core.jit import runtime; print(runtime.enabled())"],
                         env={**__import__("os").environ, "DGL_ACCEL_NUMBA": "0"}, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 300), m=st.integers(0, 3000), frac=st.floats(0.05, 1.0), loops=st.booleans(),
       seed=st.integers(0, 2**31))
def test_induced_subgraphs_match_numpy(n, m, frac, loops, seed):
    """Node-induced subgraphs (general CSC filter and the symmetric half-CSR path) are identical
    with and without the compiled loops: same edges in the same order, same parent ids."""
    from dgl_accel.sampling.induced import half_csr, induced_subgraph, induced_subgraph_symmetric

    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]], 1), axis=0)
    if loops:
        pairs = np.concatenate([pairs, np.stack([np.arange(0, n, 3)] * 2, 1)])
    directed = dgl.graph((torch.from_numpy(pairs[:, 0]), torch.from_numpy(pairs[:, 1])), num_nodes=n)
    sym = dgl.to_simple(dgl.add_reverse_edges(directed))
    nodes = np.flatnonzero(rng.random(n) < frac).astype(np.int64)
    for g in (directed, sym):
        outs = []
        for on in (True, False):
            with jit(on):
                outs.append(induced_subgraph(g, nodes))
                half = half_csr(g)
                if half is not None:
                    outs.append(induced_subgraph_symmetric(g, nodes, half))
        k = len(outs) // 2
        for a, b in zip(outs[:k], outs[k:]):
            assert torch.equal(torch.stack(a[0].edges()), torch.stack(b[0].edges()))
            assert np.array_equal(np.asarray(a[1]), np.asarray(b[1]))
            assert torch.equal(a[0].edata[dgl.EID], b[0].edata[dgl.EID])


@settings(max_examples=15, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=60, max_edges=400), pq=st.sampled_from([(0.5, 2.0), (1.0, 1.0), (4.0, 0.25),
                                                                                 (0.25, 4.0), (2.0, 0.5)]),
       length=st.integers(0, 6), seed=st.integers(0, 2**40), trials=st.sampled_from([1, 32]))
def test_node2vec_matches_numpy(g, pq, length, seed, trials):
    """Unweighted node2vec: the compiled step-major loop gives the numpy path's traces and edge
    ids (power-of-two p, q: the exact fallback's sums are exact, so even it agrees bit for bit;
    ``trials=1`` sends every rejected proposal to the fallback)."""
    from dgl_accel.sampling import node2vec_random_walk

    nodes = torch.arange(g.num_nodes(), dtype=g.idtype).repeat(3)
    saved = walks_node2vec.MAX_TRIALS
    walks_node2vec.MAX_TRIALS = trials
    try:
        with jit(True):
            got = node2vec_random_walk(g, nodes, *pq, length, seed=seed, return_eids=True)
        with jit(False):
            ref = node2vec_random_walk(g, nodes, *pq, length, seed=seed, return_eids=True)
    finally:
        walks_node2vec.MAX_TRIALS = saved
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    assert got[0].is_contiguous() and got[0].dtype == g.idtype


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 700), m=st.integers(0, 3000), feats=st.integers(1, 20), scaled=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31))
def test_rows_spmm_matches_dense_reference(n, m, feats, scaled, dtype, seed):
    """Every output row written (empty rows exactly 0), parallel == serial bit for bit, and equal
    to the dense product in float64 within rounding."""
    rng = np.random.default_rng(seed)
    row, col = rng.integers(0, n, m), rng.integers(0, n, m)
    order = np.argsort(row, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(row, minlength=n))
    indices = col[order].astype(np.int64)
    x = rng.standard_normal((n, feats)).astype(dtype)
    cs, rs = (rng.random(n).astype(dtype) + 0.5 for _ in range(2)) if scaled else (None, None)
    outs = []
    for parallel in (True, False):
        out = np.full((n, feats), np.nan, dtype=dtype)  # garbage: every row must be overwritten
        with mock.patch.object(runtime, "parallel_allowed", lambda p=parallel: p):
            aggregation.rows_spmm(indptr, indices, x, cs, rs, out)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])
    a = np.zeros((n, n))
    np.add.at(a, (row, col), 1.0)
    xs = x.astype(np.float64) * (1.0 if cs is None else cs[:, None])
    ref = (a @ xs) * (1.0 if rs is None else rs[:, None])
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(outs[0], ref, rtol=tol, atol=tol)
    assert np.all(outs[0][np.diff(indptr) == 0] == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_count_nonzero_rows_matches_torch(dtype):
    """The guard's compiled scan says what torch says, with -0.0 as zero and NaN, denormals and
    tiny values as nonzero, on the given rows only."""
    from dgl_accel.core.jit.aggregation import count_nonzero_rows

    rng = np.random.default_rng(0)
    x = np.zeros((500, 7), dtype=dtype)
    picks = rng.integers(0, 500, 60)
    specials = np.array([-0.0, np.nan, np.finfo(dtype).smallest_subnormal, -1e-30, 2.5], dtype=dtype)
    x[picks, rng.integers(0, 7, 60)] = specials[rng.integers(0, len(specials), 60)]
    rows = rng.permutation(500)[:300].astype(np.int64)
    t = torch.from_numpy(x)
    want = int((t[torch.from_numpy(rows)] != 0).any(1).sum())  # NaN != 0 is True; -0.0 != 0 is False
    assert count_nonzero_rows(x, rows) == want
