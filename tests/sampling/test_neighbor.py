"""Neighbour choice and NeighborSampler: exact spec, statistics, DGL integration, accuracy.

Statistical tests use fixed seeds, so they are deterministic; each chi-square test is set at
alpha = 1e-3 (the chance that a correct sampler fails one of them for a fresh seed is 1e-3).
"""
import itertools

import dgl
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from dgl_accel.core.sampling.rng import philox_randint, philox_randint_np, philox_uniform, philox_uniform_np
from dgl_accel.graph.structure import in_csr
from dgl_accel.sampling import NeighborSampler, neighbor_choice, weighted_neighbor_choice
from dgl_accel.testing.reference import ref_neighbor_choice
from dgl_accel.testing.strategies import graphs
from examples.coauthor_sage import load_coauthor_cs, split, train_eval

ALPHA = 1e-3


def chi2_ok(observed, expected):
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    assert abs(observed.sum() - expected.sum()) < 1e-6 * expected.sum()
    stat = ((observed - expected) ** 2 / expected).sum()
    p = stats.chi2.sf(stat, len(observed) - 1)
    assert p > ALPHA, f"chi-square p = {p:.2e} (stat {stat:.1f}, df {len(observed) - 1})"


def csr_from_degrees(degrees):
    return torch.from_numpy(np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64))


# ------------------------------------------------------------------------------ exact spec
reference_choice = ref_neighbor_choice  # the spec, literally (dgl_accel/testing/reference.py)


def test_numpy_philox_bit_identical():
    off = torch.cat([torch.randint(-2**62, 2**62, (3000,), generator=torch.Generator().manual_seed(0)),
                     torch.arange(1000), torch.tensor([2**63 - 1, -2**63, -1])])
    for seed in (0, 1, 2**32 - 1, 2**32, 2**64 - 1, 0x0123456789ABCDEF):
        assert torch.equal(philox_randint(seed, off),
                           torch.from_numpy(philox_randint_np(seed, off.numpy()).astype(np.int64)))
        assert torch.equal(philox_uniform(seed, off), torch.from_numpy(philox_uniform_np(seed, off.numpy())))
    # the numpy version works in chunks: results must not depend on where chunks fall
    big = np.arange(100_000, dtype=np.int64).reshape(400, 250) * 3 + 17
    whole = philox_randint_np(7, big)
    assert whole.shape == big.shape
    assert np.array_equal(whole.ravel()[40_000:40_100], philox_randint_np(7, big.ravel()[40_000:40_100]))


@given(n=st.integers(1, 40), fanout=st.integers(0, 12), replace=st.booleans(), step=st.integers(0, 4),
       seed=st.integers(0, 2**64 - 1), data=st.randoms(use_true_random=False))
def test_neighbor_choice_matches_spec(n, fanout, replace, step, seed, data):
    degrees = [data.choice([0, 1, 2, fanout, fanout + 1, data.randint(0, 30), data.randint(0, 1200)])
               for _ in range(n)]
    indptr = csr_from_degrees(degrees)
    transits = torch.tensor(data.sample(range(n), data.randint(0, n)), dtype=torch.int64)
    num_nodes = n + data.randint(0, 3)
    got = neighbor_choice(indptr, transits, fanout, seed=seed, step=step, num_nodes=num_nodes, replace=replace)
    assert got.dtype == torch.int64 and got.shape == (len(transits), fanout)
    assert torch.equal(got, reference_choice(indptr, transits, fanout, seed, step, num_nodes, replace))


@given(n=st.integers(1, 40), fanout=st.sampled_from([-1, 0, 1, 3, 4, 5, 12, 15]), replace=st.booleans(),
       step=st.integers(0, 4), seed=st.integers(0, 2**64 - 1), data=st.randoms(use_true_random=False))
def test_flat_choice_matches_padded_choice(n, fanout, replace, step, seed, data):
    """The sampler's unpadded (positions, counts) form holds exactly the padded choice's valid slots."""
    from dgl_accel.core.sampling.neighbor.choice import uniform_choice_flat, uniform_choice_np

    degrees = [data.choice([0, 1, fanout, fanout + 1, data.randint(0, 30), data.randint(0, 300)])
               for _ in range(n)]
    indptr = csr_from_degrees([max(x, 0) for x in degrees]).numpy()
    v = np.array(data.sample(range(n), data.randint(0, n)), dtype=np.int64)
    padded = uniform_choice_np(indptr, v, fanout, seed, step, n, replace)
    flat, counts = uniform_choice_flat(indptr, v, fanout, seed, step, n, replace)
    assert np.array_equal(counts, (padded >= 0).sum(axis=1))
    assert np.array_equal(flat, padded[padded >= 0])


