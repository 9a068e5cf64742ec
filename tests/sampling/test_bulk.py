"""Matrix-based bulk sampling (GraphSAGE and LADIES): exact ITS spec on every path, distributions,
independence of minibatches in one bulk, block rules, DGL DataLoader integration, bad input.

Statistical tests use fixed seeds, so they are deterministic; each chi-square test rejects at
p < 1e-3, i.e. a correct sampler would fail a given test with probability 0.1% over seed choices
(9 such tests here: about 1% that some test of this file needed another seed).
"""
import itertools
import math
import threading

import dgl
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dgl_accel
from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.bulk.matrix import local_spgemm
from dgl_accel.sampling import BulkNeighborSampler, LADIESSampler, NeighborSampler
from dgl_accel.sampling.bulk_matrix import estimate_p_bytes
from dgl_accel.sampling.layer import edge_norm, ladies_probabilities
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.strategies import graphs

ALPHA = 1e-3


def _hub_graph(hubs=50, deg=6):
    """Hubs 0..hubs-1; hub h's in-neighbours are hubs + h * deg + j, j = 0..deg-1 (its local index)."""
    src = torch.arange(hubs, hubs + hubs * deg)
    dst = torch.arange(hubs).repeat_interleave(deg)
    return dgl.graph((src, dst), num_nodes=hubs + hubs * deg)


def _local_subsets(block, hubs, deg):
    """Per dst hub of the block: the sorted tuple of its sampled neighbours' local indices."""
    u, v = (x.long() for x in block.edges())
    hub = block.dstdata[dgl.NID].long()[v]
    local = block.srcdata[dgl.NID].long()[u] - hubs - hub * deg
    out = [[] for _ in range(block.num_dst_nodes())]
    for j, loc in zip(v.tolist(), local.tolist()):
        out[j].append(loc)
    return [tuple(sorted(x)) for x in out]


def _same_blocks(a, b):
    for x, y in zip(a, b):
        assert torch.equal(x.srcdata[dgl.NID], y.srcdata[dgl.NID])
        assert torch.equal(x.dstdata[dgl.NID], y.dstdata[dgl.NID])
        assert torch.equal(x.edata[dgl.EID], y.edata[dgl.EID])
        assert all(torch.equal(p, q) for p, q in zip(x.edges(), y.edges()))


# ------------------------------------------------------------------------------ GraphSAGE
def _counts(subsets):
    counts = {}
    for key in subsets:
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("replace", [False, True])
def test_hub_neighbour_distribution_matches_nodewise(replace):
    hubs, deg, fanout, rounds = 50, 6, 2, 30  # 1500 independent subsets per sampler
    g = _hub_graph(hubs, deg)
    seeds = torch.arange(hubs)
    bulk = BulkNeighborSampler([fanout], bulk=rounds, replace=replace, seed=3)
    node = NeighborSampler([fanout], replace=replace, seed=3)
    ours = _counts(x for r in bulk.bulk_sample(g, [seeds] * rounds) for x in _local_subsets(r[2][0], hubs, deg))
    theirs = _counts(x for _ in range(rounds) for x in _local_subsets(node.sample_blocks(g, seeds)[2][0], hubs, deg))
    keys = sorted(set(ours) | set(theirs))
    if not replace:  # every 2-subset equally likely: C(6, 2) = 15 cells
        assert len(keys) == math.comb(deg, fanout)
        assert stats.chisquare([ours.get(k, 0) for k in keys]).pvalue > ALPHA
    table = np.array([[ours.get(k, 0) for k in keys], [theirs.get(k, 0) for k in keys]])
    assert stats.chi2_contingency(table)[1] > ALPHA  # same law as the node-wise sampler


