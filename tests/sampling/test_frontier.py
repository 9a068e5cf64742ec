"""GraphSAINT frontier sampler (family saint_frontier: dgl_accel/core/sampling/saint_frontier*.py,
kernels/saint_frontier.py, adapter dgl_accel/sampling/frontier.py):
distribution vs the sequential algorithm, the dashboard's pop law, validity of samples, degree
clip, determinism, the interpreted Triton kernel against the CPU path, and bad input.

Statistical tests use fixed seeds and alpha = 1e-3 each: a correct sampler fails one of them
for a random seed with probability 1e-3 (with these seeds the outcome is deterministic)."""
import dgl
import numpy as np
import pytest
import torch
from scipy import stats

import dgl_accel
from dgl_accel.core.sampling.saint import frontier as fr
from dgl_accel.core.sampling.saint import frontier_cpu as fr_cpu
from dgl_accel.core.sampling.saint import launchers as fr_triton
from dgl_accel.core.sampling.saint.frontier_cpu import probe_dashboard
from dgl_accel.kernels import saint_frontier as kfrontier
from dgl_accel.sampling.frontier import frontier_sample, frontier_sample_sequential
from dgl_accel.testing.cpu_loops import both_frontier_loops

ALPHA = 1e-3


def _undirected(edges, n):
    s, d = torch.tensor(edges).T
    return dgl.graph((torch.cat([s, d]), torch.cat([d, s])), num_nodes=n)


def _lollipop():
    # K5 (degrees 4-5) with a 3-vertex tail (degrees 2, 2, 1): with two walkers, the one in the
    # clique moves more often under degree-proportional pops than under uniform pops
    clique = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    return _undirected(clique + [(4, 5), (5, 6), (6, 7)], 8)


def _random_graph(n=30, e=70, seed=0):
    gen = torch.Generator().manual_seed(seed)
    s, d = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    ring = torch.arange(n)
    s, d = torch.cat([s, ring]), torch.cat([d, (ring + 1) % n])  # connected
    return dgl.graph((torch.cat([s, d]), torch.cat([d, s])), num_nodes=n)


def _set_counts(samples):
    keys = [tuple(x.tolist()) for x in samples]
    return {k: keys.count(k) for k in set(keys)}


def _homogeneity_p(a, b):
    ca, cb = _set_counts(a), _set_counts(b)
    cats = sorted(set(ca) | set(cb))
    table = np.array([[ca.get(k, 0) for k in cats], [cb.get(k, 0) for k in cats]])
    return stats.chi2_contingency(table)[1]


# ----------------------------------------------------------------------- distribution
@pytest.mark.parametrize("clip", [None, 2])
def test_subgraph_distribution_matches_sequential(clip):
    # The sampled node set (a 5-subset of 8 nodes) has the same law as the sequential
    # algorithm's: chi-square homogeneity test, 4000 subgraphs each.
    g = _lollipop()
    fast = frontier_sample(g, 2, 5, num_instances=4000, seed=11, degree_clip=clip, eta=1.5)
    ref = frontier_sample_sequential(g, 2, 5, num_instances=4000, seed=12, degree_clip=clip)
    assert _homogeneity_p(fast, ref) > ALPHA


def test_distribution_test_has_power():
    # Uniform pops (clip 1) versus degree-proportional pops must be told apart by the same test,
    # so the test above can fail.
    g = _lollipop()
    fast = frontier_sample(g, 2, 5, num_instances=4000, seed=11)
    uniform = frontier_sample_sequential(g, 2, 5, num_instances=4000, seed=12, degree_clip=1)
    assert _homogeneity_p(fast, uniform) < ALPHA


def test_node_inclusion_matches_sequential_on_random_graph():
    # Per-node inclusion frequencies on a 30-node graph (m=3, n=10): a two-proportion z-test
    # per node, Bonferroni over the 30 nodes (family-wise alpha 1e-3).
    g = _random_graph()
    fast = frontier_sample(g, 3, 10, num_instances=3000, seed=5, eta=1.2)
    ref = frontier_sample_sequential(g, 3, 10, num_instances=3000, seed=6)
    inc = lambda smp: np.bincount(torch.cat(smp).numpy(), minlength=30) / len(smp)  # noqa: E731
    pa, pb = inc(fast), inc(ref)
    pool = (pa + pb) / 2
    z = (pa - pb) / np.sqrt(np.maximum(pool * (1 - pool), 1e-12) * 2 / 3000)
    assert np.abs(z).max() < stats.norm.isf(ALPHA / 30 / 2)


