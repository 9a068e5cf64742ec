"""Heterograph neighbour sampling of ``NeighborSampler`` (issue 17) against DGL 2.1.0's
``dgl.dataloading.NeighborSampler`` contract: typed block layout, sampled edges that exist with the
right ids, per-(destination, edge type) counts, fanout -1, prob / mask, dict fanouts, chained
layers, exclusion and the DataLoader with a dict of seeds."""
import dgl
import pytest
import torch

import dgl_accel
from dgl_accel.sampling import DGLSamplingInputError, NeighborSampler

FOLLOWS, CLICKS, CLICKED_BY = ("user", "follows", "user"), ("user", "clicks", "item"), ("item", "clicked-by", "user")


def small_graph(idtype=torch.int64):
    """6 users, 5 items; 'clicked-by' is the reverse of 'clicks'."""
    gen = torch.Generator().manual_seed(0)
    fs, fd = torch.randint(0, 6, (20,), generator=gen), torch.randint(0, 6, (20,), generator=gen)
    cs, cd = torch.randint(0, 6, (16,), generator=gen), torch.randint(0, 5, (16,), generator=gen)
    return dgl.heterograph({FOLLOWS: (fs, fd), CLICKS: (cs, cd), CLICKED_BY: (cd, cs)},
                           num_nodes_dict={"user": 6, "item": 5}, idtype=idtype)


SEEDS = {"user": torch.tensor([0, 3, 5]), "item": torch.tensor([1, 4])}


def ids(x):
    return x.tolist() if isinstance(x, torch.Tensor) else x


def sampled(g, block):
    """{etype: list of (src id, dst id, eid)}, checking every edge exists in its relation with that id."""
    out = {}
    for c in g.canonical_etypes:
        s, d = block.edges(etype=c)
        src = block.srcnodes[c[0]].data[dgl.NID][s.long()]
        dst = block.dstnodes[c[2]].data[dgl.NID][d.long()]
        eid = block.edges[c].data[dgl.EID]
        gs, gd = g.find_edges(eid, etype=c)
        assert gs.tolist() == src.tolist() and gd.tolist() == dst.tolist(), c
        out[c] = list(zip(src.tolist(), dst.tolist(), eid.tolist()))
    return out


def same_layout(ours, theirs, same_dst=True):
    """Typed layout as DGL's; ``same_dst``: the same destination nodes too (false for an inner layer
    of random draws, whose destinations are the previous layer's random sources)."""
    assert ours.srctypes == theirs.srctypes and ours.dsttypes == theirs.dsttypes
    assert ours.canonical_etypes == theirs.canonical_etypes
    for nt in theirs.dsttypes:
        if same_dst:
            assert ours.num_dst_nodes(nt) == theirs.num_dst_nodes(nt)
            assert ids(ours.dstnodes[nt].data[dgl.NID]) == ids(theirs.dstnodes[nt].data[dgl.NID])
        src = ours.srcnodes[nt].data[dgl.NID].tolist()
        dst = ours.dstnodes[nt].data[dgl.NID].tolist()
        assert src[:len(dst)] == dst and len(set(src)) == len(src)  # seeds first, each source once
    assert ours.idtype == theirs.idtype


def in_degree(g, c, v):
    return int(g.in_degrees(torch.tensor([v], dtype=g.idtype), etype=c)[0])


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_layout_edges_and_counts_match_dgl(idtype):
    g = small_graph(idtype)
    fanout = 2
    seeds = {k: v.to(idtype) for k, v in SEEDS.items()}
    _, _, ours = NeighborSampler([fanout], seed=1).sample_blocks(g, seeds)
    _, _, theirs = dgl.dataloading.NeighborSampler([fanout]).sample_blocks(g, seeds)
    same_layout(ours[0], theirs[0])
    edges = sampled(g, ours[0])
    for c in g.canonical_etypes:
        for v in seeds[c[2]].tolist():
            got = [e for e in edges[c] if e[1] == v]
            assert len(got) == min(fanout, in_degree(g, c, v)), (c, v)
            assert len({e[2] for e in got}) == len(got)  # without replacement