def test_same_batch_twice_in_one_bulk_is_independent():
    hubs, deg, fanout, pairs = 50, 4, 2, 24  # 1200 pairs of subsets
    g = _hub_graph(hubs, deg)
    res = BulkNeighborSampler([fanout], bulk=2 * pairs, seed=11).bulk_sample(g, [torch.arange(hubs)] * (2 * pairs))
    subsets = list(itertools.combinations(range(deg), fanout))
    idx = np.array([[subsets.index(x) for x in _local_subsets(r[2][0], hubs, deg)] for r in res])
    a, b = idx[0::2].reshape(-1), idx[1::2].reshape(-1)  # the same hub in the two copies of the batch
    table = np.zeros((len(subsets), len(subsets)))
    np.add.at(table, (a, b), 1)
    # joint frequencies = product of the marginals (6 x 6 contingency table), marginals uniform
    assert stats.chi2_contingency(table)[1] > ALPHA
    assert stats.chisquare(np.bincount(a, minlength=6)).pvalue > ALPHA
    assert (a == b).mean() < 0.3  # identical keys would make every pair equal; independent: 1/6


def test_bulk_result_independent_of_k_and_of_spgemm():
    g = dgl.rand_graph(300, 3000)
    batches = [torch.arange(0, 300, 7), torch.arange(5, 300, 11), torch.arange(0, 300, 7), torch.arange(1, 40)]
    ref = BulkNeighborSampler([4, 3], bulk=4, seed=1).bulk_sample(g, batches)

    def shuffled_coo(Q, A):  # a product returned in another layout, entry order and duplicates split
        P = local_spgemm(Q, A).to_sparse_coo().coalesce()
        i, v = P.indices(), P.values()
        perm = torch.randperm(v.numel(), generator=torch.Generator().manual_seed(0))
        i = torch.cat([i[:, perm], i[:, :3]], 1)
        v = torch.cat([v[perm], torch.zeros(3)])
        return torch.sparse_coo_tensor(i, v, P.shape)

    for kwargs in ({"bulk": 1}, {"bulk": 3}, {"bulk": 2, "spgemm": local_spgemm}, {"bulk": 4, "spgemm": shuffled_coo}):
        other = BulkNeighborSampler([4, 3], seed=1, **kwargs).bulk_sample(g, batches)
        for r, o in zip(ref, other):
            _same_blocks(r[2], o[2])
    # sequential sample_blocks calls = minibatch indices 0, 1, 2, ... as in the bulk
    seq = BulkNeighborSampler([4, 3], bulk=1, seed=1, lookahead=False)
    for r, b in zip(ref, batches):
        _same_blocks(r[2], seq.sample_blocks(g, b)[2])
    assert not torch.equal(ref[0][2][1].edata[dgl.EID], ref[2][2][1].edata[dgl.EID])


@settings(max_examples=25, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=40, max_edges=200), fanouts=st.sampled_from([[3], [2, 4], [-1, 2]]),
       replace=st.booleans(), seed=st.integers(0, 2**32))