def test_neighbor_choice_all_neighbors():
    indptr = csr_from_degrees([3, 0, 5])
    got = neighbor_choice(indptr, torch.tensor([2, 1, 0]), -1, seed=1, step=0, num_nodes=3)
    assert got.tolist() == [[3, 4, 5, 6, 7], [-1] * 5, [0, 1, 2, -1, -1]]


def test_neighbor_choice_int32_and_counter_independence():
    """Results depend only on (seed, step, node, slot): batching transits differently changes nothing."""
    indptr = csr_from_degrees(np.random.default_rng(1).integers(0, 50, 200))
    t = torch.randperm(200, generator=torch.Generator().manual_seed(2))
    full = neighbor_choice(indptr, t, 7, seed=9, step=3, num_nodes=200)
    parts = torch.cat([neighbor_choice(indptr, t[:50].int(), 7, seed=9, step=3, num_nodes=200),
                       neighbor_choice(indptr, t[50:], 7, seed=9, step=3, num_nodes=200)])
    assert torch.equal(full, parts)


# ------------------------------------------------------------------------------ uniform statistics
def test_uniform_hub_chi_square():
    """20 hubs of degree 1500 (> 1024), fanout 10, 150 steps: 30,000 picks over 1500 positions."""
    d, hubs, fanout, steps = 1500, 20, 10, 150
    indptr = csr_from_degrees([d] * hubs)
    t = torch.arange(hubs)
    for replace in (False, True):
        counts = np.zeros(d)
        for step in range(steps):
            pos = neighbor_choice(indptr, t, fanout, seed=12345, step=step, num_nodes=hubs, replace=replace)
            local = (pos - indptr[t][:, None]).numpy()
            if not replace:
                assert all(len(set(row)) == fanout for row in local)
            counts += np.bincount(local.ravel(), minlength=d)
        chi2_ok(counts, np.full(d, hubs * steps * fanout / d))


@pytest.mark.parametrize("d,fanout", [(5, 3), (6, 5), (4, 1)])
def test_uniform_subsets_low_degree(d, fanout):
    """Without replacement every fanout-subset of a low-degree node is equally likely."""
    nodes, steps = 2000, 5
    indptr = csr_from_degrees([d] * nodes)
    t = torch.arange(nodes)
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(d), fanout))}
    counts = np.zeros(len(subsets))
    for step in range(steps):
        local = (neighbor_choice(indptr, t, fanout, seed=7, step=step, num_nodes=nodes) - indptr[t][:, None])
        for row in local.tolist():
            counts[subsets[tuple(sorted(row))]] += 1
    chi2_ok(counts, np.full(len(subsets), nodes * steps / len(subsets)))


def test_uniform_with_replacement_pairs_independent():
    """With replacement, (slot 0, slot 1) is uniform over d*d pairs."""
    d, nodes, steps = 7, 3000, 4
    indptr = csr_from_degrees([d] * nodes)
    t = torch.arange(nodes)
    counts = np.zeros(d * d)
    for step in range(steps):
        local = (neighbor_choice(indptr, t, 4, seed=3, step=step, num_nodes=nodes, replace=True)
                 - indptr[t][:, None]).numpy()
        counts += np.bincount(local[:, 0] * d + local[:, 1], minlength=d * d)
    chi2_ok(counts, np.full(d * d, nodes * steps / (d * d)))


# ------------------------------------------------------------------------------ weighted
def weighted_setup(weights, nodes):
    """`nodes` copies of a node with the given in-edge weights; eids shuffled so prob order matters."""
    d = len(weights)
    indptr = csr_from_degrees([d] * nodes)
    eids = torch.randperm(d * nodes, generator=torch.Generator().manual_seed(0))
    prob = torch.empty(d * nodes)
    prob[eids] = torch.tensor(weights, dtype=torch.float32).repeat(nodes)
    return indptr, eids, prob


