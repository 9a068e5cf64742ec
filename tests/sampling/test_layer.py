"""Layer-wise samplers (LADIES, FastGCN): probabilities against a dense numpy reference, draw
frequencies (chi-square), block validity and chaining, determinism, unbiasedness of the weighted
aggregation, the DGL DataLoader, and input errors."""
import dgl
import numpy as np
import pytest
import torch
from scipy import stats

from dgl_accel.core.sampling.layer.importance import NORMS, sample_layer_nodes
from dgl_accel.core.sampling.rng import call_seed
from dgl_accel.sampling.layer import FastGCNSampler, LADIESSampler, fastgcn_probabilities, ladies_probabilities
from dgl_accel.testing.marks import quick_first

ALPHA = 1e-3  # chi-square significance: fixed seeds, so a failure is a real mismatch, reproducibly


def make_graph(n=24, m=90, seed=0, multi=True, idtype=torch.int64):
    """Random graph with a few parallel edges, self-loops and (usually) isolated nodes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 2, m)  # nodes n-2, n-1 have no out-edges
    dst = rng.integers(0, n - 2, m)
    if multi:
        src = np.concatenate([src, src[:5], [0, 1]])  # parallel edges + self-loops
        dst = np.concatenate([dst, dst[:5], [0, 1]])
    return dgl.graph((torch.as_tensor(src), torch.as_tensor(dst)), num_nodes=n, idtype=idtype)


def dense_norm_adj(g, norm="both"):
    """Â as a dense numpy matrix [dst, src], written out from the definition."""
    n = g.num_nodes()
    src, dst = (t.numpy() for t in g.edges())
    d_in = np.maximum(np.bincount(dst, minlength=n), 1).astype(np.float64)
    d_out = np.maximum(np.bincount(src, minlength=n), 1).astype(np.float64)
    c = {"both": 1 / np.sqrt(d_in[dst] * d_out[src]), "right": 1 / d_in[dst], "left": 1 / d_out[src],
         "none": np.ones(len(src))}[norm]
    a = np.zeros((n, n))
    np.add.at(a, (dst, src), c)
    return a


def dense_ladies_p(g, dst_nodes, norm="both"):
    a = dense_norm_adj(g, norm)[np.asarray(dst_nodes)]
    col = (a ** 2).sum(0)
    return col / col.sum()


def drawn_sources(block):
    """Original ids of the nodes that have edges in the block (= the drawn nodes)."""
    src, _ = block.edges()
    return torch.unique(block.srcdata[dgl.NID][src.long()])


# ------------------------------------------------------------------------- probabilities
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("gseed", [0, 1, 2])
def test_ladies_probabilities_match_dense_formula(norm, gseed):
    g = make_graph(seed=gseed)
    rng = np.random.default_rng(100 + gseed)
    for size in (1, 3, 10, g.num_nodes()):
        dst_nodes = rng.permutation(g.num_nodes())[:size]
        cand, p = ladies_probabilities(g, torch.as_tensor(dst_nodes), norm=norm)
        ref = dense_ladies_p(g, dst_nodes, norm)
        support = np.nonzero(ref > 0)[0]
        # candidates are exactly the in-neighbours of the destination set, ascending
        in_nbrs = np.unique(g.in_edges(torch.as_tensor(dst_nodes))[0].numpy())
        assert cand.tolist() == support.tolist() == in_nbrs.tolist()
        np.testing.assert_allclose(p.numpy(), ref[support], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("norm", NORMS)
def test_fastgcn_probabilities_match_dense_formula_and_are_cached(norm):
    g = make_graph(seed=5)
    col = (dense_norm_adj(g, norm) ** 2).sum(0)
    p = fastgcn_probabilities(g, norm)
    np.testing.assert_allclose(p.numpy(), col / col.sum(), rtol=1e-12, atol=1e-15)
    assert fastgcn_probabilities(g, norm) is p  # cached per graph
    g.add_edges(torch.tensor([22]), torch.tensor([3]))  # in-place mutation invalidates the cache
    col = (dense_norm_adj(g, norm) ** 2).sum(0)
    np.testing.assert_allclose(fastgcn_probabilities(g, norm).numpy(), col / col.sum(), rtol=1e-12)


# ------------------------------------------------------------------------- draw frequencies
def _chisquare(counts, expected_p):
    counts = np.asarray(counts, dtype=np.float64)
    exp = np.asarray(expected_p) * counts.sum()
    return stats.chisquare(counts, exp).pvalue


@pytest.mark.parametrize("replace", quick_first([True, False]))
# 3,000 draws: over 3 s on 2 cores (the slow case); the quick case tests 1,000 the same way
@pytest.mark.parametrize("draws", quick_first([1000, 3000]))
def test_ladies_first_layer_frequencies_match_p(replace, draws):
    """Budget 1: the single drawn node of the output layer is distributed as p (with or without
    replacement: Efraimidis-Spirakis with s = 1 picks u with probability p(u))."""
    g = make_graph(seed=3)
    seeds = torch.tensor([2, 9, 11, 17])
    p = dense_ladies_p(g, seeds.numpy())
    support = np.nonzero(p > 0)[0]
    sampler = LADIESSampler([1], replace=replace, seed=1234)
    counts = np.zeros(g.num_nodes())
    for _ in range(draws):
        _, _, (block,) = sampler.sample_blocks(g, seeds)
        drawn = drawn_sources(block)
        assert drawn.numel() == 1
        counts[drawn.item()] += 1
    assert counts[p == 0].sum() == 0
    assert _chisquare(counts[support], p[support]) > ALPHA


def test_with_replacement_draw_counts_match_p():
    """s = 4 draws per call with replacement: pooled draw counts are multinomial(4 T, p)."""
    g = make_graph(seed=4)
    seeds = torch.tensor([0, 5, 6, 13, 20])
    cand, p = ladies_probabilities(g, seeds)
    counts = torch.zeros(cand.numel(), dtype=torch.int64)
    for call in range(2000):
        drawn = sample_layer_nodes(cand, p, 4, replace=True, seed=call_seed(7, call), layer=0)
        assert int(drawn.counts.sum()) == 4
        counts[torch.searchsorted(cand, drawn.nodes)] += drawn.counts
    assert _chisquare(counts.numpy(), p.numpy()) > ALPHA


def test_fastgcn_frequencies_match_global_p():
    g = make_graph(seed=6)
    p = fastgcn_probabilities(g).numpy()
    support = np.nonzero(p > 0)[0]
    counts = np.zeros(g.num_nodes())
    for call in range(3000):
        drawn = sample_layer_nodes(torch.arange(g.num_nodes()), torch.as_tensor(p), 1, replace=False,
                                   seed=call_seed(11, call), layer=2)
        counts[drawn.nodes.item()] += 1
    assert counts[p == 0].sum() == 0
    assert _chisquare(counts[support], p[support]) > ALPHA


# ------------------------------------------------------------------------------- blocks
def check_blocks(g, seeds, blocks, sizes, exclude=None):
    src_all, dst_all = g.edges()
    excluded = set() if exclude is None else set(exclude.tolist())
    assert blocks[-1].dstdata[dgl.NID].tolist() == seeds.tolist()
    for i, block in enumerate(blocks):
        nd = block.num_dst_nodes()
        src_ids, dst_ids = block.srcdata[dgl.NID], block.dstdata[dgl.NID]
        assert src_ids[:nd].tolist() == dst_ids.tolist()          # DGL's to_block layout
        assert torch.unique(src_ids).numel() == src_ids.numel()
        if i + 1 < len(blocks):                                      # blocks chain
            assert blocks[i + 1].srcdata[dgl.NID].tolist() == dst_ids.tolist()
        bs, bd = block.edges()
        eid = block.edata[dgl.EID].long()
        u, v = src_ids[bs.long()], dst_ids[bd.long()]
        assert torch.equal(src_all[eid], u) and torch.equal(dst_all[eid], v)  # real graph edges
        assert not excluded & set(eid.tolist())
        drawn = torch.unique(u)
        assert drawn.numel() <= sizes[i]                             # budget
        assert block.num_src_nodes() - nd <= sizes[i]
        assert set(src_ids[nd:].tolist()) <= set(drawn.tolist())     # extra src nodes were drawn
        # every edge from a drawn node into the destinations is present (minus exclusions)
        in_v = torch.isin(dst_all, dst_ids) & torch.isin(src_all, drawn)
        want = set(torch.nonzero(in_v).flatten().tolist()) - excluded
        assert set(eid.tolist()) == want
        w = block.edata["w"]
        assert w.dtype == torch.float32 and bool((w > 0).all())


@pytest.mark.parametrize("cls", [LADIESSampler, FastGCNSampler])
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_blocks_are_valid_and_chain(cls, replace, idtype):
    g = make_graph(n=60, m=400, seed=8, idtype=idtype)
    sizes = [9, 6, 4]
    sampler = cls(sizes, replace=replace, seed=5)
    for seeds in (torch.tensor([3, 40, 7]), torch.tensor([59]), torch.arange(0, 60, 4)):
        input_nodes, output_nodes, blocks = sampler.sample_blocks(g, seeds)
        assert len(blocks) == 3 and output_nodes.tolist() == seeds.tolist()
        assert input_nodes.tolist() == blocks[0].srcdata[dgl.NID].tolist()
        assert all(b.idtype == idtype for b in blocks)
        check_blocks(g, seeds, blocks, sizes)


@pytest.mark.parametrize("cls", [LADIESSampler, FastGCNSampler])
def test_exclude_eids(cls):
    g = make_graph(n=30, m=200, seed=9)
    seeds = torch.tensor([1, 2, 3])
    exclude = g.in_edges(seeds, form="eid")[::2]
    _, _, blocks = cls([30, 30], seed=0).sample_blocks(g, seeds, exclude_eids=exclude)
    check_blocks(g, seeds, blocks, [30, 30], exclude=exclude)


def test_full_budget_takes_every_neighbour_with_exact_weights():
    """Without replacement and s >= #candidates: all in-edges of V, weights = Â entries."""
    g = make_graph(seed=10)
    seeds = torch.tensor([4, 8, 15])
    _, _, (block,) = LADIESSampler([g.num_nodes()], seed=0).sample_blocks(g, seeds)
    assert sorted(block.edata[dgl.EID].tolist()) == sorted(g.in_edges(seeds, form="eid").tolist())
    a = dense_norm_adj(g)
    x = np.random.default_rng(0).normal(size=g.num_nodes())
    np.testing.assert_allclose(aggregate(block, torch.as_tensor(x)), (a @ x)[seeds.numpy()], rtol=1e-5, atol=1e-6)