def test_blocks_follow_sampling_and_dgl_rules(g, fanouts, replace, seed):
    n = g.num_nodes()
    batches = [torch.arange(0, n, 2), torch.arange(n - 1, -1, -3)]
    res = BulkNeighborSampler(fanouts, bulk=2, replace=replace, seed=seed).bulk_sample(g, batches)
    src_g, dst_g = (x.long() for x in g.edges(order="eid"))
    for seeds, (inp, out, blocks) in zip(batches, res):
        assert torch.equal(out, seeds) and torch.equal(inp, blocks[0].srcdata[dgl.NID])
        for i, b in enumerate(blocks):
            assert b.is_block and b.num_dst_nodes() <= b.num_src_nodes()
            dst_ids, src_ids = b.dstdata[dgl.NID].long(), b.srcdata[dgl.NID].long()
            assert torch.equal(src_ids[:b.num_dst_nodes()], dst_ids)  # DGL's to_block convention
            assert torch.unique(src_ids).numel() == src_ids.numel()
            if i + 1 < len(blocks):
                assert torch.equal(blocks[i + 1].srcdata[dgl.NID], dst_ids)
            u, v = (x.long() for x in b.edges())
            eid = b.edata[dgl.EID].long()
            assert torch.equal(src_g[eid], src_ids[u]) and torch.equal(dst_g[eid], dst_ids[v])  # real edges
            # DGL's own to_block of the sampled frontier: same dst, same source set, same edges
            ref = dgl.to_block(dgl.graph((src_ids[u], dst_ids[v]), num_nodes=n), dst_ids)
            assert torch.equal(ref.dstdata[dgl.NID].long(), dst_ids)
            assert torch.equal(torch.sort(ref.srcdata[dgl.NID].long()).values, torch.sort(src_ids).values)
            assert ref.num_edges() == b.num_edges()
            fan = fanouts[i]
            for j in range(b.num_dst_nodes()):
                nb = src_ids[u[v == j]]
                distinct = torch.unique(src_g[dst_g == dst_ids[j]]).numel()
                if replace and fan != -1:
                    assert nb.numel() == (fan if distinct else 0)
                else:
                    assert torch.unique(nb).numel() == nb.numel() == (distinct if fan == -1 else min(distinct, fan))
            if i == 0:  # only sources that carry an edge, besides the dst nodes (empty columns dropped)
                used = torch.unique(u)
                extra = src_ids.numel() - b.num_dst_nodes()
                assert extra == int((used >= b.num_dst_nodes()).sum())


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
def test_compiled_extraction_matches_numpy_blocks(monkeypatch):
    g = dgl.rand_graph(3000, 60000)
    batches = [torch.randperm(3000, generator=torch.Generator().manual_seed(i))[:300] for i in range(3)]
    fast = BulkNeighborSampler([6, 4], bulk=3, seed=8).bulk_sample(g, batches)  # compiled ITS + extraction
    monkeypatch.setattr(runtime, "MIN_WORK", 10**12)  # numpy ITS + relabel_block per minibatch
    ref = BulkNeighborSampler([6, 4], bulk=3, seed=8).bulk_sample(g, batches)
    for r, f in zip(ref, fast):
        _same_blocks(r[2], f[2])


def test_dgl_dataloader_bulks_and_matches_unbulked(monkeypatch):
    g = dgl.rand_graph(500, 5000)
    passes = []
    orig = BulkNeighborSampler._sample_bulk

    def spy(self, g_, batches, first, excl):
        passes.append(len(batches))
        return orig(self, g_, batches, first, excl)

    monkeypatch.setattr(BulkNeighborSampler, "_sample_bulk", spy)
    out = {}
    for look in (True, False):
        np.random.seed(0)  # DGL's TensorizedDataset shuffles with numpy's global generator
        dl = dgl.dataloading.DataLoader(g, torch.arange(500), BulkNeighborSampler([5, 5], bulk=4, seed=2,
                                                                                   lookahead=look),
                                        batch_size=64, shuffle=True)
        passes.clear()
        out[look] = [(o.clone(), blocks) for _, o, blocks in dl]
        assert passes == ([4, 4] if look else [1] * 8)  # 8 batches: 2 passes of k = 4
    for (oa, ba), (ob, bb) in zip(out[True], out[False]):
        assert torch.equal(oa, ob)
        _same_blocks(ba, bb)


def _loader_passes(g, sampler, **kw):
    """(output nodes, blocks) of every batch of one shuffled epoch of DGL's stock DataLoader."""
    np.random.seed(0)  # DGL's TensorizedDataset shuffles with numpy's global generator
    dl = dgl.dataloading.DataLoader(g, torch.arange(500), sampler, batch_size=64, shuffle=True, **kw)
    return [(o.clone(), blocks) for _, o, blocks in dl]


@pytest.fixture
def pass_sizes(monkeypatch, tmp_path):
    """Bulk sizes of the sampler's passes, in this process and in forked DataLoader workers."""
    log = tmp_path / "passes"
    orig = BulkNeighborSampler._sample_bulk

    def spy(self, g_, batches, first, excl):
        with open(log, "a") as f:
            f.write(f"{len(batches)}\n")
        return orig(self, g_, batches, first, excl)

    monkeypatch.setattr(BulkNeighborSampler, "_sample_bulk", spy)

    def read():
        sizes = [int(x) for x in log.read_text().split()] if log.exists() else []
        log.unlink(missing_ok=True)
        return sizes
    return read


