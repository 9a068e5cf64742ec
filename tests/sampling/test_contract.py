"""DGL 2.1.0's sampler contract on ours (issue 17): the cases of DGL's
``tests/python/common/sampling/test_sampling.py`` and
``tests/python/pytorch/dataloading/test_dataloader.py`` that concern what we support (homogeneous
neighbour sampling with prob / mask / exclusion, the node and edge DataLoaders, SAINT, random walks
with metapath and restart, node2vec), in our own words, plus the two behaviours the samplers'
docstrings decide against DGL's (exclusion after the choice, order of the non-seed sources), each
checked on DGL itself.  Heterograph neighbour sampling follows DGL's typed layout (its input errors
are ``dgl.DGLError`` as DGL's).  Tests needing a GPU or a download are left out, as they skip on plain DGL."""
from functools import partial

import dgl
import numpy as np
import pytest
import torch

from dgl_accel.sampling import (
    MultiLayerFullNeighborSampler,
    MultiLayerNeighborSampler,
    NeighborSampler,
    SAINTSampler,
    node2vec_random_walk,
    random_walk,
)

IDTYPES = [torch.int32, torch.int64]


# ------------------------------------------------------------------------------ random walks
def check_walks(g, metapath, traces, types, prob=None, eids=None):
    """DGL's check_random_walk: the type vector follows the metapath, every step is an edge of its
    relation (with a positive ``prob`` where the relation has it), and eids name those edges."""
    rels = [g.to_canonical_etype(e) for e in metapath]
    for j, rel in enumerate(rels):
        assert int(types[j]) == g.get_ntype_id(rel[0]) and int(types[j + 1]) == g.get_ntype_id(rel[2])
    for i in range(traces.shape[0]):
        for j, rel in enumerate(rels):
            u, v = int(traces[i, j]), int(traces[i, j + 1])
            assert bool(g.has_edges_between(u, v, etype=rel))
            if prob is not None and prob in g.edges[rel].data:
                assert float(g.edges[rel].data[prob][g.edge_ids(u, v, etype=rel)]) != 0
            if eids is not None:
                s, d = g.find_edges(eids[i, j], etype=rel)
                assert (int(s), int(d)) == (u, v)


def _walk_graphs():
    g1 = dgl.heterograph({("user", "follow", "user"): ([0, 1, 2], [1, 2, 0])})
    g2 = dgl.heterograph({("user", "follow", "user"): ([0, 1, 1, 2, 3], [1, 2, 3, 0, 0])})
    g3 = dgl.heterograph({("user", "follow", "user"): ([0, 1, 2], [1, 2, 0]),
                          ("user", "view", "item"): ([0, 1, 2], [0, 1, 2]),
                          ("item", "viewed-by", "user"): ([0, 1, 2], [0, 1, 2])})
    g4 = dgl.heterograph({("user", "follow", "user"): ([0, 1, 1, 2, 3], [1, 2, 3, 0, 0]),
                          ("user", "view", "item"): ([0, 0, 1, 2, 3, 3], [0, 1, 1, 2, 2, 1]),
                          ("item", "viewed-by", "user"): ([0, 1, 1, 2, 2, 1], [0, 0, 1, 2, 3, 3])})
    return g1, g2, g3, g4


def test_uniform_random_walk():
    g1, g2, g3, g4 = _walk_graphs()
    starts = torch.tensor([0, 1, 2, 0, 1, 2])
    for kw in ({}, {"restart_prob": 0.0}, {"restart_prob": torch.zeros(4)}):
        traces, eids, types = random_walk(g1, starts, length=4, return_eids=True, seed=0, **kw)
        check_walks(g1, ["follow"] * 4, traces, types, eids=eids)
    with pytest.raises(dgl.DGLError):
        random_walk(g1, torch.tensor([0, 1, 2, 10]), length=4, return_eids=True)
    traces, types = random_walk(g1, starts, length=5, restart_prob=torch.tensor([0, 0, 0, 0, 1.0]), seed=0)
    check_walks(g1, ["follow"] * 4, traces[:, :5], types[:5])
    assert bool((traces[:, 5] == -1).all())
    traces, eids, types = random_walk(g2, torch.tensor([0, 1, 2, 3] * 2), length=4, return_eids=True, seed=0)
    check_walks(g2, ["follow"] * 4, traces, types, eids=eids)
    metapath = ["follow", "view", "viewed-by"] * 2
    for g, starts in ((g3, torch.tensor([0, 1, 2] * 2)), (g4, torch.tensor([0, 1, 2, 3] * 2)),
                      (g4, torch.tensor([0, 1, 2] * 2))):
        traces, eids, types = random_walk(g, starts, metapath=metapath, return_eids=True, seed=0)
        check_walks(g, metapath, traces, types, eids=eids)


