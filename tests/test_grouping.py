"""Tests for dgl_accel.grouping: linear model, cost model, autotuner, choice and explanation."""
import dataclasses

import dgl
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel import grouping
from dgl_accel.core.grouping import size as size_mod
from dgl_accel.graph import DegreeStats, degree_stats
from dgl_accel.grouping import (
    GroupSizeChoice,
    autotune_group_size,
    choose_group_size,
    clear_autotune_cache,
    cost_model_group_size,
    explain,
    graph_signature,
    linear_group_size,
    linear_inputs,
)
from dgl_accel.testing.strategies import blocks, graphs, power_law_graphs

FEATS = [1, 2, 3, 8, 16, 31, 64, 100, 128, 256, 1433]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def _fresh():
    clear_autotune_cache()
    yield
    clear_autotune_cache()
    grouping.set_autotune_timer(None)


def symmetric_graph(n, m, seed=0, self_loops=0):
    """Random undirected graph with m distinct non-loop pairs (+ self_loops), both directions."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < m:
        u, v = (int(x) for x in rng.integers(0, n, 2))
        if u != v:
            pairs.add((min(u, v), max(u, v)))
    u, v = np.array(sorted(pairs)).T
    loops = rng.choice(n, self_loops, replace=False)
    src = np.concatenate([u, v, loops])
    dst = np.concatenate([v, u, loops])
    perm = rng.permutation(len(src))  # edge order must not matter
    return dgl.graph((torch.as_tensor(src[perm]), torch.as_tensor(dst[perm])), num_nodes=n)


def stats_of(degrees, num_src=None):
    """DegreeStats of the graph whose dst nodes have exactly these in-degrees."""
    deg = np.asarray(degrees)
    dst = np.repeat(np.arange(len(deg)), deg)
    n_src = num_src or len(deg)
    src = np.random.default_rng(0).integers(0, n_src, len(dst))
    g = dgl.graph((torch.as_tensor(src), torch.as_tensor(dst)), num_nodes=max(len(deg), n_src))
    return degree_stats(g)


# ------------------------------------------------------------------------------ linear model
def test_linear_paper_values():
    assert linear_group_size(2708, 5278, 1.95) == 2  # Cora
    assert linear_group_size(1134890, 2987624, 2.63) == 15  # Youtube
    assert linear_group_size(2708, 5278) == 2  # avg defaults to E / V = 1.949
    assert linear_group_size(0, 0) == 1  # empty graph: nothing to group
    assert linear_group_size(10**7, 10**9) >= 1  # the negative E term is clamped


@pytest.mark.parametrize("args", [(-1, 5), (3, -2), (0, 5), (10, 5, -1.0), (10, 5, float("nan")),
                                  (0, 0, 2.0)])
def test_linear_rejects_meaningless_inputs(args):
    with pytest.raises(ValueError, match=r"expected .*\(got .*\)\. Fix: "):
        linear_group_size(*args)


def test_linear_rejects_non_integer_counts():
    with pytest.raises(TypeError, match="expected an integer num_vertices"):
        linear_group_size(2.5, 3)


def test_symmetric_graph_counts_undirected_edges():
    g = symmetric_graph(2708, 5270, self_loops=8)
    assert g.num_edges() == 2 * 5270 + 8
    v, e, avg = linear_inputs(g)
    assert (v, e) == (2708, 5278) and avg == pytest.approx(5278 / 2708)
    assert choose_group_size(g, 16, policy="linear").gs == linear_group_size(2708, 5278) == 2


def test_directed_graph_counts_directed_edges():
    g = symmetric_graph(500, 2000, seed=1)
    src, dst = g.edges()
    g = dgl.graph((src[1:], dst[1:]), num_nodes=500)  # drop one direction of one edge
    assert linear_inputs(g) == (500, 3999, 3999 / 500)
    # A multiset test: doubling one direction of an edge breaks symmetry too.
    g2 = dgl.graph((torch.cat([src, src[:1]]), torch.cat([dst, dst[:1]])), num_nodes=500)
    assert linear_inputs(g2)[1] == 4001


def test_block_uses_dst_rows_and_directed_edges():
    g = symmetric_graph(100, 300, seed=2)
    blk = dgl.to_block(g, dst_nodes=torch.arange(40))
    assert linear_inputs(blk) == (40, blk.num_edges(), blk.num_edges() / 40)


def test_symmetry_is_cached_and_invalidated():
    g = symmetric_graph(50, 100, seed=3)
    assert linear_inputs(g)[1] == 100
    g.add_edges(torch.tensor([0]), torch.tensor([1]))  # in-place mutation: now asymmetric
    assert linear_inputs(g)[1] == 201


def test_real_cora():
    from dgl_accel import data

    if data.datasets_root() is None:
        pytest.skip("shared datasets not available")
    try:
        g = data.load("cora")
    except (FileNotFoundError, ValueError) as exc:
        pytest.skip(f"cora not available: {exc}")
    assert g.num_edges() == 10556
    assert linear_inputs(g)[:2] == (2708, 5278)
    assert choose_group_size(g, 1433, policy="linear").gs == 2


# ------------------------------------------------------------------------------ cost model
def test_cost_model_splits_hubs_more_on_skewed_graphs():
    n, avg = 2000, 8
    regular = stats_of(np.full(n, avg))
    deg = np.full(n, 3)  # most rows short, five hubs carry the rest: same V, E and avg
    deg[:5] = (n * avg - 3 * (n - 5)) // 5
    skewed = stats_of(deg)
    assert skewed.num_edges == regular.num_edges and skewed.num_hubs_over_1024 == 5
    for f in FEATS:
        gs_reg, _ = cost_model_group_size(regular, f)
        gs_skew, why = cost_model_group_size(skewed, f)
        assert gs_skew <= gs_reg
        assert any("skewed" in r for r in why)
    assert cost_model_group_size(skewed, 64)[0] < cost_model_group_size(regular, 64)[0]
    # Hub rows end up in many groups: at least 16 per hub.
    gs, _ = cost_model_group_size(skewed, 64)
    assert skewed.max_degree / gs >= 16


def _stats(**kw):
    base = dict(num_nodes=1000, num_src=1000, num_edges=8000, avg_degree=8.0, max_degree=8,
                std=0.0, cv=0.0, skewness=0.0, num_zero_in_degree=0, p50=8.0, p90=8.0, p99=8.0,
                num_hubs_over_1024=0)
    base.update(kw)
    return DegreeStats(**base)


EXTREMES = [
    _stats(),
    _stats(num_nodes=10**8, num_src=10**8, num_edges=10**9, avg_degree=10.0, p99=10.0),  # formula < 0
    _stats(num_nodes=1000, num_edges=5 * 10**6, avg_degree=5000.0, max_degree=9000, p50=5000.0,
           p90=7000.0, p99=8000.0, std=1000, cv=0.2, num_hubs_over_1024=900),  # dense
    _stats(num_nodes=10**6, num_edges=10**6, avg_degree=1.0, max_degree=10**5, p50=0, p90=1, p99=3,
           std=100, cv=100, skewness=900, num_zero_in_degree=900000, num_hubs_over_1024=3),
    _stats(num_nodes=10**7, num_edges=10**8, avg_degree=10.0, max_degree=10, p99=10.0,
           num_src=10**7),
    _stats(num_edges=0, avg_degree=0.0, max_degree=0, p50=0, p90=0, p99=0),
]


@pytest.mark.parametrize("stats", EXTREMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cost_model_bounded_power_of_two_and_monotone_in_width(stats, dtype):
    prev = None
    for f in FEATS:
        gs, reasons = cost_model_group_size(stats, f, dtype)
        assert 1 <= gs <= 64 and gs & (gs - 1) == 0 and reasons
        assert prev is None or gs <= prev, (f, gs, prev)
        prev = gs
    assert cost_model_group_size(stats, 64, dtype) == cost_model_group_size(stats, 64, dtype)


def test_cost_model_working_set_binds_for_fp64_wide_features():
    dense = EXTREMES[2]
    assert cost_model_group_size(dense, 256, torch.float32)[0] == 64
    assert cost_model_group_size(dense, 256, torch.float64)[0] == 32


def test_cost_model_narrow_features_get_longer_groups():
    s = stats_of(np.full(500, 16))
    assert cost_model_group_size(s, 1)[0] == 16  # floor 256/1, capped by the row length
    assert cost_model_group_size(s, 512)[0] < 16


@pytest.mark.parametrize("bad", [0, -3])
def test_cost_model_rejects_bad_feat_dim(bad):
    with pytest.raises(ValueError, match=r"expected feat_dim >= 1 \(got"):
        cost_model_group_size(_stats(), bad)


# ------------------------------------------------------------------------------ property tests
def _check_choice(g, f):
    for policy in ("auto", "linear", "cost"):
        c = choose_group_size(g, f, policy=policy)
        assert c.gs >= 1 and c.linear_gs >= 1 and 1 <= c.cost_gs <= 64
        assert c.gs == {"linear": c.linear_gs}.get(policy, c.cost_gs)


@given(graphs(), st.integers(1, 300))
def test_gs_at_least_one_graphs(g, f):
    _check_choice(g, f)


@settings(max_examples=10)
@given(power_law_graphs(), st.integers(1, 300))
def test_gs_at_least_one_power_law(g, f):
    _check_choice(g, f)
    assert choose_group_size(g, f).reasons[1].startswith("row cap: skewed")


@given(blocks(), st.integers(1, 300))
def test_gs_at_least_one_blocks(g, f):
    _check_choice(g, f)
    assert linear_inputs(g)[:2] == (g.num_dst_nodes(), g.num_edges())


# ------------------------------------------------------------------------------ autotune
def test_autotune_picks_argmin_and_caches():
    calls = []

    def time_fn(gs):
        calls.append(gs)
        return abs(gs - 8) + 1.0

    key = ("sig", 64, torch.float32, "cuda:0")
    assert autotune_group_size(key, [1, 2, 4, 8, 16, 32], time_fn, repeats=3) == 8
    assert len(calls) == 6 * 3
    assert autotune_group_size(key, [1, 2, 4, 8, 16, 32], time_fn) == 8
    assert len(calls) == 18  # cached: not timed again
    # Different feat_dim / dtype are different keys.
    autotune_group_size(("sig", 128, torch.float32, "cuda:0"), [4, 8], time_fn, repeats=1)
    autotune_group_size(("sig", 64, torch.float16, "cuda:0"), [4, 8], time_fn, repeats=1)
    assert len(calls) == 22
    clear_autotune_cache()
    autotune_group_size(key, [8], time_fn, repeats=1)
    assert len(calls) == 23


def test_autotune_median_ignores_one_outlier_and_ties_go_small():
    times = {2: iter([100.0, 1.0, 1.0]), 4: iter([2.0, 2.0, 2.0])}  # gs=2's first call compiles
    assert autotune_group_size("k", [4, 2], lambda gs: next(times[gs])) == 2
    assert autotune_group_size("tie", [16, 4, 8], lambda gs: 1.0, repeats=1) == 4


@pytest.mark.parametrize("cands, repeats", [([], 3), ([0, 2], 3), ([2], 0)])
def test_autotune_rejects_bad_arguments(cands, repeats):
    with pytest.raises(ValueError, match=r"expected .*\(got "):
        autotune_group_size("bad", cands, lambda gs: 1.0, repeats=repeats)


def test_graph_signature_ignores_labels_but_not_degrees():
    g = symmetric_graph(60, 150, seed=4)
    perm = torch.randperm(60, generator=torch.Generator().manual_seed(0))
    src, dst = g.edges()
    relabelled = dgl.graph((perm[src], perm[dst]), num_nodes=60)
    assert graph_signature(g) == graph_signature(relabelled)
    sig = graph_signature(g)
    assert sig[:4] == (60, 60, 300, g.idtype)
    other = dgl.graph((torch.cat([src[:-1], src[:1]]), torch.cat([dst[:-1], dst[:1]])), num_nodes=60)
    assert graph_signature(other) != sig
    assert graph_signature(dgl.graph(([], []), num_nodes=0))[:3] == (0, 0, 0)


def test_auto_policy_autotunes_on_cuda_only(monkeypatch):
    g = symmetric_graph(200, 800, seed=5)
    calls = []

    def timer(graph, feat_dim, dtype, gs):
        calls.append((feat_dim, dtype, gs))
        return 1.0 / gs  # larger is faster here: picks the largest candidate

    grouping.set_autotune_timer(timer)
    cpu = choose_group_size(g, 32)
    assert cpu.tuned_gs is None and cpu.gs == cpu.cost_gs and not calls  # CPU: cost model
    c = choose_group_size(g, 32, device="cuda")  # only the device type is consulted
    assert c.tuned_gs == c.gs == max(size_mod._tune_candidates(c.cost_gs, c.linear_gs))
    assert calls and {(f, d) for f, d, _ in calls} == {(32, torch.float32)}
    n = len(calls)
    assert choose_group_size(g, 32, device="cuda").gs == c.gs and len(calls) == n  # cached
    choose_group_size(g, 64, device="cuda")
    assert len(calls) > n  # new feat_dim: new key
    assert "autotune: fastest measured gs" in str(c)
    assert choose_group_size(g, 32, device="cuda", policy="cost").tuned_gs is None


def test_sampled_blocks_are_never_timed():
    """A sampler makes a new block every minibatch: timing each one would re-tune every step."""
    from dgl_accel.core.grouping import autotune
    g = symmetric_graph(300, 1500, seed=8)
    calls = []
    grouping.set_autotune_timer(lambda graph, f, dtype, gs: calls.append(gs) or 1.0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):  # five minibatches of a one-layer neighbour sampler
        seeds = torch.randperm(300, generator=gen)[:40]
        block = dgl.to_block(dgl.sampling.sample_neighbors(g, seeds, 5), seeds)
        c = choose_group_size(block, 32, device="cuda")
        assert c.tuned_gs is None and c.gs == c.cost_gs and "not timed" in c.source
    assert not calls and not autotune.autotune_cache()
    assert choose_group_size(g, 32, device="cuda").tuned_gs is not None and calls  # a whole graph is timed once


def test_autotune_cache_keeps_the_most_recently_used_winners(monkeypatch):
    from dgl_accel.core.grouping import autotune
    monkeypatch.setattr(autotune, "AUTOTUNE_CACHE_MAX", 3)
    timed = []

    def tune(key):
        return autotune_group_size(key, [1, 2], lambda gs: timed.append(key) or float(gs), repeats=1)

    for key in ("a", "b", "c"):
        tune(key)
    tune("a")  # a hit: "a" becomes the most recent
    tune("d")  # evicts "b", the least recently used
    assert list(autotune.autotune_cache()) == ["c", "a", "d"]
    n = len(timed)
    tune("b")
    assert len(timed) > n and len(autotune.autotune_cache()) == 3  # "b" was timed again, "c" left


# ------------------------------------------------------------------------------ policies / explain
def test_forced_policy():
    g = symmetric_graph(100, 300, seed=6)
    c = choose_group_size(g, 16, policy=24)
    assert (c.gs, c.policy) == (24, "forced")


@pytest.mark.parametrize("policy, exc", [(0, ValueError), (-2, ValueError), ("fast", ValueError),
                                         (True, TypeError), (2.0, TypeError)])
def test_bad_policies(policy, exc):
    g = symmetric_graph(30, 40, seed=7)
    with pytest.raises(exc, match=r"expected .*\(got .*\)"):
        choose_group_size(g, 16, policy=policy)


def test_set_autotune_timer_rejects_non_callables():
    with pytest.raises(TypeError, match="expected a callable or None"):
        grouping.set_autotune_timer(3)


def test_explain_mentions_formula_numbers_and_choice():
    g = symmetric_graph(2708, 5270, self_loops=8)
    c = explain(g, 1433)
    assert isinstance(c, GroupSizeChoice) and dataclasses.is_dataclass(c)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.gs = 3
    text = str(c)
    for piece in ("0.65538", "1.67431e-05*2708", "2.24342e-06*5278", "0.63641*1.949",
                  f"gs = {c.gs}", "undirected", "row cap", "amortisation", "p90"):
        assert piece in text, piece
    assert c == choose_group_size(g, 1433)
    assert len(text.splitlines()) >= 5


def test_heterograph_rejected():
    g = dgl.heterograph({("a", "r", "b"): ([0], [1]), ("b", "s", "a"): ([0], [0])})
    with pytest.raises(ValueError, match="expected a homogeneous graph"):
        choose_group_size(g, 8)