def test_lookahead_is_a_reversible_hook_on_dgls_index_iterator(pass_sizes):
    """The sampler learns a stock DataLoader's upcoming batches through :mod:`dgl_accel.sampling.lookahead`
    (no frame walk): built with lookahead it hooks DGL's index iterator; with the hook removed the same
    loader gets one batch a pass, and the same blocks."""
    from dgl.dataloading.dataloader import _TensorizedDatasetIter

    from dgl_accel.sampling import lookahead
    g = dgl.rand_graph(500, 5000)
    was_installed = lookahead.installed()
    lookahead.remove()
    dgl_next = _TensorizedDatasetIter.__next__
    try:
        BulkNeighborSampler([5, 5], bulk=4, seed=2, lookahead=False)
        assert not lookahead.installed() and _TensorizedDatasetIter.__next__ is dgl_next
        sampler = BulkNeighborSampler([5, 5], bulk=4, seed=2)
        assert lookahead.installed() and _TensorizedDatasetIter.__next__ is not dgl_next
        hooked = _loader_passes(g, sampler)
        assert pass_sizes() == [4, 4]  # 8 batches: 2 passes of k = 4
        lookahead.remove()
        assert _TensorizedDatasetIter.__next__ is dgl_next
        sampler.reset()
        unhooked = _loader_passes(g, sampler)
        assert pass_sizes() == [1] * 8
        for (oa, ba), (ob, bb) in zip(hooked, unhooked, strict=True):
            assert torch.equal(oa, ob)
            _same_blocks(ba, bb)
    finally:
        (lookahead.install if was_installed else lookahead.remove)()


def test_lookahead_reads_the_loader_of_the_sampling_thread(pass_sizes):
    """DGL's prefetch thread fetches a batch and samples it in the same thread: the hook's record is
    per thread, so a loader iterated off the main thread bulks too, with the main thread's blocks."""
    g = dgl.rand_graph(500, 5000)
    main = _loader_passes(g, BulkNeighborSampler([5, 5], bulk=4, seed=2))
    assert pass_sizes() == [4, 4]
    box = {}
    thread = threading.Thread(target=lambda: box.update(out=_loader_passes(g, BulkNeighborSampler([5, 5], bulk=4,
                                                                                                   seed=2))))
    thread.start()
    thread.join()
    assert pass_sizes() == [4, 4]
    for (oa, ba), (ob, bb) in zip(main, box["out"], strict=True):
        assert torch.equal(oa, ob)
        _same_blocks(ba, bb)


@pytest.mark.parametrize("workers", quick_first([1, 2]))
def test_lookahead_in_dataloader_workers(pass_sizes, workers):
    """Forked workers inherit the hook: each bulks its own share of the epoch (8 batches, or 4 each
    of 2 workers), with the blocks an unbulked sampler gives in the same worker."""
    g = dgl.rand_graph(500, 5000)
    out = {}
    for look in (True, False):
        out[look] = _loader_passes(g, BulkNeighborSampler([5, 5], bulk=4, seed=2, lookahead=look),
                                   num_workers=workers, timeout=120)
        assert sorted(pass_sizes()) == ([4, 4] if look else [1] * 8)
    for (oa, ba), (ob, bb) in zip(out[True], out[False], strict=True):
        assert torch.equal(oa, ob)
        _same_blocks(ba, bb)


def test_plan_and_memory_budget():
    g = dgl.rand_graph(400, 4000)
    batches = list(torch.randperm(400, generator=torch.Generator().manual_seed(0)).split(50))
    s = BulkNeighborSampler([5, 5], bulk=8, seed=4, lookahead=False)
    s.plan(batches)
    planned = [s.sample_blocks(g, b) for b in batches]
    ref = BulkNeighborSampler([5, 5], bulk=8, seed=4).bulk_sample(g, batches)
    for p, r in zip(planned, ref):
        _same_blocks(p[2], r[2])
    per = estimate_p_bytes(g, 50, [5, 5])
    assert per > 0
    assert BulkNeighborSampler([5, 5], bulk=8, memory_budget=3 * per).bulk_size(g, 50) == 3
    assert BulkNeighborSampler([5, 5], bulk=8, memory_budget=1).bulk_size(g, 50) == 1
    assert BulkNeighborSampler([5, 5], bulk=2, memory_budget=10**12).bulk_size(g, 50) == 2