def test_works_with_dgl_dataloader():
    g = make_graph(n=80, m=500, seed=11)
    g.ndata["x"] = torch.randn(80, 4)
    train = torch.arange(0, 80, 2)
    sampler = LADIESSampler([10, 10], seed=3, prefetch_node_feats=["x"])
    loader = dgl.dataloading.DataLoader(g, train, sampler, batch_size=16, shuffle=False)
    seen = []
    for input_nodes, output_nodes, blocks in loader:
        check_blocks(g, output_nodes, blocks, [10, 10])
        assert torch.equal(blocks[0].srcdata["x"], g.ndata["x"][input_nodes.long()])
        seen += output_nodes.tolist()
    assert sorted(seen) == train.tolist()


# ---------------------------------------------------------------------------- determinism
def block_signature(blocks):
    return [(b.srcdata[dgl.NID].tolist(), b.edata[dgl.EID].tolist(), b.edata["w"].tolist()) for b in blocks]


@pytest.mark.parametrize("cls", [LADIESSampler, FastGCNSampler])
@pytest.mark.parametrize("replace", [False, True])
def test_same_seed_same_blocks(cls, replace):
    g = make_graph(n=60, m=400, seed=12)
    seeds = torch.tensor([5, 1, 33, 20])
    a, b, c = (cls([5, 5], replace=replace, seed=s) for s in (42, 42, 43))
    runs_a = [block_signature(a.sample_blocks(g, seeds)[2]) for _ in range(3)]
    runs_b = [block_signature(b.sample_blocks(g, seeds)[2]) for _ in range(3)]
    runs_c = [block_signature(c.sample_blocks(g, seeds)[2]) for _ in range(3)]
    assert runs_a == runs_b
    assert runs_a != runs_c                        # another seed draws differently
    assert runs_a[0] != runs_a[1]                  # successive calls (mini-batches) differ
    a.reset()
    assert block_signature(a.sample_blocks(g, seeds)[2]) == runs_a[0]