def test_weighted_with_replacement_matches_weights():
    w = [1.0, 0.0, 3.0, 0.5, 2.0, 0.0, 4.5]
    nodes, fanout, steps = 2000, 5, 3
    indptr, eids, prob = weighted_setup(w, nodes)
    t = torch.arange(nodes)
    counts = np.zeros(len(w))
    for step in range(steps):
        pos = weighted_neighbor_choice(indptr, eids, prob, t, fanout, seed=11, step=step, num_nodes=nodes,
                                       replace=True)
        assert (pos >= 0).all()
        counts += np.bincount((pos - indptr[t][:, None]).numpy().ravel(), minlength=len(w))
    assert counts[1] == 0 and counts[5] == 0  # zero weight: never chosen
    pos_w = np.array([x for x in w if x > 0])
    chi2_ok(counts[np.array(w) > 0], pos_w / pos_w.sum() * nodes * fanout * steps)


def successive_sampling_probs(w, k):
    """Exact probability of each ordered k-draw without replacement, proportional to weight."""
    out = {}
    for seq in itertools.permutations([i for i, x in enumerate(w) if x > 0], k):
        p, left = 1.0, sum(w)
        for i in seq:
            p *= w[i] / left
            left -= w[i]
        out[seq] = p
    return out


def test_weighted_without_replacement_exact_inclusion():
    """Slot order = successive weighted draws: check the first draw and the chosen set exactly."""
    w = [1.0, 2.0, 3.0, 4.0, 0.0]
    nodes, fanout, steps = 4000, 2, 3
    indptr, eids, prob = weighted_setup(w, nodes)
    t = torch.arange(nodes)
    seqs = successive_sampling_probs(w, fanout)
    sets = {}
    for seq, p in seqs.items():
        sets[frozenset(seq)] = sets.get(frozenset(seq), 0.0) + p
    first, set_counts = np.zeros(len(w)), dict.fromkeys(sets, 0)
    for step in range(steps):
        local = (weighted_neighbor_choice(indptr, eids, prob, t, fanout, seed=5, step=step, num_nodes=nodes)
                 - indptr[t][:, None]).numpy()
        assert (local[:, 0] != local[:, 1]).all()
        first += np.bincount(local[:, 0], minlength=len(w))
        for row in local.tolist():
            set_counts[frozenset(row)] += 1
    total = nodes * steps
    assert first[4] == 0
    chi2_ok(first[:4], np.array(w[:4]) / sum(w) * total)
    chi2_ok([set_counts[s] for s in sets], [sets[s] * total for s in sets])


def test_weighted_few_positive_and_hub():
    # rows with <= fanout positive weights: exactly the positive-weight neighbours, in CSR order
    indptr = csr_from_degrees([4, 3, 0])
    eids = torch.arange(7)
    prob = torch.tensor([0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0])
    for replace in (False, True):
        got = weighted_neighbor_choice(indptr, eids, prob, torch.tensor([0, 1, 2]), 3, seed=1, step=0,
                                       num_nodes=3, replace=replace)
        assert got[1:].eq(-1).all()
        if replace:
            assert set(got[0].tolist()) <= {1, 3}
        else:
            assert got[0].tolist() == [1, 3, -1]
    # hub of degree 1200 with linear weights: without replacement, heavier edges included more often
    d = 1200
    indptr = csr_from_degrees([d] * 50)
    eids = torch.arange(d * 50)
    prob = torch.arange(1, d + 1, dtype=torch.float32).repeat(50)
    pos = weighted_neighbor_choice(indptr, eids, prob, torch.arange(50), 20, seed=2, step=0, num_nodes=50)
    local = (pos - indptr[:-1][:, None]).numpy()
    assert all(len(set(r)) == 20 for r in local)
    low, high = (local < d // 2).sum(), (local >= d // 2).sum()
    assert high > 2 * low  # expected ratio ~3:1 for tiny fanout/degree


# ------------------------------------------------------------------------------ sampler: exact properties
def _check_blocks(g, seeds, blocks, fanouts, replace):
    src_g, dst_g = g.edges()
    deg = g.in_degrees()
    nid_dst = seeds
    for block, fanout in zip(reversed(blocks), reversed(fanouts)):
        assert torch.equal(block.dstdata[dgl.NID], nid_dst)
        src_ids, dst_ids = block.srcdata[dgl.NID], block.dstdata[dgl.NID]
        assert torch.equal(src_ids[:block.num_dst_nodes()], dst_ids)  # dst nodes first
        assert len(set(src_ids.tolist())) == len(src_ids)
        bs, bd = block.edges()
        eid = block.edata[dgl.EID].long()
        # every sampled edge is a real in-edge: eid maps back to (src, dst)
        assert torch.equal(src_g[eid], src_ids[bs.long()]) and torch.equal(dst_g[eid], dst_ids[bd.long()])
        cnt = torch.bincount(bd.long(), minlength=block.num_dst_nodes())
        d = deg[dst_ids.long()]
        if fanout == -1:
            assert torch.equal(cnt, d)
        elif replace:
            assert torch.equal(cnt, torch.where(d > 0, fanout, 0))
        else:
            assert torch.equal(cnt, d.clamp(max=fanout))
            pairs = bd.long() * g.num_edges() + eid
            assert len(pairs.unique()) == len(pairs)  # no duplicates without replacement
        nid_dst = src_ids
    return True


@given(g=graphs(min_nodes=1, max_nodes=64, max_edges=300), fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5]),
       min_size=1, max_size=3), replace=st.booleans(), seed=st.integers(0, 2**64 - 1), frac=st.floats(0.05, 1))