def test_triton_path_gives_the_same_blocks(path):
    g = dgl.rand_graph(200, 2000)
    batches = [torch.arange(0, 200, 3), torch.arange(1, 200, 5)]
    res = BulkNeighborSampler([3, 2], bulk=2, seed=5).bulk_sample(g, batches)
    with dgl_accel.use_backend("native"):
        ref = BulkNeighborSampler([3, 2], bulk=2, seed=5).bulk_sample(g, batches)
    for r, o in zip(ref, res):
        _same_blocks(r[2], o[2])
    if path == "triton":
        assert "triton-interpreter" in dgl_accel.stats()["bulk_its"]


@pytest.mark.interpreter
@pytest.mark.parametrize("exclude", quick_first([False, True]))
@pytest.mark.parametrize("parallel", quick_first([True, False]))
# 200 nodes and 2,000 edges: over 2 s on 2 cores under the interpreter (the slow cases); 40 nodes and 400 edges
# run the same code quickly (one case in the quick lane: parallel edges, no exclusion)
@pytest.mark.parametrize("n, m", quick_first([(40, 400), (200, 2000)]))
def test_without_spgemm_the_triton_path_is_the_device_pipeline_with_the_same_blocks(n, m, exclude, parallel):
    """No SpGEMM: the Triton path is the device pipeline (``core/sampling/bulk/neighbor_device.py``), whose
    blocks are the CPU path's, with parallel edges too (ITS's weighted rule over multiplicities)."""
    from dgl_accel.core.sampling.bulk import neighbor_device as bulk_device
    g = dgl.rand_graph(n, m) if parallel else dgl.to_simple(dgl.rand_graph(n, m))
    if parallel:  # every fifth edge three times
        s, d = g.edges()
        g = dgl.graph((torch.cat([s, s[::5], s[::5]]), torch.cat([d, d[::5], d[::5]])), num_nodes=n)
    batches = [torch.arange(0, n, 3), torch.arange(1, n, 5), torch.tensor([7])]
    excl = torch.arange(0, g.num_edges(), 4) if exclude else None
    runs = {}
    for name in ("native", "triton"):
        calls = []
        real = bulk_device.sample_bulk_device

        def spy(*a, _calls=calls, _real=real, **k):
            _calls.append(1)
            return _real(*a, **k)
        with dgl_accel.use_backend(name), pytest.MonkeyPatch.context() as mp:
            mp.setattr("dgl_accel.sampling.bulk.sample_bulk_device", spy)
            sampler = BulkNeighborSampler([4, 3, 2], bulk=3, seed=11, lookahead=False)
            if exclude:
                runs[name] = [sampler.sample_blocks(g, b, exclude_eids=excl)[2] for b in batches]
            else:
                runs[name] = [r[2] for r in sampler.bulk_sample(g, batches)]
        assert len(calls) == (0 if name == "native" else (len(batches) if exclude else 1))
    for ref, got in zip(runs["native"], runs["triton"]):
        _same_blocks(ref, got)


# ------------------------------------------------------------------------------ LADIES
def test_ladies_bulk_probabilities_match_formula():
    g = dgl.graph((torch.tensor([1, 2, 3, 3, 4, 0, 2, 2]), torch.tensor([0, 0, 0, 1, 1, 2, 3, 3])), num_nodes=5)
    n = 5
    A = torch.zeros(n, n, dtype=torch.float64)  # Â[v, u], parallel edges summed
    src, dst = g.edges(order="eid")
    A.index_put_((dst.long(), src.long()), edge_norm(g, "both"), accumulate=True)
    vs = [torch.tensor([0, 1]), torch.tensor([3]), torch.tensor([0, 2, 3])]
    for spgemm in (None, local_spgemm):
        sampler = LADIESSampler([2], bulk=3, seed=0, spgemm=spgemm)
        (ptr, cols, p, _), _ = sampler.bulk.probabilities(g, vs)
        for b, v in enumerate(vs):
            sq = (A[v] ** 2).sum(0)
            want = (sq / sq.sum()).numpy()
            got = np.zeros(n)
            got[cols[ptr[b]:ptr[b + 1]]] = p[ptr[b]:ptr[b + 1]]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
            cand, q = ladies_probabilities(g, v)
            np.testing.assert_allclose(got[cand.numpy()], q.numpy(), rtol=1e-6)