@pytest.mark.parametrize("replace", [False, True])
def test_drawn_set_does_not_depend_on_seed_order(replace):
    g = make_graph(n=60, m=400, seed=13)
    seeds = torch.tensor([5, 1, 33, 20, 47])
    s1 = LADIESSampler([6], replace=replace, seed=9).sample_blocks(g, seeds)[2][0]
    s2 = LADIESSampler([6], replace=replace, seed=9).sample_blocks(g, seeds.flip(0))[2][0]
    assert drawn_sources(s1).tolist() == drawn_sources(s2).tolist()


# ---------------------------------------------------------------------------- unbiasedness
def aggregate(block, x):
    """sum_u w_uv x_u for every destination v (float64)."""
    src, dst = block.edges()
    xs = x[block.srcdata[dgl.NID][src.long()].long()].to(torch.float64)
    out = torch.zeros(block.num_dst_nodes(), dtype=torch.float64)
    return out.index_add_(0, dst.long(), block.edata["w"].to(torch.float64) * xs).numpy()


@pytest.mark.parametrize("cls", quick_first([LADIESSampler, FastGCNSampler]))
# 4,000 samples: over 4 s on 2 cores (the slow case); the quick case averages 1,000 the same way
@pytest.mark.parametrize("runs", quick_first([1000, 4000]))
def test_weighted_aggregation_is_unbiased_with_replacement(cls, runs):
    """Mean over T samples of sum_u w_uv x_u vs (Â x)[v]: every entry within 4.5 standard errors
    (estimated from the same samples; 4.5 sigma ~ 7e-6 two-sided per entry) and the largest
    error below 5% of max |(Â x)[V]| at T = 4,000 (the bound grows as 1 / sqrt(T) for fewer)."""
    g = dgl.add_self_loop(make_graph(n=20, m=70, seed=14, multi=False))
    seeds = torch.tensor([0, 3, 7, 12])
    x = torch.as_tensor(np.random.default_rng(1).uniform(0.5, 1.5, g.num_nodes()))
    exact = (dense_norm_adj(g) @ x.numpy())[seeds.numpy()]
    sampler = cls([3], replace=True, seed=2024)
    samples = np.stack([aggregate(sampler.sample_blocks(g, seeds)[2][0], x) for _ in range(runs)])
    mean, se = samples.mean(0), samples.std(0, ddof=1) / np.sqrt(len(samples))
    assert np.all(np.abs(mean - exact) <= 4.5 * se + 1e-12), (mean, exact, se)
    assert np.max(np.abs(mean - exact)) < 0.05 * (4000 / runs) ** 0.5 * np.max(np.abs(exact))