def test_sampler_blocks_exact(g, fanouts, replace, seed, frac):
    n = g.num_nodes()
    seeds = torch.randperm(n, generator=torch.Generator().manual_seed(seed % 1000))[:max(1, int(n * frac))]
    seeds = seeds.to(g.idtype)
    inp, out, blocks = NeighborSampler(fanouts, replace=replace, seed=seed).sample_blocks(g, seeds)
    assert len(blocks) == len(fanouts) and torch.equal(out, seeds)
    assert torch.equal(inp, blocks[0].srcdata[dgl.NID])
    assert all(b.idtype == g.idtype for b in blocks)
    _check_blocks(g, seeds, blocks, fanouts, replace)


@given(g=graphs(min_nodes=1, max_nodes=64, max_edges=300), fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5]),
       min_size=1, max_size=3), replace=st.booleans(), seed=st.integers(0, 2**64 - 1), weighted=st.booleans())
def test_dgl_free_sample_neighbors_is_each_block(g, fanouts, replace, seed, weighted):
    """Each block of NeighborSampler holds exactly the edges of the DGL-free entry
    ``core.sampling.neighbor.sample.sample_neighbors`` on ``in_csr(g)`` for its layer (key = the call seed,
    step = the layer counted from the output), frontier = the next block's sources."""
    from dgl_accel.core.sampling.neighbor.sample import sample_neighbors
    from dgl_accel.core.sampling.rng import call_seed

    if weighted:
        g.edata["p"] = torch.rand(g.num_edges(), generator=torch.Generator().manual_seed(seed % 97)).round()
    seeds = torch.arange(0, g.num_nodes(), 3, dtype=g.idtype)
    _, _, blocks = NeighborSampler(fanouts, replace=replace, seed=seed,
                                   prob="p" if weighted else None).sample_blocks(g, seeds)
    csr, key = in_csr(g), call_seed(seed, 0)
    for step, b in enumerate(reversed(blocks)):
        frontier = b.dstdata[dgl.NID]
        src, dst, eids = sample_neighbors(csr, frontier, fanouts[-1 - step], seed=key, replace=replace, step=step,
                                          prob=g.edata["p"] if weighted else None)
        bs, bd = b.edges(order="eid")
        assert torch.equal(b.srcdata[dgl.NID][bs.long()], src) and torch.equal(frontier[bd.long()], dst)
        assert torch.equal(b.edata[dgl.EID], eids)


def _hub_graph(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    src = np.concatenate([rng.integers(0, n, 20000), rng.integers(0, n, 1500)])
    dst = np.concatenate([rng.integers(0, n, 20000), np.zeros(1500, dtype=np.int64)])  # node 0: hub
    return dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)