def test_fanout_all_takes_every_in_edge_as_dgl():
    g = small_graph()
    inp, out, ours = NeighborSampler([-1], seed=0).sample_blocks(g, SEEDS)
    tinp, _, theirs = dgl.dataloading.NeighborSampler([-1]).sample_blocks(g, SEEDS)
    same_layout(ours[0], theirs[0])
    for c in g.canonical_etypes:
        assert sorted(ours[0].edges[c].data[dgl.EID].tolist()) == sorted(theirs[0].edges[c].data[dgl.EID].tolist())
        assert sorted(g.in_edges(SEEDS[c[2]], form="eid", etype=c).tolist()) == \
            sorted(ours[0].edges[c].data[dgl.EID].tolist())
    assert {k: sorted(v.tolist()) for k, v in inp.items()} == {k: sorted(v.tolist()) for k, v in tinp.items()}
    assert out is SEEDS


def test_replace_gives_exactly_fanout_edges():
    g = small_graph()
    _, _, (block,) = NeighborSampler([5], replace=True, seed=3).sample_blocks(g, SEEDS)
    edges = sampled(g, block)
    for c in g.canonical_etypes:
        for v in SEEDS[c[2]].tolist():
            assert len([e for e in edges[c] if e[1] == v]) == (5 if in_degree(g, c, v) else 0)


def test_dict_fanouts_per_layer_plain_and_canonical_names():
    g = small_graph()
    fanouts = [{FOLLOWS: -1, CLICKS: 1, CLICKED_BY: 0}, {"follows": 1, "clicks": 0, "clicked-by": 2}]
    _, _, ours = NeighborSampler(fanouts, seed=2).sample_blocks(g, SEEDS)
    _, _, theirs = dgl.dataloading.NeighborSampler(fanouts).sample_blocks(g, SEEDS)
    for layer, (b, t) in enumerate(zip(ours, theirs)):
        same_layout(b, t, same_dst=layer == len(fanouts) - 1)
        edges = sampled(g, b)
        want = {c: fanouts[layer][c if layer == 0 else c[1]] for c in g.canonical_etypes}
        for c in g.canonical_etypes:
            for v in b.dstnodes[c[2]].data[dgl.NID].tolist():
                n = len([e for e in edges[c] if e[1] == v])
                deg = in_degree(g, c, v)
                assert n == (deg if want[c] == -1 else min(want[c], deg)), (layer, c, v)


def test_blocks_chain_across_layers():
    g = small_graph()
    inp, _, blocks = NeighborSampler([2, 1, 2], seed=5).sample_blocks(g, SEEDS)
    assert len(blocks) == 3
    for nt in g.ntypes:
        assert blocks[-1].dstnodes[nt].data[dgl.NID].tolist() == SEEDS[nt].tolist()
        assert inp[nt].tolist() == blocks[0].srcnodes[nt].data[dgl.NID].tolist()
        for i in range(1, 3):
            assert blocks[i].srcnodes[nt].data[dgl.NID].tolist() == blocks[i - 1].dstnodes[nt].data[dgl.NID].tolist()
    for b in blocks:
        sampled(g, b)


def test_prob_zero_edges_never_picked_and_mask_works():
    g = small_graph()
    zero = {}
    for c in g.canonical_etypes:
        p = torch.rand(g.num_edges(c), generator=torch.Generator().manual_seed(7))
        p[::2] = 0
        g.edges[c].data["p"] = p
        g.edges[c].data["m"] = p > 0
        zero[c] = set(torch.nonzero(p == 0).flatten().tolist())
    all_seeds = {"user": torch.arange(6), "item": torch.arange(5)}
    for kw in ({"prob": "p"}, {"mask": "m"}):
        sampler = NeighborSampler([2], seed=0, **kw)
        for _ in range(20):
            edges = sampled(g, sampler.sample_blocks(g, all_seeds)[2][0])
            for c in g.canonical_etypes:
                assert not {e[2] for e in edges[c]} & zero[c], (kw, c)
                for v in range(g.num_nodes(c[2])):
                    live = [e for e in g.in_edges(torch.tensor([v]), form="eid", etype=c).tolist() if e not in zero[c]]
                    assert len([e for e in edges[c] if e[1] == v]) == min(2, len(live))


