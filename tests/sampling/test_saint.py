"""GraphSAINT sampler (dgl_accel.sampling.SAINTSampler): inclusion probabilities, normalisation,
induced subgraphs, reproducibility, DataLoader use and input validation.

Statistical checks compare an empirical frequency f over N independent trials with its exact
probability p and fail when |f - p| > 5 * sqrt(p (1 - p) / N) + 1e-9: for a correct sampler the
false-alarm rate is about 6e-7 per comparison (normal approximation), < 1e-4 over all comparisons
of this file; the seeds are fixed, so outcomes are deterministic anyway.
"""
import itertools

import dgl
import numpy as np
import pytest
import torch

from dgl_accel.core.sampling.saint.draw import edge_weights, node_weights
from dgl_accel.core.sampling.saint.norm import aggregation_norm, exact_inclusion
from dgl_accel.sampling import SAINTSampler
from dgl_accel.sampling.induced import induced_subgraph
from dgl_accel.sampling.saint import tables
from dgl_accel.testing.marks import quick_first

Z = 5.0


def _graph(n=7, m=18, seed=0, idtype=torch.int64):
    """Small random directed multigraph with a self-loop, a node without out-edges and one without
    in-edges (the corner cases of the degree clamps)."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(n - 1, (m,), generator=gen)            # node n-1 has no out-edges
    dst = torch.randint(1, n, (m,), generator=gen)             # node 0 has no in-edges
    src = torch.cat([src, torch.tensor([2, 1])])
    dst = torch.cat([dst, torch.tensor([2, n - 1])])           # a self-loop, and an in-edge of n-1
    return dgl.graph((src, dst), num_nodes=n, idtype=idtype)


def _freq_ok(f, p, N):
    f, p = np.asarray(f, dtype=np.float64), np.asarray(p, dtype=np.float64)
    tol = Z * np.sqrt(p * (1 - p) / N) + 1e-9
    bad = np.abs(f - p) > tol
    assert not bad.any(), f"frequencies {f[bad]} vs probabilities {p[bad]} (N={N})"


def _edge_positions(g, nodes):
    """Per parent edge id: both end points in ``nodes``."""
    src, dst = g.edges(order="eid")
    inside = np.zeros(g.num_nodes(), dtype=bool)
    inside[nodes] = True
    return inside[src.numpy()] & inside[dst.numpy()]


def _by_eid(t, per_position):
    out = np.empty_like(per_position)
    out[t.csr.eids] = per_position
    return out


# --------------------------------------------------------------------------- exact probabilities
def _enumerate_draws(weights, budget):
    """All ordered outcomes of ``budget`` i.i.d. draws: (probability, tuple of drawn indices)."""
    pi = weights / weights.sum()
    for combo in itertools.product(range(len(pi)), repeat=budget):
        yield float(np.prod(pi[list(combo)])), combo


@pytest.mark.parametrize("mode", ["node", "edge"])
def test_closed_form_matches_enumeration(mode):
    g = _graph(n=5, m=7)
    t = tables(g, cache=False)
    B = 3
    p_node, p_pos = exact_inclusion(mode, t, B)
    n, E = g.num_nodes(), g.num_edges()
    src, dst = t.csr.indices, t.dst
    e_node, e_pos = np.zeros(n), np.zeros(E)
    w = node_weights(t) if mode == "node" else edge_weights(t)
    for prob, combo in _enumerate_draws(w, B):
        drawn = np.array(combo)
        nodes = np.unique(drawn if mode == "node" else np.concatenate([src[drawn], dst[drawn]]))
        inside = np.zeros(n, dtype=bool)
        inside[nodes] = True
        e_node += prob * inside
        e_pos += prob * (inside[src] & inside[dst])
    np.testing.assert_allclose(p_node, e_node, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(p_pos, e_pos, rtol=1e-10, atol=1e-12)


def test_node_weights_are_normalised_column_norms():
    g = _graph()
    t = tables(g, cache=False)
    A = np.zeros((g.num_nodes(),) * 2)
    src, dst = g.edges()
    np.add.at(A, (dst.numpy(), src.numpy()), 1.0)             # A[v, u] = #edges u -> v
    A_norm = A / np.maximum(A.sum(1, keepdims=True), 1)        # D_in^-1 A
    col = (A_norm ** 2).sum(0)
    w = node_weights(t)
    has_out = col > 0
    np.testing.assert_allclose(w[has_out], col[has_out])
    assert np.all(w[~has_out] == col[has_out].min())           # nodes without out-edges: smallest weight
    np.testing.assert_allclose(node_weights(t, "degree"), np.maximum(A.sum(0), 1))


# ----------------------------------------------------------------------- empirical frequencies
@pytest.mark.parametrize("mode,budget", [("node", 3), ("edge", 4)])
def test_empirical_inclusion_matches_closed_form(mode, budget):
    g = _graph()
    s = SAINTSampler(mode, budget, seed=123)
    t = tables(g)
    p_node, p_pos = exact_inclusion(mode, t, budget)
    N = 4000
    c_node, c_edge = np.zeros(g.num_nodes()), np.zeros(g.num_edges())
    for _ in range(N):
        nodes = s.sample_nodes(g).numpy()
        c_node[nodes] += 1
        c_edge += _edge_positions(g, nodes)
    _freq_ok(c_node / N, p_node, N)
    _freq_ok(c_edge / N, _by_eid(t, p_pos), N)


def _walk_exact(g, length):
    """Exact (p_node, p_edge by eid) of a 1-root walk sampler, by enumerating every walk."""
    n = g.num_nodes()
    src, dst = g.edges(order="eid")
    out = [dst[src == v].tolist() for v in range(n)]            # multi-edges: separate choices
    p_node, p_edge = np.zeros(n), np.zeros(g.num_edges())

    def walk(path, prob, hops):
        if hops == 0 or not out[path[-1]]:
            nodes = np.unique(path)
            inside = np.zeros(n, dtype=bool)
            inside[nodes] = True
            p_node[:] += prob * inside
            p_edge[:] += prob * _edge_positions(g, nodes)
            return
        nb = out[path[-1]]
        for x in nb:
            walk(path + [x], prob / len(nb), hops - 1)

    for r in range(n):
        walk([r], 1.0 / n, length)
    return p_node, p_edge


# 3,000 walks and a coverage of 3,000: about 3 s on 2 cores (the slow case); the quick case checks 1,000 the
# same way (the frequency bounds follow N)
@pytest.mark.parametrize("N", quick_first([1000, 3000]))
def test_walk_empirical_and_counted_normalisation_match_enumeration(N):
    g = _graph()
    L = 2
    p_node, p_edge = _walk_exact(g, L)
    s = SAINTSampler("walk", (1, L), seed=7, normalize=True, coverage=N, aggr_norm="none")
    c_node = np.zeros(g.num_nodes())
    for _ in range(N):
        c_node[s.sample_nodes(g).numpy()] += 1
    _freq_ok(c_node / N, p_node, N)
    # counted normalisation: p_v ~ C_v / N and alpha_uv = C_uv / C_v ~ p_uv / p_v (binomial given C_v)
    norm = s.normalization(g)
    assert norm.method == "count"
    Np = norm.num_presampled
    assert Np * p_node.mean() >= N * 0.99                     # coverage reached
    _freq_ok(norm.p_node, p_node, Np)
    src, dst = (x.numpy() for x in g.edges(order="eid"))
    alpha = p_edge / p_node[dst]
    cv = np.round(norm.p_node * Np)[dst]
    _freq_ok(1.0 / norm.inv_alpha, alpha, cv)
    assert torch.allclose(torch.from_numpy(norm.edge_w.astype(np.float64)), torch.from_numpy(norm.inv_alpha))


# ------------------------------------------------------------------------------ unbiasedness
@pytest.mark.parametrize("mode,budget,aggr_norm", [("node", 2, "both"), ("edge", 2, "right"), ("node", 3, "none")])
def test_exact_normalisation_is_unbiased(mode, budget, aggr_norm):
    """Enumerate every outcome of a tiny sampler: E[ζ_v | v in S] equals the full-graph aggregation
    and E[Σ_{v in S ∩ train} loss_w L_v] equals the mean training loss."""
    g = _graph(n=5, m=7, seed=3)
    train = torch.tensor([True, False, True, True, False])
    s = SAINTSampler(mode, budget, normalize=True, aggr_norm=aggr_norm, train_mask=train, seed=0)
    norm = s.normalization(g)
    assert norm.method == "exact"
    t = tables(g)
    n = g.num_nodes()
    x = np.random.default_rng(0).normal(size=n)
    L = np.random.default_rng(1).random(n)
    a_pos = aggregation_norm(t, aggr_norm)
    full = np.bincount(t.dst, a_pos * x[t.csr.indices], minlength=n)    # Σ_u Ã[v,u] x_u
    agg, p_v, loss = np.zeros(n), np.zeros(n), 0.0
    w = node_weights(t) if mode == "node" else edge_weights(t)
    for prob, combo in _enumerate_draws(w, budget):
        drawn = np.array(combo)
        nodes = np.unique(drawn if mode == "node" else np.concatenate([t.csr.indices[drawn], t.dst[drawn]]))
        sg, eids = induced_subgraph(g, nodes)
        u, v = (z.numpy() for z in sg.edges())
        zeta = np.bincount(v, norm.edge_w[eids] * x[nodes[u]], minlength=len(nodes))
        agg[nodes] += prob * zeta
        p_v[nodes] += prob
        tr = train.numpy()[nodes]
        loss += prob * float((norm.loss_w[nodes] * L[nodes])[tr].sum())
    np.testing.assert_allclose(p_v, norm.p_node, rtol=1e-9)
    np.testing.assert_allclose(agg / p_v, full, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, L[train.numpy()].mean(), rtol=1e-5)


def test_uncovered_nodes_count_once():
    # two components; the walk sampler never leaves the one of its root, the coverage target is
    # small, so with this seed some nodes are never pre-sampled: their loss weight is N / |V_train|
    g = dgl.graph((torch.tensor([0, 1, 2, 3, 4, 5]), torch.tensor([1, 0, 3, 2, 5, 4])), num_nodes=6)
    s = SAINTSampler("walk", (1, 1), normalize=True, coverage=0.2, seed=5, aggr_norm="none")
    norm = s.normalization(g)
    N = norm.num_presampled
    covered = norm.p_node * N
    assert (covered == 1).any() and np.all(np.isfinite(norm.loss_w)) and np.all(np.isfinite(norm.edge_w))
    np.testing.assert_allclose(norm.loss_w, 1.0 / (6 * norm.p_node), rtol=1e-6)


# ------------------------------------------------------------------------------- subgraphs
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("mode,budget", [("node", 30), ("edge", 40), ("walk", (10, 3))])
def test_subgraph_is_node_induced(mode, budget, idtype, symmetric):
    from dgl_accel.sampling.induced import half_csr

    gen = torch.Generator().manual_seed(1)
    g = dgl.graph((torch.randint(60, (400,), generator=gen), torch.randint(60, (400,), generator=gen)),
                  num_nodes=60, idtype=idtype)
    if symmetric:  # the half-adjacency path: symmetric, simple, with self-loops on some nodes
        g = dgl.to_bidirected(dgl.remove_self_loop(g))
        g = dgl.add_edges(g, torch.arange(0, 60, 3, dtype=idtype), torch.arange(0, 60, 3, dtype=idtype))
    assert (half_csr(g) is not None) == symmetric
    s = SAINTSampler(mode, budget, seed=3)
    for _ in range(3):
        sg = s.sample(g)
        nid, eid = sg.ndata[dgl.NID], sg.edata[dgl.EID]
        assert sg.idtype == idtype and nid.dtype == idtype and eid.dtype == idtype
        ref = dgl.node_subgraph(g, nid)
        assert torch.equal(ref.ndata[dgl.NID], nid)
        assert torch.equal(torch.sort(eid).values, torch.sort(ref.edata[dgl.EID]).values)
        u, v = sg.edges()
        pu, pv = g.find_edges(eid)
        assert torch.equal(nid[u.long()], pu) and torch.equal(nid[v.long()], pv)


def test_same_seed_same_subgraphs_different_seeds_differ():
    g = _graph(n=40, m=300)
    for mode, budget in [("node", 10), ("edge", 10), ("walk", (5, 2))]:
        a, b, c = (SAINTSampler(mode, budget, seed=sd) for sd in (11, 11, 12))
        d = SAINTSampler(mode, budget, seed=11, cache=False)
        ra = [a.sample_nodes(g) for _ in range(5)]
        assert all(torch.equal(x, y) for x, y in zip(ra, [b.sample_nodes(g) for _ in range(5)]))
        assert all(torch.equal(x, y) for x, y in zip(ra, [d.sample_nodes(g) for _ in range(5)]))
        assert any(not torch.equal(x, y) for x, y in zip(ra, [c.sample_nodes(g) for _ in range(5)]))
        assert any(not torch.equal(ra[0], x) for x in ra[1:])  # successive calls differ


def test_dataloader_prefetch_and_normalisation_fields():
    g = _graph(n=50, m=400)
    g.ndata["x"] = torch.randn(50, 3)
    g.ndata["train_mask"] = torch.arange(50) % 2 == 0
    g.edata["e"] = torch.randn(g.num_edges())
    s = SAINTSampler("walk", (5, 2), seed=0, normalize=True, train_mask="train_mask", coverage=20,
                     prefetch_ndata=["x"], prefetch_edata=["e"])
    norm = s.normalization(g)
    count = 0
    for sg in dgl.dataloading.DataLoader(g, torch.arange(4), s):
        nid, eid = sg.ndata[dgl.NID], sg.edata[dgl.EID]
        assert torch.equal(sg.ndata["x"], g.ndata["x"][nid])
        assert torch.equal(sg.edata["e"], g.edata["e"][eid])
        assert torch.equal(sg.edata["w"], torch.from_numpy(norm.edge_w)[eid])
        assert torch.equal(sg.ndata["loss_w"], torch.from_numpy(norm.loss_w)[nid])
        count += 1
    assert count == 4
    # one-line use with GraphConv: weighted sum of neighbour features
    conv = dgl.nn.GraphConv(3, 2, norm="none", weight=False, bias=False, allow_zero_in_degree=True)
    out = conv(sg, sg.ndata["x"], edge_weight=sg.edata["w"])
    u, v = sg.edges()
    ref = torch.zeros(sg.num_nodes(), 3).index_add_(0, v.long(), sg.ndata["x"][u.long()] * sg.edata["w"][:, None])
    assert torch.allclose(out, ref, atol=1e-5)


def test_frontier_mode_if_available():
    pytest.importorskip("dgl_accel.sampling.frontier")
    g = _graph(n=60, m=500)
    s = SAINTSampler("frontier", (5, 20), seed=0)
    sg = s.sample(g)
    assert 0 < sg.num_nodes() <= 20
    assert torch.equal(dgl.node_subgraph(g, sg.ndata[dgl.NID]).ndata[dgl.NID], sg.ndata[dgl.NID])


# ------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("mode,budget", [
    ("node", 0), ("node", -3), ("node", True), ("node", 2.5), ("edge", 0), ("walk", 5), ("walk", (0, 2)),
    ("walk", (3, 0)), ("walk", (3, -1)), ("walk", (1, 2, 3)), ("frontier", (10, 5)), ("nodes", 10),
])
def test_bad_construction(mode, budget):
    with pytest.raises(ValueError, match="expected"):
        SAINTSampler(mode, budget)


@pytest.mark.parametrize("kw", [dict(coverage=0), dict(aggr_norm="sym"), dict(node_prob="uniform"),
                                dict(seed=-1), dict(train_mask=[1, 2])])
def test_bad_options(kw):
    with pytest.raises(ValueError, match="expected"):
        SAINTSampler("node", 3, **kw)


def test_bad_graph_and_budget_vs_graph():
    g = _graph()
    with pytest.raises(ValueError, match="number of nodes"):
        SAINTSampler("node", g.num_nodes() + 1).sample(g)
    with pytest.raises(ValueError, match="number of edges"):
        SAINTSampler("edge", g.num_edges() + 1).sample(g)
    with pytest.raises(ValueError, match="number of nodes"):
        SAINTSampler("walk", (g.num_nodes() + 1, 2)).sample(g)
    empty = dgl.graph(([], []), num_nodes=5)
    for mode, b in [("node", 2), ("edge", 1), ("walk", (2, 2))]:
        with pytest.raises(ValueError, match="at least one edge"):
            SAINTSampler(mode, b).sample(empty)
    hg = dgl.heterograph({("a", "r", "b"): ([0], [0])})
    with pytest.raises(ValueError, match="homogeneous"):
        SAINTSampler("node", 1).sample(hg)
    g.ndata["none"] = torch.zeros(g.num_nodes(), dtype=torch.bool)
    with pytest.raises(ValueError, match="at least one node"):
        SAINTSampler("node", 2, normalize=True, train_mask="none").sample(g)
    with pytest.raises(ValueError, match="train_mask field"):
        SAINTSampler("node", 2, normalize=True, train_mask="missing").sample(g)
    src_before = g.edges()[0].clone()
    SAINTSampler("edge", 3, normalize=True).sample(g)          # the user's graph is left alone
    assert torch.equal(g.edges()[0], src_before) and set(g.ndata.keys()) == {"none"}


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_threaded_induction_matches_single_thread(threads):
    from dgl_accel.core.sampling.induced.subgraph import induced_entries
    from dgl_accel.sampling.induced import cpu_in_csr

    g = _graph(n=300, m=6000, seed=4)
    csr = cpu_in_csr(g)
    nodes = np.unique(np.random.default_rng(threads).integers(0, 300, 120))
    one = induced_entries(csr.indptr, csr.indices, csr.eids, nodes, csr.num_nodes, threads=1)
    many = induced_entries(csr.indptr, csr.indices, csr.eids, nodes, csr.num_nodes, threads=threads)
    for a, b in zip(one, many):
        assert np.array_equal(a, b)


def test_pickle_round_trip_keeps_the_stream():
    import pickle

    g = _graph(n=40, m=300)
    s = SAINTSampler("walk", (5, 2), seed=9, normalize=True, coverage=5)
    s.sample(g)
    t = pickle.loads(pickle.dumps(s))
    assert torch.equal(s.sample_nodes(g), t.sample_nodes(g))
    assert np.array_equal(s.normalization(g).edge_w, t.normalization(g).edge_w)


# (nodes, edges, (mode, budget, options) per sampler): 300 nodes and 2,000 edges take 6 to 10 s on 2 cores under the
# interpreter (the slow cases); the quick case runs every mode on 60 nodes and 400 edges, the walks' counted
# normalisation pre-sampling to a coverage of 3 (the default 50 takes a few hundred interpreted draws)
DEVICE_CASES = quick_first([
    (60, 400, (("node", 12, {}), ("node", 12, {"exact_norm": False, "coverage": 3, "node_prob": "degree"}),
               ("edge", 8, {}), ("walk", (12, 2), {"coverage": 3}), ("frontier", (2, 12), {"normalize": False}))),
    (300, 2000, (("node", 60, {}), ("node", 60, {"exact_norm": False, "coverage": 3, "node_prob": "degree"}),
                 ("edge", 40, {}), ("walk", (20, 2), {}), ("frontier", (10, 60), {"normalize": False})))])


@pytest.mark.interpreter
@pytest.mark.parametrize("symmetric,idtype", quick_first([(False, torch.int64), (True, torch.int64), (False, torch.int32)]))
@pytest.mark.parametrize("n, m, cases", DEVICE_CASES, ids=["60-nodes", "300-nodes"])
def test_device_path_builds_the_cpu_paths_subgraphs(n, m, cases, symmetric, idtype):
    """On the Triton path (a CUDA graph; here the interpreter) the node set, the subgraph and its
    normalisation weights (closed-form or counted by pre-sampling) are built where the graph lives:
    the CPU path's nodes, edges (its CSC order; a symmetric graph's CPU subgraph lists them in the
    half-CSR order, so there as sets) and weights."""
    import dgl_accel
    gen = torch.Generator().manual_seed(3)
    g = dgl.graph((torch.randint(n, (m,), generator=gen), torch.randint(n, (m,), generator=gen)),
                  num_nodes=n, idtype=idtype)
    if symmetric:
        g = dgl.to_bidirected(g)
    for mode, budget, extra in cases:  # the frontier sampler: interpreted
        out = {}
        for name in ("native", "triton"):
            with dgl_accel.use_backend(name):
                sampler = SAINTSampler(mode, budget, **{"seed": 5, "normalize": True, "output_device": None, **extra})
                out[name] = [sampler.sample(g) for _ in range(2)] + [sampler.sample_nodes(g)]
        assert torch.equal(out["triton"].pop(), out["native"].pop())
        for dev, ref in zip(out["triton"], out["native"]):
            weighted = "w" in ref.edata
            assert weighted == ("frontier" != mode) and weighted == ("w" in dev.edata)
            assert torch.equal(dev.ndata[dgl.NID], ref.ndata[dgl.NID]), mode
            assert not weighted or torch.equal(dev.ndata["loss_w"], ref.ndata["loss_w"]), mode
            d, r = ((dev.edata[dgl.EID].argsort(), ref.edata[dgl.EID].argsort()) if symmetric
                    else (slice(None), slice(None)))
            assert torch.equal(dev.edata[dgl.EID][d], ref.edata[dgl.EID][r]), mode
            assert not weighted or torch.equal(dev.edata["w"][d], ref.edata["w"][r]), mode
            u, v = dev.edges()
            pu, pv = g.find_edges(dev.edata[dgl.EID])
            assert torch.equal(dev.ndata[dgl.NID][u], pu) and torch.equal(dev.ndata[dgl.NID][v], pv)