def test_sampler_real_graph_with_hub_and_prob():
    g = _hub_graph()
    seeds = torch.cat([torch.tensor([0]), torch.randperm(2999, generator=torch.Generator().manual_seed(1))[:300] + 1])
    for replace in (False, True):
        _, _, blocks = NeighborSampler([4, 10], replace=replace, seed=1).sample_blocks(g, seeds)
        _check_blocks(g, seeds, blocks, [4, 10], replace)
    g.edata["w"] = (torch.rand(g.num_edges(), generator=torch.Generator().manual_seed(3)) > 0.3).float()
    _, _, blocks = NeighborSampler([4, 10], prob="w", seed=1).sample_blocks(g, seeds)
    for b in blocks:
        assert (g.edata["w"][b.edata[dgl.EID].long()] > 0).all()  # zero-weight edges never sampled
    # per dst: min(#positive in-edges, fanout)
    b = blocks[-1]
    pos_deg = torch.zeros(g.num_nodes()).index_add_(0, g.edges()[1], g.edata["w"]).long()
    cnt = torch.bincount(b.edges()[1].long(), minlength=b.num_dst_nodes())
    assert torch.equal(cnt, pos_deg[seeds].clamp(max=10))


@pytest.mark.parametrize("replace", [False, True])
def test_mask_picks_only_true_edges_uniformly(replace):
    """DGL's ``mask=``: only edges whose mask is True can be picked, uniformly among them; the same
    blocks as ``prob=`` on the mask, and DGL's rule that the two exclude each other."""
    g = _hub_graph()
    g.edata["m"] = torch.rand(g.num_edges(), generator=torch.Generator().manual_seed(4)) > 0.5
    seeds = torch.arange(0, 3000, 5)
    _, _, blocks = NeighborSampler([4, 10], mask="m", replace=replace, seed=2).sample_blocks(g, seeds)
    for b in blocks:
        assert b.num_edges() > 0 and bool(g.edata["m"][b.edata[dgl.EID].long()].all())
    true_deg = torch.zeros(g.num_nodes(), dtype=torch.int64).index_add_(0, g.edges()[1], g.edata["m"].long())
    cnt = torch.bincount(blocks[-1].edges()[1].long(), minlength=seeds.numel())
    want = torch.where(true_deg[seeds] > 0, torch.full_like(cnt, 10), 0) if replace else true_deg[seeds].clamp(max=10)
    assert torch.equal(cnt, want)
    # the same draw as prob= on the 0/1 weights (the mask is read as weights, as in DGL)
    g.edata["p"] = g.edata["m"].float()
    _, _, by_prob = NeighborSampler([4, 10], prob="p", replace=replace, seed=2).sample_blocks(g, seeds)
    assert all(torch.equal(a.edata[dgl.EID], b.edata[dgl.EID]) for a, b in zip(blocks, by_prob))
    # uniform among the True in-edges: node 0 has 20 in-edges, 10 of them True
    star = dgl.graph((torch.arange(1, 21), torch.zeros(20, dtype=torch.int64)))
    star.edata["m"] = torch.arange(20) % 2 == 0
    s = NeighborSampler([3], mask="m", replace=replace, seed=5)
    picks = torch.cat([s.sample_blocks(star, torch.tensor([0]))[2][0].edata[dgl.EID] for _ in range(1000)])
    counts = torch.bincount(picks.long(), minlength=20).numpy()
    assert counts[1::2].sum() == 0
    chi2_ok(counts[::2], np.full(10, 300.0))


def test_same_seed_same_blocks_different_seed_differ():
    g = _hub_graph()
    seeds = torch.arange(0, 3000, 7)

    def run(seed, calls=2):
        s = NeighborSampler([5, 5], seed=seed)
        return [s.sample_blocks(g, seeds)[2] for _ in range(calls)]

    def eids(blocks):
        return [b.edata[dgl.EID] for b in blocks]

    a, b, c = run(42), run(42), run(43)
    for x, y in zip(a, b):
        assert all(torch.equal(p, q) for p, q in zip(eids(x), eids(y)))
        assert all(torch.equal(p.srcdata[dgl.NID], q.srcdata[dgl.NID]) for p, q in zip(x, y))
    assert not torch.equal(eids(a[0])[1], eids(c[0])[1])
    assert not torch.equal(eids(a[0])[1], eids(a[1])[1])  # consecutive calls differ
    torch.manual_seed(0)
    s1 = NeighborSampler([5])
    torch.manual_seed(0)
    s2 = NeighborSampler([5])
    assert s1.seed == s2.seed


