"""GraphACT redundancy reduction (dgl_accel.policies.redundancy): exactness, gamma counts, matching
invariants, the gspmm hook, the cost model and input errors.

References are built from first principles here: dense adjacency products for the aggregations,
per-target multisets of original sources for the rewrite, and plain Python counting for pairs.
"""
from collections import Counter
from itertools import combinations

import dgl
import dgl.function as fn
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.functional import gspmm
from dgl_accel.policies import redundancy as R
from dgl_accel.testing.strategies import graphs
from dgl_accel.testing.tolerances import assert_close

NORMS = (None, "both", "left", "right")


def dense_graph(seed, n=40, n_src_active=12, m=500):
    """Many targets drawing from few sources: lots of shared pairs (and multi-edges, self-loops)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n_src_active, m)
    dst = rng.integers(0, n, m)
    return dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)


def reference(g, x, reduce, norm):
    """D_dst A D_src x with A[v, u] = number of u->v edges; degrees clamped to >= 1."""
    src, dst = g.edges()
    a = torch.zeros(g.num_dst_nodes(), g.num_src_nodes(), dtype=x.dtype)
    a.index_put_((dst.long(), src.long()), torch.ones(src.numel(), dtype=x.dtype), accumulate=True)
    indeg, outdeg = a.sum(1).clamp(min=1), a.sum(0).clamp(min=1)
    s = {None: 1.0, "both": outdeg.pow(-0.5), "left": 1 / outdeg, "right": 1.0}[norm]
    d = {None: torch.ones_like(indeg), "both": indeg.pow(-0.5), "left": torch.ones_like(indeg),
         "right": 1 / indeg}[norm]
    if reduce == "mean":
        d = d / indeg
    xs = x * (s[:, None] if isinstance(s, torch.Tensor) else s)
    return d[:, None] * (a @ xs)


def check_exact(g, plan, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_src_nodes(), 3, generator=gen, dtype=torch.float64, requires_grad=True)
    for reduce in ("sum", "mean"):
        for norm in NORMS:
            out = plan.aggregate(x, reduce=reduce, norm=norm)
            ref = reference(g, x, reduce, norm)
            assert_close(out, ref)
            w = torch.randn(out.shape, generator=gen, dtype=torch.float64)
            (g1,) = torch.autograd.grad((out * w).sum(), x)
            (g2,) = torch.autograd.grad((ref * w).sum(), x)
            assert_close(g1, g2)
    # DGL itself, unpatched, as a second reference for the plain sum
    assert_close(plan.aggregate(x.detach()), dgl.ops.copy_u_sum(g, x.detach()))


def expansions(plan):
    """Multiset of original sources behind every extended source id."""
    exp = [Counter({u: 1}) for u in range(plan.num_src)]
    for a, b in zip(plan.pair_a.tolist(), plan.pair_b.tolist()):
        exp.append(exp[a] + exp[b])
    return exp


def check_structure(g, plan):
    """Each target's rewritten in-edges expand to exactly its original in-neighbour multiset;
    gammas match reads/additions counted here."""
    exp = expansions(plan)
    src, dst = g.edges()
    orig = [Counter() for _ in range(g.num_dst_nodes())]
    for u, v in zip(src.tolist(), dst.tolist()):
        orig[v][u] += 1
    new = [Counter() for _ in range(g.num_dst_nodes())]
    rdeg = [0] * g.num_dst_nodes()
    rs, rd = plan.rewritten.edges_by_id()
    for u, v in zip(rs.tolist(), rd.tolist()):
        new[v] += exp[u]
        rdeg[v] += 1
    assert new == orig
    # Counting by hand: one read per edge or pre-add operand, d - 1 additions per non-empty target.
    reads0 = sum(sum(c.values()) for c in orig)
    adds0 = sum(max(sum(c.values()) - 1, 0) for c in orig)
    p = len(plan.pair_a)
    reads1 = 2 * p + sum(rdeg)
    adds1 = p + sum(max(d - 1, 0) for d in rdeg)
    assert plan.gamma_read == pytest.approx(reads0 / reads1 if reads1 else 1.0)
    assert plan.gamma_add == pytest.approx(adds0 / adds1 if adds1 else 1.0)


def replay_rounds(g, plan, budget_binding=False, maximal=True):
    """Re-run every round on Python multisets: check the matching invariants and the counts."""
    src, dst = g.edges()
    nbrs = [Counter() for _ in range(g.num_dst_nodes())]
    for u, v in zip(src.tolist(), dst.tolist()):
        nbrs[v][u] += 1
    pa, pb, pc = plan.pair_a.tolist(), plan.pair_b.tolist(), plan.pair_count.tolist()
    next_id = plan.num_src
    for r, (lo, hi) in enumerate(zip(plan.round_bounds[:-1], plan.round_bounds[1:])):
        counts = Counter()
        for c in nbrs:
            for pair in combinations(sorted(c), 2):
                counts[pair] += 1
        used = set()
        chosen = {}
        for i in range(lo, hi):
            a, b = pa[i], pb[i]
            assert a < b < next_id
            assert a not in used and b not in used  # at most one pair per vertex per round
            used |= {a, b}
            assert pc[i] == counts[(a, b)] >= plan.theta
            chosen[(a, b)] = i
        # Greedy: a pair left out (count >= theta) has an endpoint taken by a pair ranked before it.
        rank = {pair: (-counts[pair], pair) for pair in counts}
        owner = {}
        for (a, b) in chosen:
            owner[a] = owner[b] = rank[(a, b)]
        for pair, c in counts.items():
            if c < plan.theta or pair in chosen:
                continue
            blockers = [owner[x] for x in pair if x in owner]
            if not maximal or (budget_binding and r == len(plan.round_bounds) - 2):
                continue  # the budget may stop the last round before this pair
            assert blockers and min(blockers) < rank[pair], (pair, c)
        # apply the rewrite
        for (a, b), i in chosen.items():
            for c in nbrs:
                if c[a] and c[b]:
                    c[a] -= 1
                    c[b] -= 1
                    c[next_id + (i - lo)] += 1
                    c += Counter()  # drop zero counts
        nbrs = [c + Counter() for c in nbrs]
        next_id += hi - lo


@settings(max_examples=25, deadline=None)
@given(graphs(max_nodes=30, max_edges=120))
def test_exact_on_strategy_graphs(g):
    plan = R.reduce_redundancy(g, theta=2, rounds=3)
    check_exact(g, plan)
    check_structure(g, plan)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 4), st.sampled_from([None, 1, 5, 40]))
def test_dense_shared_pairs(seed, theta, budget):
    g = dense_graph(seed)
    plan = R.reduce_redundancy(g, theta=theta, max_pair_nodes=budget, rounds=3)
    if budget is not None:
        assert plan.num_pair_nodes <= budget
    if budget != 0:
        assert plan.num_pair_nodes > 0 and plan.gamma_add > 1.0  # 40 targets on 12 sources share pairs
    check_exact(g, plan, seed)
    check_structure(g, plan)
    replay_rounds(g, plan, budget_binding=budget is not None and plan.num_pair_nodes == budget)


def test_rounds_pair_pair_nodes_and_budget_prefix():
    g = dense_graph(7, n=60, n_src_active=10, m=900)
    full = R.reduce_redundancy(g, rounds=3)
    assert len(full.rounds) >= 2 and full.pair_a.max() >= g.num_nodes()  # later rounds reuse pair nodes
    k = full.round_bounds[1] - 1  # the budget truncates greedy: its k heaviest picks
    cut = R.reduce_redundancy(g, rounds=3, max_pair_nodes=k)
    assert cut.num_pair_nodes == k
    assert torch.equal(cut.pair_a, full.pair_a[:k]) and torch.equal(cut.pair_b, full.pair_b[:k])
    none = R.reduce_redundancy(g, rounds=0)
    assert none.num_pair_nodes == 0 and none.gamma_read == 1.0 and none.gamma_add == 1.0
    check_exact(g, none)


def test_block_and_restricted_candidates():
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 15, 400), rng.integers(0, 25, 400)
    blk = dgl.create_block((torch.from_numpy(src), torch.from_numpy(dst)), num_src_nodes=20, num_dst_nodes=25)
    plan = R.reduce_redundancy(blk)
    assert plan.num_pair_nodes > 0
    check_exact(blk, plan)
    check_structure(blk, plan)
    # A tiny work budget restricts the count to the highest-degree sources; the result stays exact.
    small = R.reduce_redundancy(blk, work_budget=50)
    assert small.rounds[0].restricted and small.rounds[0].candidate_sources < 15
    check_exact(blk, small)
    check_structure(blk, small)
    replay_rounds(blk, small, maximal=False)  # counts and disjointness hold; maximality needs all sources


def test_greedy_match_matches_sequential_greedy():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = 30
        pairs = {tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(80)}
        u = np.array([p[0] for p in pairs])
        w = np.array([p[1] for p in pairs])
        c = rng.integers(2, 6, u.size)
        got = R.greedy_match(u, w, c, n)
        order = sorted(range(u.size), key=lambda i: (-c[i], u[i], w[i]))
        used, want = set(), []
        for i in order:
            if u[i] not in used and w[i] not in used:
                used |= {u[i], w[i]}
                want.append(i)
        assert got.tolist() == want
        assert R.greedy_match(u, w, c, n, limit=3).tolist() == want[:3]


def test_hook_routes_only_when_attached_and_enabled():
    g = dense_graph(1)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    want = gspmm(g, "copy_u", "mean", x, norm="both")
    plan = R.reduce_redundancy(g)
    before = R.route_count()
    with R.use_redundancy(True, auto_build=False):
        assert_close(gspmm(g, "copy_u", "mean", x, norm="both"), want)
    assert R.route_count() == before  # nothing attached, nothing built
    R.attach(g, plan)
    try:
        dgl_accel.reset_stats()
        with R.use_redundancy(False):
            gspmm(g, "copy_u", "sum", x)
        assert R.route_count() == before and "redundancy_plan" not in dgl_accel.stats()
        with R.use_redundancy(True):
            assert_close(gspmm(g, "copy_u", "mean", x, norm="both"), want)
            with dgl_accel.enabled():  # DGL's own entry points reach the hook too
                assert_close(dgl.ops.copy_u_sum(g, x), reference(g, x, "sum", None))
                h = g.local_var()  # a new graph object over the same structure: found by structure id
                h.srcdata["h"] = x
                h.update_all(fn.copy_u("h", "m"), fn.sum("m", "o"))
                assert_close(h.dstdata["o"], reference(g, x, "sum", None))
            gspmm(g, "u_mul_e", "sum", x, torch.ones(g.num_edges(), dtype=x.dtype))  # not a copy_u sum
        assert R.route_count() == before + 3
        assert dgl_accel.stats()["redundancy_plan"] == {"native-cpu": 3}
    finally:
        R.detach(g)
    with R.use_redundancy(True, auto_build=False):
        gspmm(g, "copy_u", "sum", x)
    assert R.route_count() == before + 3
    k = dense_graph(3)
    R.attach(k, R.reduce_redundancy(k))
    assert R.hook._by_structure
    del k
    import gc
    gc.collect()
    assert not R.hook._by_structure  # a dead graph's entry is evicted: the hook's check is free again
    # Mode "auto" routes exactly when the cost model says one aggregation through the plan is cheaper.
    R.attach(g, plan)
    try:
        for width in (1, 4096):
            xw = torch.randn(g.num_nodes(), width, dtype=torch.float64)
            pays = R.predicts_gain(plan, width, 1, aggregations_per_layer=1, include_transform=False).pays
            n0 = R.route_count()
            with R.use_redundancy("auto", auto_build=False):
                assert_close(gspmm(g, "copy_u", "sum", xw), reference(g, xw, "sum", None))
            assert R.route_count() == n0 + int(pays)
    finally:
        R.detach(g)
    before = R.route_count()
    # Auto-built plans: once per graph object; mode True keeps it, "auto" keeps it only if it pays.
    h = dense_graph(2)
    with R.use_redundancy(True, auto_build=True):
        assert_close(gspmm(h, "copy_u", "sum", x), reference(h, x, "sum", None))
    assert R.route_count() == before + 1


def test_cost_model():
    g = dense_graph(5)
    plan = R.reduce_redundancy(g)
    s = dict(plan.summary())
    c = R.CostConstants(t_edge=1e-9, t_pair=3e-9, t_round=1e-6)
    one = R.predicts_gain(s, 256, 1, aggregations_per_layer=1, include_transform=False, constants=c)
    # The model by hand: F * (t_edge * E) vs F * (t_edge * E' + t_pair * P) + t_round * rounds.
    assert one.original_seconds == pytest.approx(256 * 1e-9 * s["edges"])
    assert one.rewritten_seconds == pytest.approx(256 * (1e-9 * s["edges_rewritten"] + 3e-9 * s["pair_nodes"])
                                                  + 1e-6 * s["rounds"])
    assert one.rewritten_seconds < one.original_seconds and one.pays
    saved = one.original_seconds - one.rewritten_seconds
    for layers in (1, 2, 3):
        est = R.predicts_gain(dict(s, transform_seconds=5 * saved), 256, layers, constants=c)
        assert est.aggregations == 3 * layers
        assert est.net_seconds == pytest.approx(3 * layers * saved - 5 * saved)
        assert est.pays == (3 * layers > 5)  # the transform needs > 5 aggregations to pay
    assert not R.predicts_gain(dict(s, pair_nodes=0, edges_rewritten=s["edges"]), 256, 2, include_transform=False)
    assert isinstance(R.predicts_gain(plan, 256, 2), R.GainEstimate)  # default constants, from a plan


def test_bad_input():
    g = dense_graph(0)
    plan = R.reduce_redundancy(g)
    hetero = dgl.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])})
    cases = [
        (lambda: R.reduce_redundancy("g"), "expected a dgl.DGLGraph"),
        (lambda: R.reduce_redundancy(hetero), "expected a homogeneous graph"),
        (lambda: R.reduce_redundancy(g, theta=1), "expected theta"),
        (lambda: R.reduce_redundancy(g, rounds=-1), "expected rounds"),
        (lambda: R.reduce_redundancy(g, max_pair_nodes=-2), "expected max_pair_nodes"),
        (lambda: plan.aggregate(torch.ones(3, 2)), "expected features with 40 rows"),
        (lambda: plan.aggregate(torch.ones(40, 2, dtype=torch.int64)), "expected floating-point"),
        (lambda: plan.aggregate(torch.ones(40, 2), reduce="max"), "expected reduce"),
        (lambda: plan.aggregate(torch.ones(40, 2), norm="sym"), "expected norm"),
        (lambda: R.attach(dense_graph(0, n=41), plan), "expected the graph the plan was built for"),
        (lambda: R.attach(g, "plan"), "expected a RedundancyPlan"),
        (lambda: R.use_redundancy("yes").__enter__(), "expected mode"),
        (lambda: R.predicts_gain(plan, 0, 2), "expected feat_dim"),
        (lambda: R.predicts_gain({"edges": 3}, 8, 2), "expected a RedundancyPlan or a dict"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()
    assert g.num_edges() == 500 and "h" not in g.ndata  # the user's graph is untouched