# ------------------------------------------------------------------------ dashboard pop
# ------------------------------------------------------------------------------ validity
def _check_valid(g, samples, m, n):
    src, dst = g.edges()
    for x in samples:
        assert x.dtype == g.idtype
        assert torch.equal(x, torch.unique(x))  # sorted, unique
        assert x.numel() <= n
        inside = torch.zeros(g.num_nodes(), dtype=torch.bool)
        inside[x.long()] = True
        # every non-root vertex was reached over an edge from a sampled vertex: at most m have
        # no in-edge from inside the sample
        reached = torch.zeros(g.num_nodes(), dtype=torch.bool)
        reached[dst[inside[src]].long()] = True
        assert int((inside & ~reached).sum()) <= m


def test_samples_valid_and_full_size():
    g = _random_graph(60, 120, seed=2)
    out = frontier_sample(g, 5, 25, num_instances=50, seed=0)
    assert len(out) == 50 and all(x.numel() == 25 for x in out)
    _check_valid(g, out, 5, 25)
    _check_valid(g, frontier_sample_sequential(g, 5, 25, num_instances=20, seed=0), 5, 25)
    g32 = g.int()  # int32 ids: same samples, int32 output
    out32 = frontier_sample(g32, 5, 25, num_instances=50, seed=0)
    assert all(x.dtype == torch.int32 and torch.equal(x.long(), y.long()) for x, y in zip(out32, out))


def test_small_component_and_dead_ends_stop():
    # Component {0,1,2} (triangle) and a 30-cycle; m=1, n=10: a root in the triangle can reach
    # only 3 nodes, and the walk stops after max_steps instead of looping.
    tri = [(0, 1), (1, 2), (2, 0)] + [(3 + i, 3 + (i + 1) % 30) for i in range(30)]
    g = _undirected(tri, 33)
    for x in frontier_sample(g, 1, 10, num_instances=40, seed=1):
        assert x.numel() == (3 if int(x[0]) < 3 else 10)
    # Directed path 0 -> 1 -> 2: the frontier dies at the sink 2; from root r the sample is {r..2}.
    p = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])), num_nodes=3)
    for x in frontier_sample(p, 1, 3, num_instances=20, seed=2):
        assert x.tolist() == list(range(int(x[0]), 3))
    assert [x.numel() for x in frontier_sample(p, 1, 3, num_instances=5, seed=2, max_steps=0)] == [1] * 5


def test_paper_step_count_convention():
    # max_steps = n - m (the paper's loop count): at most n distinct vertices, at least m + 1.
    g = _random_graph()
    for x in frontier_sample(g, 4, 12, num_instances=30, seed=3, max_steps=8):
        assert 5 <= x.numel() <= 12


# --------------------------------------------------------------------------- degree clip
def test_degree_clip_at_or_above_max_degree_changes_nothing():
    g = _random_graph()
    dmax = int(g.out_degrees().max())
    a = frontier_sample(g, 3, 12, num_instances=20, seed=9)
    b = frontier_sample(g, 3, 12, num_instances=20, seed=9, degree_clip=dmax)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = frontier_sample(g, 3, 12, num_instances=20, seed=9, degree_clip=1)
    assert any(not torch.equal(x, y) for x, y in zip(a, c))


def test_degree_clip_one_pops_uniformly():
    # With clip 1 every frontier slot owns one pin: pops are uniform over slots.
    R = 6000
    row = np.arange(3, dtype=np.int64)  # clip 1: hub and leaves alike own one pin each
    hit = probe_dashboard(np.tile(row, (R, 1)), np.full(R, 3), np.zeros((R, 3), np.int64), np.arange(R),
                          np.arange(R), step=5, seed=1)
    assert stats.chisquare(np.bincount(hit, minlength=3))[1] > ALPHA


# ---------------------------------------------------------------------------- determinism
def test_same_seed_same_output_and_instance_independence():
    g = _random_graph()
    a = frontier_sample(g, 3, 12, num_instances=6, seed=21)
    b = frontier_sample(g, 3, 12, num_instances=6, seed=21)
    c = frontier_sample(g, 3, 12, num_instances=2, seed=21)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert all(torch.equal(x, y) for x, y in zip(a[:2], c))  # instance i does not depend on I
    d = frontier_sample(g, 3, 12, num_instances=6, seed=22)
    assert any(not torch.equal(x, y) for x, y in zip(a, d))
    e = frontier_sample_sequential(g, 3, 12, num_instances=3, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(e, frontier_sample_sequential(g, 3, 12, num_instances=3, seed=4)))


# ------------------------------------------------- scalar loop, vectorised loop, Triton