def test_blocks_match_dgl_structure():
    """With fanout -1 both samplers must produce the same edge sets per destination."""
    g = _hub_graph()
    seeds = torch.arange(0, 3000, 11)
    _, _, ours = NeighborSampler([-1, -1], seed=0).sample_blocks(g, seeds)
    _, _, theirs = dgl.dataloading.NeighborSampler([-1, -1]).sample_blocks(g, seeds)
    assert torch.equal(ours[-1].dstdata[dgl.NID], theirs[-1].dstdata[dgl.NID])
    for a, b in zip(ours, theirs):  # non-seed sources may be ordered differently (both valid)
        assert torch.equal(a.dstdata[dgl.NID].sort()[0], b.dstdata[dgl.NID].sort()[0])
        assert torch.equal(a.srcdata[dgl.NID].sort()[0], b.srcdata[dgl.NID].sort()[0])
        assert torch.equal(a.edata[dgl.EID].sort()[0], b.edata[dgl.EID].sort()[0])


# ------------------------------------------------------------------------------ DataLoader integration
@pytest.fixture(scope="module")
def feat_graph():
    g = _hub_graph(2000, seed=5)
    gen = torch.Generator().manual_seed(0)
    g.ndata["feat"] = torch.randn(g.num_nodes(), 8, generator=gen)
    g.ndata["label"] = torch.randint(0, 4, (g.num_nodes(),), generator=gen)
    g.edata["ew"] = torch.rand(g.num_edges(), generator=gen)
    return g


def test_dataloader_chain_and_prefetch(feat_graph):
    g = feat_graph
    train = torch.arange(0, 2000, 3)
    sampler = NeighborSampler([5, 5], prefetch_node_feats=["feat"], prefetch_labels=["label"],
                              prefetch_edge_feats=["ew"], seed=0)
    dl = dgl.dataloading.DataLoader(g, train, sampler, batch_size=128, shuffle=True)
    seen = []
    for input_nodes, output_nodes, blocks in dl:
        seen.append(output_nodes)
        assert len(blocks) == 2
        for i in range(len(blocks) - 1):
            nd = blocks[i].num_dst_nodes()
            assert torch.equal(blocks[i].dstdata[dgl.NID], blocks[i + 1].srcdata[dgl.NID][:nd])
        assert torch.equal(blocks[0].srcdata["feat"], g.ndata["feat"][input_nodes])
        assert torch.equal(blocks[-1].dstdata["label"], g.ndata["label"][output_nodes])
        for b in blocks:
            assert torch.equal(b.edata["ew"], g.edata["ew"][b.edata[dgl.EID]])
    assert torch.equal(torch.cat(seen).sort()[0], train)


def test_output_device(feat_graph):
    sampler = NeighborSampler([3, 3], output_device="cpu", seed=0)
    inp, _, blocks = sampler.sample_blocks(feat_graph, torch.arange(10))
    assert inp.device.type == "cpu" and all(b.device.type == "cpu" for b in blocks)
    dl = dgl.dataloading.DataLoader(feat_graph, torch.arange(64), sampler, batch_size=32, device="cpu")
    assert all(b.device.type == "cpu" for _, _, bs in dl for b in bs)


def test_edge_prediction_wrapping_excludes_edges(feat_graph):
    g = feat_graph
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        NeighborSampler([-1, 5], seed=0), exclude="self",
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(2))
    train_eids = torch.arange(0, g.num_edges(), 5)
    dl = dgl.dataloading.DataLoader(g, train_eids, sampler, batch_size=256, shuffle=True)
    for i, (_input_nodes, pos_g, neg_g, blocks) in enumerate(dl):
        batch_eids = pos_g.edata[dgl.EID]
        for b in blocks:
            assert not torch.isin(b.edata[dgl.EID], batch_eids).any()
        # every pair graph node is an output node of the last block
        assert torch.equal(pos_g.ndata[dgl.NID], blocks[-1].dstdata[dgl.NID])
        assert neg_g.num_edges() == 2 * pos_g.num_edges()
        if i == 3:
            break