def test_non_uniform_random_walk():
    _, g2, _, g4 = _walk_graphs()
    g2.edata["p"] = torch.tensor([3, 0, 3, 3, 3], dtype=torch.float32)
    g2.edata["p2"] = torch.tensor([[3], [0], [3], [3], [3]], dtype=torch.float32)
    g4.edges["follow"].data["p"] = torch.tensor([3, 0, 3, 3, 3], dtype=torch.float32)
    g4.edges["viewed-by"].data["p"] = torch.ones(6)
    starts = torch.tensor([0, 1, 2, 3] * 2)
    traces, eids, types = random_walk(g2, starts, length=4, prob="p", return_eids=True, seed=0)
    check_walks(g2, ["follow"] * 4, traces, types, "p", eids=eids)
    with pytest.raises(dgl.DGLError):  # a [E, 1] column is not one weight per edge, as in DGL
        random_walk(g2, starts, length=4, prob="p2")
    metapath = ["follow", "view", "viewed-by"] * 2
    for kw in ({}, {"restart_prob": 0.0}, {"restart_prob": torch.zeros(6)}):
        traces, eids, types = random_walk(g4, starts, metapath=metapath, prob="p", return_eids=True, seed=0, **kw)
        check_walks(g4, metapath, traces, types, "p", eids=eids)
    traces, eids, types = random_walk(g4, starts, metapath=metapath + ["follow"], prob="p", return_eids=True,
                                      restart_prob=torch.tensor([0, 0, 0, 0, 0, 0, 1.0]), seed=0)
    check_walks(g4, metapath, traces[:, :7], types[:7], "p", eids=eids)
    assert bool((traces[:, 7] == -1).all())


def test_node2vec():
    g1, g2, _, _ = _walk_graphs()
    g2.edata["p"] = torch.tensor([3, 0, 3, 3, 3], dtype=torch.float32)
    types = torch.zeros(5, dtype=torch.int64)
    traces, eids = node2vec_random_walk(g1, [0, 1, 2, 0, 1, 2], 1, 1, 4, return_eids=True, seed=0)
    check_walks(g1, ["follow"] * 4, traces, types, eids=eids)
    traces, eids = node2vec_random_walk(g2, [0, 1, 2, 3] * 2, 1, 1, 4, prob="p", return_eids=True, seed=0)
    check_walks(g2, ["follow"] * 4, traces, types, "p", eids=eids)
    with pytest.raises(dgl.DGLError):  # homogeneous only, as DGL
        node2vec_random_walk(_walk_graphs()[2], [0], 1, 1, 2)


# ------------------------------------------------------------------------------ neighbour sampling
@pytest.mark.parametrize("idtype", IDTYPES)
@pytest.mark.parametrize("use_mask", [False, True])
def test_neighbor_nonuniform(idtype, use_mask):
    g = dgl.graph(([1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 1, 1, 1, 1])).astype(idtype)
    g.edata["p"] = torch.tensor([1, 1, 0, 0, 1, 1, 0, 0], dtype=torch.float32)
    g.edata["mask"] = g.edata["p"] != 0
    prob, mask = (None, "mask") if use_mask else ("p", None)
    sampler = MultiLayerNeighborSampler([2], prob=prob, mask=mask)
    loader = dgl.dataloading.DataLoader(g, torch.tensor([0, 1], dtype=idtype), sampler, batch_size=1)
    for input_nodes, output_nodes, _ in loader:
        want = {0: {1, 2}, 1: {5, 6}}[int(output_nodes)]
        assert set(input_nodes[1:].tolist()) == want


def _check_dtype(data, idtype):
    for x in data if isinstance(data, list) else [data]:
        assert (x.idtype if isinstance(x, dgl.DGLGraph) else x.dtype) == idtype


@pytest.mark.parametrize("idtype", IDTYPES)
@pytest.mark.parametrize("name", ["full", "neighbor"])
def test_node_dataloader(idtype, name):
    g = dgl.graph(([0, 0, 0, 1, 1], [1, 2, 3, 3, 4])).astype(idtype)
    g.ndata["feat"] = torch.randn(5, 8)
    sampler = {"full": MultiLayerFullNeighborSampler(2), "neighbor": MultiLayerNeighborSampler([3, 3])}[name]
    loader = dgl.dataloading.DataLoader(g, torch.arange(5, dtype=idtype), sampler, batch_size=5)
    for input_nodes, output_nodes, blocks in loader:
        for x in (input_nodes, output_nodes, blocks):
            _check_dtype(x, idtype)
        if name == "full":  # every in-edge of the seeds, as DGL's full sampler gives
            assert blocks[-1].num_edges() == g.num_edges()