def test_excluded_edges_never_appear():
    """Canonical keys as DGL; a plain edge-type key works the same here (DGL 2.1.0 silently ignores
    plain keys in exclude_eids: its lookup is by canonical type)."""
    g = small_graph()
    excl = {FOLLOWS: torch.arange(0, 20, 2), CLICKED_BY: torch.tensor([0, 1, 2])}
    all_seeds = {"user": torch.arange(6), "item": torch.arange(5)}
    block = NeighborSampler([-1], seed=0).sample_blocks(g, all_seeds, excl)[2][0]
    plain = NeighborSampler([-1], seed=0).sample_blocks(g, all_seeds, {"follows": excl[FOLLOWS],
                                                                       "clicked-by": excl[CLICKED_BY]})[2][0]
    theirs = dgl.dataloading.NeighborSampler([-1]).sample_blocks(g, all_seeds, excl)[2][0]
    for c in g.canonical_etypes:
        got = sorted(block.edges[c].data[dgl.EID].tolist())
        assert got == sorted(theirs.edges[c].data[dgl.EID].tolist())
        assert got == sorted(plain.edges[c].data[dgl.EID].tolist())
    assert not set(block.edges[FOLLOWS].data[dgl.EID].tolist()) & set(range(0, 20, 2))
    assert block.num_edges(CLICKS) == g.num_edges(CLICKS)


def test_same_seed_same_blocks_and_relations_draw_independently():
    g = small_graph()
    a = NeighborSampler([1, 1], seed=9).sample_blocks(g, SEEDS)[2]
    b = NeighborSampler([1, 1], seed=9).sample_blocks(g, SEEDS)[2]
    for x, y in zip(a, b):
        for c in g.canonical_etypes:
            assert x.edges[c].data[dgl.EID].tolist() == y.edges[c].data[dgl.EID].tolist()
    # two relations with the same edges into one node type: their draws must not be the same
    src, dst = torch.arange(400) % 20, torch.arange(400) // 20
    twin = dgl.heterograph({("item", "a", "user"): (src, dst), ("item", "b", "user"): (src, dst)})
    block = NeighborSampler([1], seed=9).sample_blocks(twin, {"user": torch.arange(20)})[2][0]
    assert block.edges["a"].data[dgl.EID].tolist() != block.edges["b"].data[dgl.EID].tolist()


def test_dataloader_with_dict_seeds():
    g = small_graph()
    g.nodes["user"].data["x"] = torch.randn(6, 3)
    seeds = {"user": torch.arange(6), "item": torch.arange(5)}
    sampler = NeighborSampler([2, {"follows": 1, "clicks": 2, "clicked-by": -1}], seed=0,
                              prefetch_node_feats={"user": ["x"]})
    loader = dgl.dataloading.DataLoader(g, seeds, sampler, batch_size=4, shuffle=True)
    theirs = dgl.dataloading.DataLoader(g, seeds, dgl.dataloading.NeighborSampler([2, 2]), batch_size=4)
    assert len(loader) == len(theirs)
    seen = {"user": [], "item": []}
    for inp, out, blocks in loader:
        assert len(blocks) == 2
        for nt, v in out.items():
            seen[nt] += v.tolist()
            assert blocks[-1].dstnodes[nt].data[dgl.NID].tolist() == v.tolist()
        assert torch.equal(blocks[0].srcdata["x"]["user"], g.nodes["user"].data["x"][inp["user"].long()])
        for b in blocks:
            sampled(g, b)
    assert sorted(seen["user"]) == list(range(6)) and sorted(seen["item"]) == list(range(5))


def test_homogeneous_graph_takes_a_one_entry_dict_fanout():
    g = dgl.graph(([1, 2, 0, 3], [0, 0, 1, 0]))
    a = NeighborSampler([{"_E": 2}], seed=4).sample_blocks(g, torch.tensor([0, 1]))[2][0]
    b = NeighborSampler([2], seed=4).sample_blocks(g, torch.tensor([0, 1]))[2][0]
    assert a.edata[dgl.EID].tolist() == b.edata[dgl.EID].tolist()