def test_ladies_bulk_inclusion_follows_successive_sampling():
    # dst {0}; in-neighbours 1..4 with multiplicities 1, 1, 2, 3 under norm="none" -> p ∝ 1, 1, 4, 9;
    # s = 2 without replacement: inclusion probabilities of successive sampling, by enumeration
    src = [1, 2, 3, 3, 4, 4, 4]
    g = dgl.graph((torch.tensor(src), torch.zeros(7, dtype=torch.int64)), num_nodes=5)
    w = np.array([1.0, 1.0, 4.0, 9.0])
    p = w / w.sum()
    incl = np.zeros(4)
    for a, b in itertools.permutations(range(4), 2):
        pr = p[a] * p[b] / (1 - p[a])
        incl[a] += pr
        incl[b] += pr
    trials = 1500
    sampler = LADIESSampler([2], bulk=trials, seed=7, norm="none")
    (_, _, pb, _), _ = sampler.bulk.probabilities(g, [torch.tensor([0])])
    np.testing.assert_allclose(pb, p)
    counts = np.zeros(4)
    for _, _, blocks in sampler.bulk.bulk_sample(g, [torch.tensor([0])] * trials):
        drawn = torch.unique(blocks[0].srcdata[dgl.NID][blocks[0].edges()[0].long()]).numpy()
        assert drawn.size == 2
        counts[drawn - 1] += 1
    # four binomial counts with known means; per-cell z-test, Bonferroni over the 4 cells
    z = (counts - trials * incl) / np.sqrt(trials * incl * (1 - incl))
    assert np.abs(z).max() < stats.norm.ppf(1 - ALPHA / 8)


def _check_ladies_weights(g, block, s, replace, c, A):
    """Exact LADIES block contents and weights: every in-edge of the dst set from a drawn source is
    kept, and w(e) = c(e) / min(1, s p(u)) without replacement (c(e) when all candidates are
    taken), c(e) n_u / (s p(u)) with replacement, where n_u (times u was drawn) is a positive
    integer and the n_u add up to s; p(u) = sum_v A[v, u]^2 normalised (A: the normalised
    adjacency with parallel edges summed), recomputed here from the dense matrix."""
    V = block.dstdata[dgl.NID].long()
    u_loc, _ = block.edges()
    u = block.srcdata[dgl.NID][u_loc.long()].long()
    eid = block.edata[dgl.EID].long()
    w = block.edata["w"].double()
    sq = (A[V] ** 2).sum(0)
    p = sq / sq.sum()
    drawn = torch.unique(u)
    gs, gd, ge = g.in_edges(V, form="all")
    want = torch.sort(ge[torch.isin(gs, drawn)].long()).values
    assert torch.equal(torch.sort(eid).values, want)  # all in-edges of V from drawn sources, nothing else
    ratio = w / c[eid]
    if not replace:
        if int((sq > 0).sum()) <= s:
            torch.testing.assert_close(ratio, torch.ones_like(ratio), rtol=1e-6, atol=0)
        else:
            torch.testing.assert_close(ratio, 1 / torch.clamp(s * p[u], max=1.0), rtol=1e-5, atol=0)
        return
    n_u = ratio * s * p[u]  # per edge; must be the same integer for every edge of one source
    assert torch.allclose(n_u, torch.round(n_u), rtol=0, atol=1e-3) and (torch.round(n_u) >= 1).all()
    per_src = {}
    for uu, nn in zip(u.tolist(), torch.round(n_u).long().tolist()):
        assert per_src.setdefault(uu, nn) == nn
    assert sum(per_src.values()) == s