def test_zero_degree_seeds_give_empty_blocks():
    g = dgl.graph(([], []), num_nodes=5)
    for replace in (False, True):
        _, _, blocks = NeighborSampler([2], replace=replace, seed=0).sample_blocks(g, torch.tensor([1, 2]))
        assert blocks[0].num_edges() == 0 and blocks[0].srcdata[dgl.NID].tolist() == [1, 2]


def _homogeneous(seed=0):
    gen = torch.Generator().manual_seed(seed)
    s, d = torch.randint(0, 200, (1000,), generator=gen), torch.randint(0, 200, (1000,), generator=gen)
    g = dgl.graph((torch.cat([s, d]), torch.cat([d, s])), num_nodes=200)
    reverse = torch.cat([torch.arange(1000, 2000), torch.arange(0, 1000)])
    always = torch.randint(0, 1000, (50,), generator=gen)
    return g, reverse, always


def _to_exclude(exclude, always, pair_eids):
    ids = {None: pair_eids[:0], "self": pair_eids, "reverse_id": torch.cat([pair_eids, (pair_eids + 1000) % 2000])}
    out = ids[exclude]
    return torch.cat([out, always]) if always is not None else out


@pytest.mark.parametrize("always", [False, True])
@pytest.mark.parametrize("exclude", [None, "self", "reverse_id"])
@pytest.mark.parametrize("make", [lambda: MultiLayerFullNeighborSampler(1), lambda: NeighborSampler([3], seed=0)])
@pytest.mark.parametrize("batch_size", [1, 50])
def test_edge_dataloader_excludes(exclude, always, make, batch_size):
    g, reverse, always_ids = _homogeneous()
    always_ids = always_ids if always else None
    kw = {"exclude": partial(_to_exclude, exclude, always_ids) if always else exclude,
          "reverse_eids": reverse if exclude == "reverse_id" else None}
    sampler = dgl.dataloading.as_edge_prediction_sampler(make(), **kw)
    loader = dgl.dataloading.DataLoader(g, torch.arange(1000), sampler, batch_size=batch_size,
                                        use_prefetch_thread=False)
    for i, (_, pair_graph, blocks) in enumerate(loader):
        banned = _to_exclude(exclude, always_ids, pair_graph.edata[dgl.EID])
        assert not np.isin(banned.numpy(), blocks[0].edata[dgl.EID].numpy()).any()
        if i == 10:
            break


@pytest.mark.parametrize("mode,budget", [("node", 100), ("edge", 200), ("walk", (3, 2))])
def test_saint_dataloader(mode, budget):
    g = dgl.add_reverse_edges(dgl.rand_graph(500, 3000))
    loader = dgl.dataloading.DataLoader(g, torch.arange(100), SAINTSampler(mode, budget))
    assert len(loader) == 100
    n = sum(1 for sg in loader if sg.num_nodes() > 0)
    assert n == 100


def test_heterograph_neighbor_sampling_follows_dgl():
    """Heterographs are sampled per relation with DGL's typed block layout (the full checks are in
    ``tests/sampling/test_neighbor_hetero.py``); what DGL refuses, we refuse with a ``dgl.DGLError``."""
    g = dgl.heterograph({("user", "follow", "user"): ([0, 1], [1, 0]), ("user", "play", "game"): ([0], [0])})
    seeds = {"user": torch.tensor([0]), "game": torch.tensor([0])}
    for fanouts in ([2], [{"follow": 2, "play": 1}], [{("user", "follow", "user"): -1, "play": -1}]):
        _, _, (ours,) = NeighborSampler(fanouts, seed=0).sample_blocks(g, seeds)
        _, _, (theirs,) = dgl.dataloading.NeighborSampler(fanouts).sample_blocks(g, seeds)
        assert ours.srctypes == theirs.srctypes and ours.canonical_etypes == theirs.canonical_etypes
        for nt in g.ntypes:
            assert ours.srcnodes[nt].data[dgl.NID].tolist() == theirs.srcnodes[nt].data[dgl.NID].tolist()
            assert ours.dstnodes[nt].data[dgl.NID].tolist() == theirs.dstnodes[nt].data[dgl.NID].tolist()
        for c in g.canonical_etypes:
            assert ours.edges[c].data[dgl.EID].tolist() == theirs.edges[c].data[dgl.EID].tolist()
    with pytest.raises(dgl.DGLError):  # DGL: "Must specify node type when the graph is not homogeneous."
        NeighborSampler([2], seed=0).sample_blocks(g, torch.tensor([0]))
    with pytest.raises(dgl.DGLError):
        dgl.dataloading.NeighborSampler([2]).sample_blocks(g, torch.tensor([0]))
    with pytest.raises(dgl.DGLError, match="each of the 2 edge types"):  # DGL: "Fan-out must be specified ..."
        NeighborSampler([{"follow": 2}], seed=0).sample_blocks(g, seeds)
    with pytest.raises(dgl.DGLError):
        dgl.dataloading.NeighborSampler([{"follow": 2}]).sample_blocks(g, seeds)