# ------------------------------------------------------------------------------ errors
def test_bad_inputs(feat_graph):
    g = feat_graph
    with pytest.raises(ValueError, match="non-empty list"):
        NeighborSampler([])
    with pytest.raises(ValueError, match=r"fanouts\[1\].*-1 for all"):
        NeighborSampler([5, -2])
    with pytest.raises(ValueError, match="edge_dir"):
        NeighborSampler([5], edge_dir="out")
    with pytest.raises(ValueError, match=r"seed.*2\^64"):
        NeighborSampler([5], seed=-1)
    with pytest.raises(ValueError, match=r"seed nodes in \[0, 2000\)"):
        NeighborSampler([5], seed=0).sample_blocks(g, torch.tensor([0, 2000]))
    with pytest.raises(ValueError, match="1-D integer"):
        NeighborSampler([5], seed=0).sample_blocks(g, torch.tensor([0.5]))
    with pytest.raises(ValueError, match="prob field"):
        NeighborSampler([5], prob="nope", seed=0).sample_blocks(g, torch.arange(5))
    h = g.clone()
    h.edata["p"] = -torch.ones(h.num_edges())
    with pytest.raises(ValueError, match="non-negative.*Fix"):
        NeighborSampler([5], prob="p", seed=0).sample_blocks(h, torch.arange(5))
    h.edata["p"] = torch.full((h.num_edges(),), float("nan"))
    with pytest.raises(ValueError, match="finite"):
        NeighborSampler([5], prob="p", seed=0).sample_blocks(h, torch.arange(5))
    csr = in_csr(g)
    with pytest.raises(ValueError, match="one value per edge"):
        weighted_neighbor_choice(csr.indptr, csr.eids, torch.ones(3), torch.arange(3), 2, seed=0, step=0,
                                 num_nodes=g.num_nodes())
    with pytest.raises(ValueError, match="fanout"):
        neighbor_choice(csr.indptr, torch.arange(3), -3, seed=0, step=0, num_nodes=g.num_nodes())
    with pytest.raises(ValueError, match="transit nodes"):
        neighbor_choice(csr.indptr, torch.tensor([-1]), 2, seed=0, step=0, num_nodes=g.num_nodes())
    with pytest.raises(ValueError, match="seed"):
        neighbor_choice(csr.indptr, torch.arange(3), 2, seed=2**64, step=0, num_nodes=g.num_nodes())
    hg = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0])})
    with pytest.raises(ValueError, match=r"expected seed nodes as a dict \{ntype: ids\} on a heterograph.*Fix: pass"):
        NeighborSampler([5], seed=0).sample_blocks(hg, torch.tensor([0]))


# ------------------------------------------------------------------------------ GraphSAGE accuracy
def _coauthor_cs():
    g = load_coauthor_cs()
    if g is None:
        pytest.skip("graphdata_coauthor_cs not available (datasets_root() is None or file missing)")
    return g


@pytest.mark.slow  # over 2 s on 2 cores: the quick lane (scripts/test.sh --quick) leaves it out
def test_graphsage_accuracy_matches_dgl_sampler():
    g = _coauthor_cs()
    train, _, test = split(g.ndata["label"].numpy(), seed=0)
    ours, theirs = [], []
    for seed in range(6):  # 3 seeds left a ~1-point spread in the mean; 6 measured 0.842 vs 0.841
        ours.append(train_eval(g, train, test, lambda s: NeighborSampler([10, 10], seed=s), seed))
        theirs.append(train_eval(g, train, test, lambda s: dgl.dataloading.NeighborSampler([10, 10]), seed))
    ours_m, theirs_m = float(np.mean(ours)), float(np.mean(theirs))
    assert ours_m > 0.8, (ours, theirs)
    # Each side's accuracy spreads ~1 point across seeds (DGL's sampler draws from its own
    # threads' streams), so a fixed 1-point bound on the difference of the means failed about
    # one run in ten (CI: 0.840 vs 0.829). The bound is three standard errors of that
    # difference, and never under 1 point. It guards against a sampler that trains badly, not
    # small biases: fanouts [1, 1] for ours lose 1.5 points and pass (3 se was 3.7 points then);
    # the blocks themselves are checked against DGL's definitions by the tests above.
    se = float(np.sqrt(np.var(ours, ddof=1) / len(ours) + np.var(theirs, ddof=1) / len(theirs)))
    assert abs(ours_m - theirs_m) <= max(0.01, 3 * se), (ours, theirs, se)