def test_ladies_bulk_blocks_and_weights():
    torch.manual_seed(0)  # dgl.rand_graph draws from the global generators
    np.random.seed(0)
    dgl.seed(0)
    g = dgl.rand_graph(150, 1500)
    n = g.num_nodes()
    c = edge_norm(g, "both").double()
    src_all, dst_all = g.edges(order="eid")
    A = torch.zeros(n, n, dtype=torch.float64)  # Â[v, u], parallel edges summed
    A.index_put_((dst_all.long(), src_all.long()), c, accumulate=True)
    batches = [torch.arange(0, 150, 4), torch.arange(2, 150, 9), torch.arange(0, 150, 4)]
    for replace in (False, True):
        s = LADIESSampler([40, 20], bulk=3, seed=2, replace=replace)
        res = s.bulk.bulk_sample(g, batches)
        ref = LADIESSampler([40, 20], bulk=1, seed=2, replace=replace).bulk.bulk_sample(g, batches)
        for (_inp, _out, blocks), (_, _, rblocks) in zip(res, ref):
            _same_blocks(blocks, rblocks)  # independent of k
            for b, budget in zip(blocks, (40, 20)):
                assert torch.equal(b.srcdata[dgl.NID][:b.num_dst_nodes()], b.dstdata[dgl.NID])
                drawn = torch.unique(b.srcdata[dgl.NID][b.edges()[0].long()])
                assert drawn.numel() <= budget
                _check_ladies_weights(g, b, budget, replace, c, A)
        assert not torch.equal(res[0][2][1].edata[dgl.EID], res[2][2][1].edata[dgl.EID])
    # a budget covering every candidate takes them all with the exact weights c(e)
    full = LADIESSampler([10**6], bulk=2, seed=0).bulk.bulk_sample(g, batches[:1])[0][2][0]
    assert torch.allclose(full.edata["w"].double(), c[full.edata[dgl.EID].long()], rtol=1e-6)
    assert full.num_edges() == g.in_degrees(batches[0]).sum()


@pytest.mark.parametrize("replace", [False, True])
def test_ladies_bulk_triton_path_same(path, replace):
    """On the Triton path (a CUDA graph; here the interpreter) every step runs on the device
    (``core/sampling/bulk/ladies_device.py``): the CPU path's blocks, and its weights to rounding
    (the CPU's row totals are pairwise sums), on a multigraph, with an exclusion too."""
    g = dgl.rand_graph(100, 800)
    s_, d_ = g.edges()
    g = dgl.graph((torch.cat([s_, s_[::6]]), torch.cat([d_, d_[::6]])), num_nodes=100)  # parallel edges
    batches = [torch.arange(0, 100, 5), torch.arange(1, 100, 7)]
    excl = torch.arange(0, g.num_edges(), 3)

    def run():
        smp = LADIESSampler([15, 10], bulk=2, seed=9, replace=replace)
        return [r[2] for r in smp.bulk.bulk_sample(g, batches)] + [smp.sample_blocks(g, batches[0], excl)[2]]
    res = run()
    with dgl_accel.use_backend("native"):
        ref = run()
    for r, o in zip(ref, res):
        _same_blocks(r, o)
        for x, y in zip(r, o):
            torch.testing.assert_close(y.edata["w"], x.edata["w"], rtol=1e-12, atol=0)
    assert not set(res[-1][0].edata[dgl.EID].tolist()) & set(excl.tolist())


def test_ladies_bulk_in_dataloader():
    g = dgl.rand_graph(200, 2000)
    dl = dgl.dataloading.DataLoader(g, torch.arange(200), LADIESSampler([30, 20], bulk=4, seed=0),
                                    batch_size=50, shuffle=True)
    seen = torch.cat([o for _, o, _ in dl])
    assert torch.equal(torch.sort(seen).values, torch.arange(200))