def test_dgl_modules_train_on_our_blocks():
    """DGL's own layers run forward and backward on our blocks as on DGL's: GATConv's
    ``apply_edges`` backward reaches DGL's libxsmm SpMM, which needs the blocks' edge-id arrays
    (it failed on blocks built with an empty one)."""
    torch.manual_seed(0)
    g = dgl.add_self_loop(dgl.graph((torch.randint(0, 40, (160,)), torch.randint(0, 40, (160,))), num_nodes=40))
    hg = dgl.heterograph({("u", "f", "u"): g.edges(), ("u", "r", "i"): (torch.arange(40), torch.arange(40) % 7)})
    cases = [(g, torch.arange(8), dgl.nn.GATConv(5, 3, 2)), (g, torch.arange(8), dgl.nn.SAGEConv(5, 3, "mean")),
             (hg, {"u": torch.arange(6), "i": torch.arange(3)},
              dgl.nn.HeteroGraphConv({"f": dgl.nn.GATConv(5, 3, 2, allow_zero_in_degree=True),
                                      "r": dgl.nn.GATConv(5, 3, 2, allow_zero_in_degree=True)}))]
    for graph, seeds, conv in cases:
        for sampler in (NeighborSampler([3], seed=0), dgl.dataloading.NeighborSampler([3])):
            _, _, (block,) = sampler.sample_blocks(graph, seeds)
            if graph.is_homogeneous:
                x = torch.ones(block.num_src_nodes(), 5, requires_grad=True)
                out = conv(block, x)
            else:
                x = {nt: torch.ones(block.num_src_nodes(nt), 5, requires_grad=True) for nt in block.srctypes}
                out = sum(o.sum() for o in conv(block, x).values())
            out.sum().backward()  # raised DGLError "Check notnull: edges" on blocks without edge ids
            xs = x.values() if isinstance(x, dict) else [x]
            assert all(t.grad is not None and bool(torch.isfinite(t.grad).all()) for t in xs)


# ------------------------------------------------------------------------------ decided behaviours
def _star():
    """Node 0 has in-edges 0, 1, 2 (from 5, 9, 2); node 1 has in-edges 3-6."""
    return dgl.graph((torch.tensor([5, 9, 2, 7, 3, 8, 1]), torch.tensor([0, 0, 0, 1, 1, 1, 1])), num_nodes=10)


@pytest.mark.parametrize("fused", [True, False])
def test_excluded_edges_are_dropped_after_the_choice_as_in_dgl(fused):
    """Fanout 2 out of node 0's three in-edges, edge 0 excluded: excluding before the choice would
    always leave 2 edges; DGL 2.1.0 (fused or not) sometimes leaves 1, and so do we."""
    g, excl = _star(), torch.tensor([0])
    seeds = torch.tensor([0])
    dgl_counts = {dgl.dataloading.NeighborSampler([2], fused=fused).sample_blocks(g, seeds, excl)[2][0].num_edges()
                  for _ in range(200)}
    ours = NeighborSampler([2], fused=fused, seed=0)
    our_counts, seen = set(), set()
    for _ in range(200):
        block = ours.sample_blocks(g, seeds, exclude_eids=excl)[2][0]
        our_counts.add(block.num_edges())
        seen.update(block.edata[dgl.EID].tolist())
    assert dgl_counts == our_counts == {1, 2}
    assert 0 not in seen


@pytest.mark.threads(2)  # DGL takes its fused path only with several threads
def test_source_order_beyond_the_seeds_is_dgl_internal():
    """With fanout -1 (no randomness) DGL's fused and unfused paths may list the non-seed sources in
    different orders (with several threads, its fused path's order depends on them: not a contract);
    both, and ours, put the seeds first in order and every other sampled source once, the same set."""
    g, seeds = _star(), torch.tensor([1, 0])
    orders = [dgl.dataloading.NeighborSampler([-1], fused=f).sample_blocks(g, seeds)[2][0].srcdata[dgl.NID].tolist()
              for f in (True, False)]
    mine = NeighborSampler([-1], seed=0).sample_blocks(g, seeds)[2][0].srcdata[dgl.NID].tolist()
    for order in orders + [mine]:
        assert order[:2] == [1, 0] and sorted(order[2:]) == [2, 3, 5, 7, 8, 9]
    assert mine[2:] == sorted(mine[2:])  # ours: increasing id (see NeighborSampler's docstring)