# ------------------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize("sizes", [[], [3, -1], [0], [2.5], "12", 5, [True]])
def test_bad_sizes_raise(sizes):
    with pytest.raises(ValueError, match="expected"):
        LADIESSampler(sizes)


def test_bad_arguments_raise():
    for kwargs in (dict(norm="sym"), dict(seed=-1), dict(seed=2.0), dict(weight=""), dict(replace=1)):
        with pytest.raises(ValueError, match="expected"):
            FastGCNSampler([4], **kwargs)


@pytest.mark.parametrize("seeds", [torch.tensor([0, 24]), torch.tensor([-1]), torch.tensor([1.0]),
                                   torch.tensor([[1, 2]]), torch.tensor([3, 3])])
def test_bad_seed_nodes_raise(seeds):
    g = make_graph()
    with pytest.raises(ValueError, match="expected"):
        LADIESSampler([4]).sample_blocks(g, seeds)


def test_heterographs_and_blocks_raise():
    hg = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0], [1])})
    with pytest.raises(ValueError, match="expected"):
        LADIESSampler([2]).sample_blocks(hg, {"a": torch.tensor([0])})
    with pytest.raises(ValueError, match="expected"):
        fastgcn_probabilities(hg)
    g = make_graph()
    block = LADIESSampler([3], seed=0).sample_blocks(g, torch.tensor([1]))[2][0]
    with pytest.raises(ValueError, match="expected"):
        LADIESSampler([2]).sample_blocks(block, torch.tensor([0]))


def test_empty_seed_batch_gives_empty_blocks():
    g = make_graph()
    empty = torch.tensor([], dtype=torch.int64)
    input_nodes, output_nodes, blocks = LADIESSampler([3, 3], seed=0).sample_blocks(g, empty)
    assert input_nodes.numel() == 0 and all(b.num_edges() == 0 for b in blocks)
