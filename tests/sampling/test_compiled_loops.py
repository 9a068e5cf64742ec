"""The compiled CPU loops (numba, ``dgl_accel.core.jit``) reproduce the numpy path bit for bit on DGL
graphs: induced subgraphs, node2vec walks, and NeighborSampler blocks with and without them.  (The
DGL-free ones, neighbour choice, relabelling, ``rows_spmm`` and the row scan: tests/core/jit/test_cpu_jit.py.)"""

import os
import subprocess
import sys

import dgl
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.walks import node2vec as walks_node2vec
from dgl_accel.sampling import NeighborSampler
from dgl_accel.testing.cpu_loops import forced_jit
from dgl_accel.testing.strategies import graphs

pytestmark = pytest.mark.skipif(not runtime.enabled(), reason="numba not installed (the numpy path runs)")


@settings(max_examples=15, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=80, max_edges=600), replace=st.booleans(), seed=st.integers(0, 2**32))
def test_sampler_blocks_identical_with_and_without_jit(g, replace, seed):
    seeds = torch.arange(0, g.num_nodes(), 2, dtype=g.idtype)
    with forced_jit(True):
        got = NeighborSampler([4, 3], replace=replace, seed=seed).sample_blocks(g, seeds)
    with forced_jit(False):
        ref = NeighborSampler([4, 3], replace=replace, seed=seed).sample_blocks(g, seeds)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    for b, r in zip(got[2], ref[2]):
        assert b.num_src_nodes() == r.num_src_nodes() and b.num_dst_nodes() == r.num_dst_nodes()
        for x, y in zip(b.edges(order="eid"), r.edges(order="eid")):
            assert torch.equal(x, y)
        assert torch.equal(b.edata[dgl.EID], r.edata[dgl.EID])
        assert torch.equal(b.srcdata[dgl.NID], r.srcdata[dgl.NID])


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
            with forced_jit(on):
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
        with forced_jit(True):
            got = node2vec_random_walk(g, nodes, *pq, length, seed=seed, return_eids=True)
        with forced_jit(False):
            ref = node2vec_random_walk(g, nodes, *pq, length, seed=seed, return_eids=True)
    finally:
        walks_node2vec.MAX_TRIALS = saved
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    assert got[0].is_contiguous() and got[0].dtype == g.idtype


@pytest.mark.threads(2)  # the parallel twin splits work over numba's threads only with several
@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
def test_node2vec_parallel_walks_equal_the_serial_twin(monkeypatch):
    """The walks of a step run in parallel; the serial twin (DataLoader workers) must give the same
    walks: every walk draws from its own counters and writes its own slots, whatever the order.
    Enough walks, a hub and second-order steps that the two threads interleave."""
    from dgl_accel.sampling import node2vec_random_walk

    src = torch.randint(3000, (60000,), generator=torch.Generator().manual_seed(1))
    dst = torch.randint(3000, (60000,), generator=torch.Generator().manual_seed(2))
    g = dgl.to_simple(dgl.graph((torch.cat([src, torch.zeros(500, dtype=torch.int64)]),
                                 torch.cat([dst, torch.arange(1, 501)])), num_nodes=3000))
    from dgl_accel.core.jit import walks as jit_walks

    calls = []
    for name in ("_node2vec_parallel", "_node2vec_serial"):  # which twin ran (pick reads the names per call)
        twin = getattr(jit_walks, name)
        monkeypatch.setattr(jit_walks, name, lambda *a, twin=twin, name=name: (calls.append(name), twin(*a))[1])
    nodes = torch.arange(3000).repeat(4)
    with forced_jit(True):
        par = node2vec_random_walk(g, nodes, 0.5, 2.0, 20, seed=3, return_eids=True)
        monkeypatch.setenv("DGL_ACCEL_NUMBA_PARALLEL", "0")
        assert not runtime.parallel_allowed()
        ser = node2vec_random_walk(g, nodes, 0.5, 2.0, 20, seed=3, return_eids=True)
    assert calls[0] == "_node2vec_parallel" and calls[-1] == "_node2vec_serial", calls
    assert torch.equal(par[0], ser[0]) and torch.equal(par[1], ser[1])
    assert (par[0][:, 1:] >= 0).float().mean() > 0.9  # the walks go on (second-order steps happen)


def test_parallel_loops_follow_torch_threads_and_leave_them_alone():
    # A fresh process (about 2 s on 2 cores: a quick test still): numba's pool starts once.  Starting it
    # used to set every OpenMP runtime to all cores, so a user's torch.set_num_threads(1) became 2 after
    # the first dgl-accel layer.
    code = """
import numpy as np, torch
torch.set_num_threads(1)
import numba
from dgl_accel.core.jit import edge_softmax as loops
rows = np.repeat(np.arange(4000), 10).astype(np.int64)
loops.edge_softmax_forward(rows, np.random.rand(40000, 2).astype(np.float32), 4000)
print(torch.get_num_threads(), numba.get_num_threads())
torch.set_num_threads(2)
loops.edge_softmax_forward(rows, np.random.rand(40000, 2).astype(np.float32), 4000)
print(torch.get_num_threads(), numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "DGL_ACCEL_NUMBA_PARALLEL": "1"}).stdout.split("\n")
    assert out[0] == "1 1", out
    torch_threads, numba_threads, pool = (int(v) for v in out[1].split())
    assert torch_threads == 2 and numba_threads == min(2, pool), out