@pytest.mark.interpreter
def test_triton_path_gives_the_same_blocks_as_the_native_path():
    import dgl_accel

    """Uniform, weighted (``prob``) and masked choice: the device pipeline's blocks are the CPU's."""
    g = dgl.rand_graph(300, 3000)
    g.edata["p"] = torch.rand(3000) * (torch.rand(3000) > 0.3)
    g.edata["m"] = torch.rand(3000) > 0.5
    seeds = torch.arange(0, 300, 3)
    blocks = {}
    kinds = [dict(), dict(prob="p"), dict(mask="m")]
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            dgl_accel.reset_stats()
            for replace in (False, True):
                for k, kw in enumerate(kinds):
                    sampler = NeighborSampler([4, 3], replace=replace, seed=11, **kw)
                    blocks[(name, replace, k)] = sampler.sample_blocks(g, seeds)[2]
            if name == "triton":
                assert dgl_accel.stats()["neighbor_choice"] == {"triton-interpreter": 4 * len(kinds)}
    for key in blocks:
        for a, b in zip(blocks[("native",) + key[1:]], blocks[key]):
            assert torch.equal(a.srcdata[dgl.NID], b.srcdata[dgl.NID])
            assert torch.equal(a.edata[dgl.EID], b.edata[dgl.EID])
    for a in blocks[("triton", False, 2)]:
        assert bool(g.edata["m"][a.edata[dgl.EID]].all())  # masked-out edges never sampled


@pytest.mark.parametrize("fanouts", [[-1, -1], [3, 2]])
def test_duplicated_seeds_are_kept_as_dgl_keeps_them(fanouts):
    """DGL's NeighborSampler neither rejects nor merges repeated seeds: each copy is a destination
    node of its own, with its own in-edges.  Ours gives the same block layout."""
    g = _hub_graph(n=300)
    seeds = torch.tensor([7, 3, 7, 11, 3])
    _, out_ours, ours = NeighborSampler(fanouts, seed=0).sample_blocks(g, seeds)
    _, out_dgl, theirs = dgl.dataloading.NeighborSampler(fanouts).sample_blocks(g, seeds)
    assert torch.equal(out_ours, seeds) and torch.equal(out_dgl, seeds)
    assert torch.equal(ours[-1].dstdata[dgl.NID], theirs[-1].dstdata[dgl.NID])  # duplicates kept, in order
    for a, b in zip(ours, theirs):
        assert torch.equal(a.dstdata[dgl.NID][:len(seeds)], seeds) and torch.equal(b.dstdata[dgl.NID][:len(seeds)], seeds)
        assert torch.equal(a.srcdata[dgl.NID][:a.num_dst_nodes()], a.dstdata[dgl.NID])
        if fanouts == [-1, -1]:  # non-seed nodes may be ordered differently (both valid)
            assert torch.equal(a.dstdata[dgl.NID].sort()[0], b.dstdata[dgl.NID].sort()[0])
            assert torch.equal(a.edata[dgl.EID].sort()[0], b.edata[dgl.EID].sort()[0])
        src, dst = a.edges()
        orig_src, orig_dst = g.find_edges(a.edata[dgl.EID])
        assert torch.equal(a.srcdata[dgl.NID][src], orig_src) and torch.equal(a.dstdata[dgl.NID][dst], orig_dst)
    last = ours[-1]
    for i, j in ((0, 2), (1, 4)):  # the two copies of 7 and of 3 each get their own edges
        assert last.in_degrees(i) == last.in_degrees(j) > 0


def test_blocks_built_from_device_arrays_equal_the_cpu_blocks():
    """The adapter's conversion for a CUDA graph (the arrays stay on their device) gives the blocks
    of its CPU conversion: run here on CPU tensors."""
    from dgl_accel.core.sampling.neighbor.sample import sample_layers
    from dgl_accel.graph import in_csr
    from dgl_accel.sampling.blocks import blocks_from_output, device_block

    g = dgl.rand_graph(120, 900)
    out = sample_layers(in_csr(g), torch.tensor([5, 9, 77, 3]), [3, 2], seed=4)
    conv = dgl.nn.GraphConv(4, 2, allow_zero_in_degree=True)
    for layer, cpu_block in zip(out.layers, blocks_from_output(out, g.idtype)):
        block = device_block(layer, g.idtype)
        assert (block.num_src_nodes(), block.num_dst_nodes()) == (cpu_block.num_src_nodes(), cpu_block.num_dst_nodes())
        for a, b in ((block.srcdata[dgl.NID], cpu_block.srcdata[dgl.NID]), (block.edata[dgl.EID], cpu_block.edata[dgl.EID]),
                     (block.edges()[0], cpu_block.edges()[0]), (block.edges()[1], cpu_block.edges()[1])):
            assert a.dtype == b.dtype and torch.equal(a, b)
        x = torch.randn(block.num_src_nodes(), 4)
        assert torch.allclose(conv(block, x), conv(cpu_block, x))