# ------------------------------------------------------------------------------ bad input
def test_bad_inputs():
    g = dgl.rand_graph(50, 200)
    for bulk in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="expected bulk to be a positive int.*Fix"):
            BulkNeighborSampler([3], bulk=bulk)
        with pytest.raises(ValueError, match="expected bulk"):
            LADIESSampler([3], bulk=bulk)
    for fanouts in ([], 3, [-2], ["a"]):
        with pytest.raises(ValueError, match="fanout.*Fix"):
            BulkNeighborSampler(fanouts)
    with pytest.raises(ValueError, match="num_nodes_per_layer"):
        LADIESSampler([], bulk=2)
    with pytest.raises(ValueError, match="memory_budget"):
        BulkNeighborSampler([3], memory_budget=0)
    with pytest.raises(ValueError, match="spgemm"):
        BulkNeighborSampler([3], spgemm="scipy")
    s = BulkNeighborSampler([3], bulk=2, seed=0)
    with pytest.raises(ValueError, match="non-empty batch.*batch size must be >= 1"):
        s.sample_blocks(g, torch.tensor([], dtype=torch.int64))
    with pytest.raises(ValueError, match="non-empty list"):
        s.bulk_sample(g, [])
    with pytest.raises(ValueError, match=r"in \[0, 50\)"):
        s.bulk_sample(g, [torch.tensor([1, 99])])
    with pytest.raises(ValueError, match="positive batch size"):
        s.bulk_size(g, 0)
    bad = BulkNeighborSampler([3], seed=0, spgemm=lambda Q, A: torch.zeros(3, 3))
    with pytest.raises(ValueError, match="sparse CSR"):
        bad.bulk_sample(g, [torch.tensor([1, 2])])
    wrong = BulkNeighborSampler([3], seed=0, spgemm=lambda Q, A: local_spgemm(A, A))
    with pytest.raises(ValueError, match="shape"):
        wrong.bulk_sample(g, [torch.tensor([1, 2])])


@pytest.mark.threads(2)  # the parallel twin splits work over numba's threads only with several
@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
def test_serial_twins_match_parallel_kernels(monkeypatch):
    g = dgl.to_simple(dgl.rand_graph(3000, 60000))
    batches = [torch.randperm(3000, generator=torch.Generator().manual_seed(i))[:300] for i in range(4)]
    par = BulkNeighborSampler([6, 4], bulk=4, seed=8).bulk_sample(g, batches)
    monkeypatch.setenv("DGL_ACCEL_NUMBA_PARALLEL", "0")
    assert not runtime.parallel_allowed()
    ser = BulkNeighborSampler([6, 4], bulk=4, seed=8).bulk_sample(g, batches)
    for a, b in zip(par, ser):
        _same_blocks(a[2], b[2])


@pytest.mark.interpreter
def test_the_triton_relabel_uploads_the_adjacency_once_per_graph(monkeypatch):
    """A bulk pass relabels every layer of every minibatch: the canonical adjacency's indices and
    edge ids go to the device once (was: two E-sized copies per call)."""
    from dgl_accel.core.sampling.bulk import matrix as bulk_matrix
    from dgl_accel.core.sampling.bulk.launchers import relabel_triton
    from dgl_accel.core.sampling.neighbor.sample import relabel_block
    from dgl_accel.graph import in_csr

    g = dgl.rand_graph(80, 600)
    csr = in_csr(g)
    canon = bulk_matrix.canonical_adjacency(csr.indptr.numpy(), csr.indices.numpy(), csr.eids.numpy(), 80)
    copies = []
    original = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda t, *a, **k: (copies.append(t.numel()), original(t, *a, **k))[1])
    dst = np.array([3, 7, 11])
    for _ in range(3):
        flat = np.array([canon.indptr[3], canon.indptr[7], canon.indptr[11]])
        got = relabel_triton(flat, np.array([1, 1, 1]), dst, canon, None, 80, "cpu")
    assert copies.count(canon.indices.size) == 2  # indices and eids, once each
    want = relabel_block(flat, np.array([1, 1, 1]), dst, canon.pairs, None, 80)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