@pytest.mark.interpreter
@pytest.mark.parametrize("kw", [dict(), dict(eta=1.05, degree_clip=3), dict(eta=1.3, max_steps=9)])
def test_triton_kernel_matches_cpu_path(monkeypatch, kw):
    # The kernel probes the same positions in the same order and takes the same Philox words as
    # both CPU loops: identical samples.  eta 1.05 forces frequent cleanups and capacity doubling.
    g = _random_graph(24, 40, seed=4)
    cpu = both_frontier_loops(frontier_sample, monkeypatch, g, 3, 10, num_instances=3, seed=7, **kw)
    with dgl_accel.use_backend("triton"):
        tri = frontier_sample(g, 3, 10, num_instances=3, seed=7, **kw)
    assert dgl_accel.stats()["frontier_sample"] == {"native-cpu": 2, "triton-interpreter": 1}
    assert all(torch.equal(x, y) for x, y in zip(cpu, tri))


def test_cpu_loops_agree_on_larger_graph(monkeypatch):
    # Many cleanups and capacity doublings (eta 1.1) over a few hundred steps; the vectorised
    # loop runs in chunks of 2 instances.
    monkeypatch.setattr(fr, "_VEC_CHUNK", 2)
    g = _random_graph(300, 900, seed=3)
    out = both_frontier_loops(frontier_sample, monkeypatch, g, 20, 150, num_instances=5, seed=2, eta=1.1)
    assert all(x.numel() == 150 for x in out)


@pytest.mark.interpreter  # 40 nodes: about 2.5 s on 2 cores with the interpreter, a quick test still
def test_triton_exact_fallback_and_scratch_rerun_match_cpu(monkeypatch):
    # 8 probes (one round of 8 lanes) before the exact fallback and eta 4: fallbacks happen;
    # scratch of cap0 only forces the kernel's overflow-and-rerun path.
    monkeypatch.setattr(fr_cpu, "_PROBES_MAX", 8)
    monkeypatch.setattr(fr_cpu, "_PROBE_CHUNK", 8)
    monkeypatch.setattr(kfrontier, "PROBES_MAX", 8)
    monkeypatch.setattr(kfrontier, "block_for", lambda cuda: 8)
    monkeypatch.setattr(fr_triton, "_phys_cap", lambda cap0, *a: cap0)
    misses, grows = [], []
    probe, grow = fr_cpu._probe, fr_cpu._grow
    monkeypatch.setattr(fr_cpu, "_probe", lambda *a: misses.append(int((probe(*a) < 0).sum())) or probe(*a))
    monkeypatch.setattr(fr_cpu, "_grow", lambda *a: grows.append(1) or grow(*a))
    g = _random_graph(40, 60, seed=6)
    cpu = both_frontier_loops(frontier_sample, monkeypatch, g, 2, 30, num_instances=2, seed=8, eta=4.0)
    assert sum(misses) > 0 and len(grows) > 2  # fallback and cleanups exercised
    with dgl_accel.use_backend("triton"):
        tri = frontier_sample(g, 2, 30, num_instances=2, seed=8, eta=4.0)
    assert all(torch.equal(x, y) for x, y in zip(cpu, tri))


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("args, kw, match", [
    ((0, 5), {}, "num_roots"),
    ((5, 3), {}, "budget"),
    ((2, 31), {}, "budget"),
    ((2, 5), {"eta": 1.0}, "eta"),
    ((2, 5), {"eta": float("nan")}, "eta"),
    ((2, 5), {"degree_clip": 0}, "degree_clip"),
    ((2, 5), {"num_instances": 0}, "num_instances"),
    ((2.5, 5), {}, "num_roots"),
    ((2, 5), {"seed": -1}, "seed"),
])
def test_bad_input(args, kw, match):
    g = _random_graph()
    with pytest.raises(ValueError, match=f"expected {match}.*Fix:"):
        frontier_sample(g, *args, **kw)
    if "eta" not in kw:
        with pytest.raises(ValueError, match=f"expected {match}.*Fix:"):
            frontier_sample_sequential(g, *args, **kw)


def test_graph_without_edges_and_heterograph():
    with pytest.raises(ValueError, match="at least one edge.*Fix:"):
        frontier_sample(dgl.graph(([], []), num_nodes=5), 1, 2)
    with pytest.raises(ValueError, match="at least one edge"):
        frontier_sample_sequential(dgl.graph(([], []), num_nodes=5), 1, 2)
    hg = dgl.heterograph({("a", "r", "b"): ([0], [1])})
    with pytest.raises(ValueError, match="homogeneous"):
        frontier_sample(hg, 1, 1)