def test_unsupported_inputs_say_what_is_expected():
    g = small_graph()
    with pytest.raises(DGLSamplingInputError, match="dict"):
        NeighborSampler([2], seed=0).sample_blocks(g, torch.tensor([0]))
    with pytest.raises(DGLSamplingInputError, match="each of the 3 edge types"):
        NeighborSampler([{"follows": 2}], seed=0).sample_blocks(g, SEEDS)
    with pytest.raises(DGLSamplingInputError, match="seed node types"):
        NeighborSampler([2], seed=0).sample_blocks(g, {"shop": torch.tensor([0])})
    g.edges[FOLLOWS].data["p"] = torch.ones(g.num_edges(FOLLOWS))
    with pytest.raises(DGLSamplingInputError, match="on every edge type"):
        NeighborSampler([2], prob="p", seed=0).sample_blocks(g, SEEDS)
    for c in g.canonical_etypes:  # weights on every type: the values are checked when the tables are built,
        g.edges[c].data["p"] = torch.ones(g.num_edges(c))  # and again after an in-place change
    NeighborSampler([2], prob="p", seed=0).sample_blocks(g, SEEDS)
    g.edges[FOLLOWS].data["p"][0] = -1.0
    with pytest.raises(DGLSamplingInputError, match="non-negative") as caught:
        NeighborSampler([2], prob="p", seed=0).sample_blocks(g, SEEDS)
    assert repr(FOLLOWS) in str(caught.value)  # the edge type whose weights are wrong
    with pytest.raises(DGLSamplingInputError, match="dict"):
        NeighborSampler([2], seed=0).sample_blocks(g, SEEDS, torch.tensor([0]))
    with pytest.raises(DGLSamplingInputError):
        NeighborSampler([{"follows": -2, "clicks": 1, "clicked-by": 1}])


def test_edge_prediction_with_reverse_types_excluded():
    """``as_edge_prediction_sampler(exclude='reverse_types')`` passes canonical-keyed exclusions: neither
    the seed edges nor their reverses appear in the blocks."""
    g = small_graph()
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        NeighborSampler([-1, -1], seed=0), exclude="reverse_types",
        reverse_etypes={"clicks": "clicked-by", "clicked-by": "clicks"})
    loader = dgl.dataloading.DataLoader(g, {"clicks": torch.arange(g.num_edges(CLICKS))}, sampler, batch_size=5)
    for _, pair_graph, blocks in loader:
        seed_eids = set(pair_graph.edges[CLICKS].data[dgl.EID].tolist())
        for b in blocks:
            sampled(g, b)
            assert not seed_eids & set(b.edges[CLICKS].data[dgl.EID].tolist())
            assert not seed_eids & set(b.edges[CLICKED_BY].data[dgl.EID].tolist())


@pytest.mark.parametrize("seeds", [{"a": torch.tensor([0])}, {"b": torch.tensor([1])},
                                   {"a": torch.tensor([0]), "b": torch.tensor([], dtype=torch.int64)}])
def test_empty_relation_and_node_type_without_edges_keep_dgl_layout(seeds):
    empty = torch.tensor([], dtype=torch.int64)
    g = dgl.heterograph({("a", "r", "a"): ([0, 1], [1, 0]), ("a", "s", "b"): (empty, empty)},
                        num_nodes_dict={"a": 2, "b": 3, "c": 4})
    ours = NeighborSampler([2, 2], seed=0).sample_blocks(g, seeds)[2]
    theirs = dgl.dataloading.NeighborSampler([2, 2]).sample_blocks(g, seeds)[2]
    for b, t in zip(ours, theirs):
        same_layout(b, t)
        assert {n: b.num_src_nodes(n) for n in b.srctypes} == {n: t.num_src_nodes(n) for n in t.srctypes}
        sampled(g, b)


@pytest.mark.interpreter
def test_one_choice_per_layer_for_relations_sharing_a_fanout_same_on_both_paths():
    """The relations are stacked as one CSR: a layer whose edge types share a fanout makes one
    neighbour choice (one kernel launch on the Triton path), and both paths give the same blocks."""
    g = small_graph()
    blocks = {}
    for path in ("native", "triton"):  # the Triton kernels under the interpreter
        with dgl_accel.use_backend(path):
            dgl_accel.reset_stats()
            _, _, bl = NeighborSampler([{FOLLOWS: 3, CLICKS: 2, CLICKED_BY: 2}, 2], seed=4).sample_blocks(g, SEEDS)
            calls = sum(dgl_accel.stats()["neighbor_choice"].values())
            assert calls == 2 + 1, path  # layer 1: fanouts 3 and 2; layer 2: one fanout for all three
            blocks[path] = [sampled(g, b) for b in bl]
    assert blocks["native"] == blocks["triton"]
