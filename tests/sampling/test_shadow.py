"""shaDow-GNN samplers on DGL graphs (``sampling/shadow.py``): merged k-hop equals DGL's
ShaDowKHopSampler with full neighbourhoods and NeighborSampler's draws with sampled ones; per-target
scopes (k-hop and PPR) are exactly the induced subgraphs of their node sets with their target and
the readout index; seeds reproduce; DataLoader workers, prefetching and exclude_eids work; bad
input is refused with DGLSamplingInputError before any work."""
import dgl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.sampling.shadow.ppr import ppr_node_sets
from dgl_accel.graph.structure import in_csr
from dgl_accel.sampling import (
    DGLSamplingInputError,
    NeighborSampler,
    ShaDowKHopSampler,
    ShaDowPPRSampler,
    shadow_index,
)
from dgl_accel.sampling.shadow import GRAPH_ID, IS_TARGET, PPR_SCORE
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.strategies import graphs


@pytest.fixture(scope="module")
def graph():
    torch.manual_seed(0)
    dgl.seed(0)
    g = dgl.to_bidirected(dgl.rand_graph(2000, 12000))
    g.ndata["feat"] = torch.randn(g.num_nodes(), 4)
    g.edata["w"] = torch.rand(g.num_edges())
    return g


def _edges(g, sg):
    """{(edge id, src id, dst id)} of a subgraph, checked against the parent."""
    u, v = sg.edges()
    nid, eid = sg.ndata[dgl.NID].long(), sg.edata[dgl.EID].long()
    gu, gv = g.find_edges(sg.edata[dgl.EID])
    assert torch.equal(gu.long(), nid[u.long()]) and torch.equal(gv.long(), nid[v.long()])
    return set(zip(eid.tolist(), gu.tolist(), gv.tolist()))


def _induced_eids(g, nodes):
    return sorted(dgl.node_subgraph(g, torch.unique(nodes)).edata[dgl.EID].tolist())


@settings(max_examples=25, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=40, max_edges=200), layers=st.integers(1, 3), symmetric=st.booleans(),
       data=st.data())
def test_merged_full_neighbourhoods_equal_dgl(g, layers, symmetric, data):
    if symmetric:  # a simple symmetric graph takes the half-CSR subgraph path
        g = dgl.to_bidirected(g)
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, g.num_nodes() - 1), min_size=1, max_size=8, unique=True)),
                         dtype=g.idtype)
    ours = ShaDowKHopSampler([-1] * layers, seed=0).sample(g, seeds)
    theirs = dgl.dataloading.ShaDowKHopSampler([-1] * layers).sample(g, seeds)
    assert torch.equal(ours[1], seeds) and torch.equal(ours[0][:seeds.numel()], seeds)
    assert ours[0].dtype == g.idtype and torch.equal(ours[0], ours[2].ndata[dgl.NID])
    assert sorted(ours[0].tolist()) == sorted(theirs[0].tolist())
    assert _edges(g, ours[2]) == _edges(g, theirs[2])


def test_merged_sampled_draws_are_neighbor_samplers(graph):
    seeds = torch.arange(0, 2000, 7)
    for replace in (False, True):
        inp, out, sg = ShaDowKHopSampler([10, 5], replace=replace, seed=3).sample(graph, seeds)
        inp_ns = NeighborSampler([10, 5], replace=replace, seed=3).sample_blocks(graph, seeds)[0]
        assert torch.equal(inp, inp_ns)
        assert sorted(sg.edata[dgl.EID].tolist()) == _induced_eids(graph, inp)


def test_merged_weighted_and_excluded(graph):
    g = graph
    w = g.edata["w"].clone()
    w[::3] = 0
    g.edata["p"] = w
    seeds = torch.arange(0, 2000, 11)
    inp, _, sg = ShaDowKHopSampler([3], prob="p", seed=1).sample(g, seeds)
    # one layer: every new node is a seed's in-neighbour through a positive-weight edge
    src, dst, eid = g.in_edges(seeds, form="all")
    allowed = set(src[w[eid] > 0].tolist()) | set(seeds.tolist())
    assert set(inp.tolist()) <= allowed
    excl = torch.arange(0, g.num_edges(), 2)
    inp, _, sg = ShaDowKHopSampler([-1, -1], seed=1).sample(g, seeds, exclude_eids=excl)
    assert not set(sg.edata[dgl.EID].tolist()) & set(excl.tolist())
    for sampler in (ShaDowKHopSampler([4, 4], per_target=True, seed=1), ShaDowPPRSampler(topk=10)):
        full = sampler.sample(g, seeds)[2]
        inp, _, sg = sampler.sample(g, seeds, exclude_eids=excl)
        if isinstance(sampler, ShaDowPPRSampler):  # deterministic scopes: the same edges minus the excluded
            assert sorted(sg.edata[dgl.EID].tolist()) == sorted(e for e in full.edata[dgl.EID].tolist() if e % 2)
        assert not set(sg.edata[dgl.EID].tolist()) & set(excl.tolist())
        parts = dgl.unbatch(sg)                                   # batch_num_edges follow the exclusion
        assert sum(p.num_edges() for p in parts) == sg.num_edges()
        for part in parts:
            _edges(g, part)


def _check_per_target(g, seeds, inp, out, sg):
    assert torch.equal(out, seeds) and torch.equal(inp, sg.ndata[dgl.NID])
    gid, tpos = shadow_index(sg)
    assert torch.equal(tpos.numel() * torch.ones(1, dtype=torch.long), torch.tensor([seeds.numel()]))
    assert torch.equal(sg.ndata[dgl.NID][tpos].long(), seeds.long())
    assert torch.equal(gid, torch.repeat_interleave(torch.arange(seeds.numel()), sg.batch_num_nodes().long()))
    parts = dgl.unbatch(sg)
    assert len(parts) == seeds.numel()
    for t, part in enumerate(parts):
        nodes = part.ndata[dgl.NID]
        assert bool(part.ndata[IS_TARGET].sum() == 1) and int(nodes[part.ndata[IS_TARGET]]) == int(seeds[t])
        assert torch.equal(nodes, torch.unique(nodes))
        assert bool((part.ndata[GRAPH_ID] == t).all())
        assert sorted(part.edata[dgl.EID].tolist()) == _induced_eids(g, nodes)
        _edges(g, part)


@settings(max_examples=15, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=40, max_edges=200), fanouts=st.lists(st.sampled_from([-1, 1, 3]), min_size=1,
       max_size=2), data=st.data())
def test_per_target_khop_scopes_are_induced_subgraphs(g, fanouts, data):
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, g.num_nodes() - 1), min_size=1, max_size=6)),
                         dtype=g.idtype)
    inp, out, sg = ShaDowKHopSampler(fanouts, per_target=True, seed=5).sample(g, seeds)
    _check_per_target(g, seeds, inp, out, sg)


@settings(max_examples=15, deadline=None)
@given(g=graphs(min_nodes=1, max_nodes=40, max_edges=200), topk=st.integers(1, 10), data=st.data())
def test_ppr_scopes_are_induced_subgraphs_of_the_topk_sets(g, topk, data):
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, g.num_nodes() - 1), min_size=1, max_size=6)),
                         dtype=g.idtype)
    inp, out, sg = ShaDowPPRSampler(topk=topk, eps=1e-4).sample(g, seeds)
    _check_per_target(g, seeds, inp, out, sg)
    sets = ppr_node_sets(in_csr(g), seeds, topk=topk, eps=1e-4)
    assert torch.equal(inp.long(), sets.nodes)
    # each node carries its push estimate for its own target (the readout's pool weights)
    assert sg.ndata[PPR_SCORE].dtype == torch.float32
    torch.testing.assert_close(sg.ndata[PPR_SCORE], sets.scores.float())
    assert bool((sg.ndata[PPR_SCORE][sg.ndata[IS_TARGET]] > 0).all())


def test_seeds_reproduce(graph):
    seeds = torch.arange(0, 2000, 13)
    for per_target in (False, True):
        a = [ShaDowKHopSampler([5, 3], per_target=per_target, seed=9).sample(graph, seeds)[0] for _ in range(2)]
        s = ShaDowKHopSampler([5, 3], per_target=per_target, seed=9)
        b = [s.sample(graph, seeds)[0] for _ in range(2)]   # call 1 draws anew
        c = ShaDowKHopSampler([5, 3], per_target=per_target, seed=10).sample(graph, seeds)[0]
        assert torch.equal(a[0], a[1]) and torch.equal(a[0], b[0]) and not torch.equal(b[0], b[1])
        assert not torch.equal(a[0], c)


def _run(g, sampler, workers, **kw):
    loader = dgl.dataloading.DataLoader(g, torch.arange(0, 2000, 3), sampler, batch_size=128, num_workers=workers,
                                        timeout=120 if workers else 0, **kw)
    return [(inp, out, sg) for inp, out, sg in loader]


# per_target and PPR: 3 to 7 s each on 2 cores (the slow cases); the first, under 2 s, is the quick case
@pytest.mark.parametrize("make", quick_first([
    lambda: ShaDowKHopSampler([10, 5], seed=1, prefetch_node_feats=["feat"]),
    lambda: ShaDowKHopSampler([10, 5], per_target=True, seed=1, prefetch_node_feats=["feat"]),
    lambda: ShaDowPPRSampler(topk=20, prefetch_node_feats=["feat"]),
]), ids=["merged", "per_target", "ppr"])
def test_dataloader_workers_reproduce_and_prefetch(graph, make):
    runs = [_run(graph, make(), 2), _run(graph, make(), 2)]
    _same_batches(*runs)
    for i1, _, s1 in runs[0]:
        assert torch.equal(s1.ndata["feat"], graph.ndata["feat"][i1.long()])
        _edges(graph, s1)
    if isinstance(runs[0][0][2], dgl.DGLGraph) and GRAPH_ID in runs[0][0][2].ndata:
        seeds = runs[0][0][1]
        _check_per_target(graph, seeds, *runs[0][0])
    if make().__class__ is ShaDowPPRSampler:  # deterministic: workers give the main process's sets
        _same_batches(runs[0], _run(graph, make(), 0))


def _same_batches(a, b):
    """Equal outputs batch for batch (DGL's loader with workers yields the batches out of order)."""
    main = {int(out[0]): (inp, sg) for inp, out, sg in b}
    assert len(a) == len(main)
    for inp, out, sg in a:
        i0, s0 = main[int(out[0])]
        assert torch.equal(inp, i0) and torch.equal(sg.edata[dgl.EID], s0.edata[dgl.EID])


def test_full_neighbourhood_workers_equal_main_process(graph):
    for per_target in (False, True):
        _same_batches(_run(graph, ShaDowKHopSampler([-1], per_target=per_target, seed=1), 2),
                      _run(graph, ShaDowKHopSampler([-1], per_target=per_target, seed=1), 0))


@pytest.mark.parametrize("make, words", [
    (lambda: ShaDowKHopSampler([]), "fanouts to be a non-empty list"),
    (lambda: ShaDowKHopSampler([5, -3]), "fanouts[1] to be an int >= 0, or -1"),
    (lambda: ShaDowKHopSampler([5], prob=3), "prob to be the name of an edata field"),
    (lambda: ShaDowKHopSampler([5], prob="w", per_target=True), "prob=None with per_target=True"),
    (lambda: ShaDowKHopSampler([5], seed=-1), "seed to be an int in [0, 2^64)"),
    (lambda: ShaDowPPRSampler(topk=0), "topk to be a positive int"),
    (lambda: ShaDowPPRSampler(alpha=1.5), "alpha (the teleport probability) in (0, 1)"),
    (lambda: ShaDowPPRSampler(alpha=0), "alpha (the teleport probability) in (0, 1)"),
    (lambda: ShaDowPPRSampler(eps=0), "eps > 0"),
    (lambda: ShaDowPPRSampler(threshold=-1), "threshold to be None or a finite number >= 0"),
])
def test_bad_arguments_are_refused(make, words):
    with pytest.raises(DGLSamplingInputError) as err:
        make()
    assert isinstance(err.value, ValueError) and isinstance(err.value, dgl.DGLError)
    assert words in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.parametrize("sampler", [ShaDowKHopSampler([2], seed=0), ShaDowKHopSampler([2], per_target=True, seed=0),
                                     ShaDowPPRSampler()], ids=["merged", "per_target", "ppr"])
def test_bad_seeds_are_refused(graph, sampler):
    with pytest.raises(DGLSamplingInputError, match=r"seed nodes in \[0, \d+\)"):
        sampler.sample(graph, torch.tensor([0, 5000]))
    with pytest.raises(DGLSamplingInputError, match="non-empty batch"):
        sampler.sample(graph, torch.tensor([], dtype=torch.int64))
    if not getattr(sampler, "per_target", True):
        with pytest.raises(DGLSamplingInputError, match="distinct seed nodes"):
            sampler.sample(graph, torch.tensor([1, 1]))


def test_ppr_table_serves_the_sets_it_computed(graph):
    cached, fresh = ShaDowPPRSampler(topk=16), ShaDowPPRSampler(topk=16, cache=False)
    for seeds in (torch.arange(0, 300, 3), torch.arange(0, 600, 5), torch.arange(0, 300, 3)):
        a, b = cached.sample(graph, seeds), fresh.sample(graph, seeds)
        assert torch.equal(a[0], b[0]) and torch.equal(a[2].edata[dgl.EID], b[2].edata[dgl.EID])


@pytest.mark.parametrize("symmetric", [True, False])
def test_per_target_same_on_triton_and_native(graph, path, symmetric):
    """The sets and their batch (built on the device on the Triton path): the CPU path's nodes,
    set sizes, targets and edges; a symmetric graph's CPU batch lists its edges in the half-CSR
    order, so there each set's edges are compared as sets."""
    g = graph if symmetric else dgl.rand_graph(2000, 9000)
    seeds, excl = torch.arange(0, 2000, 97), torch.arange(0, g.num_edges(), 7)
    inp, out, sg = ShaDowKHopSampler([4, 3], per_target=True, seed=4).sample(g, seeds, exclude_eids=excl)
    with dgl_accel.use_backend("native"):
        ref = ShaDowKHopSampler([4, 3], per_target=True, seed=4).sample(g, seeds, exclude_eids=excl)
    assert torch.equal(inp, ref[0]) and torch.equal(sg.batch_num_nodes(), ref[2].batch_num_nodes())
    assert torch.equal(sg.batch_num_edges(), ref[2].batch_num_edges())
    for key in (GRAPH_ID, IS_TARGET):
        assert torch.equal(sg.ndata[key], ref[2].ndata[key])
    if symmetric:
        assert [_edges(g, a) for a in dgl.unbatch(sg)] == [_edges(g, b) for b in dgl.unbatch(ref[2])]
    else:
        assert torch.equal(sg.edata[dgl.EID], ref[2].edata[dgl.EID])
    assert torch.equal(out, seeds) and not set(sg.edata[dgl.EID].tolist()) & set(excl.tolist())
    for part in dgl.unbatch(sg):
        _edges(g, part)


def test_signature_is_dgls_plus_keyword_only_extras():
    import inspect

    mine = list(inspect.signature(ShaDowKHopSampler).parameters.values())
    theirs = list(inspect.signature(dgl.dataloading.ShaDowKHopSampler).parameters.values())
    assert [(p.name, p.kind, p.default) for p in mine[:len(theirs)]] == \
        [(p.name, p.kind, p.default) for p in theirs]
    extras = mine[len(theirs):]
    assert [p.name for p in extras] == ["per_target", "seed"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in extras)
    assert [p.name for p in list(inspect.signature(ShaDowKHopSampler.sample).parameters.values())] == \
        [p.name for p in list(inspect.signature(dgl.dataloading.ShaDowKHopSampler.sample).parameters.values())]


def test_ppr_sampler_same_on_triton_and_native(path):
    torch.manual_seed(1)
    g = dgl.to_bidirected(dgl.rand_graph(40, 120))
    seeds = torch.tensor([0, 7, 19])
    inp, out, sg = ShaDowPPRSampler(topk=6, eps=1e-3, cache=False).sample(g, seeds)
    with dgl_accel.use_backend("native"):
        ref = ShaDowPPRSampler(topk=6, eps=1e-3, cache=False).sample(g, seeds)
    assert torch.equal(inp, ref[0]) and torch.equal(sg.batch_num_edges(), ref[2].batch_num_edges())
    assert [_edges(g, a) for a in dgl.unbatch(sg)] == [_edges(g, b) for b in dgl.unbatch(ref[2])]
    assert torch.equal(sg.ndata[PPR_SCORE], ref[2].ndata[PPR_SCORE])


@pytest.mark.interpreter
@pytest.mark.parametrize("symmetric", [False, True])
def test_merged_scope_on_the_device_path_is_the_cpu_paths(graph, symmetric):
    """On the Triton path (a CUDA graph; here the interpreter) the merged scope and its subgraph are
    built where the graph lives: the CPU path's node list and edges, uniform, weighted, with
    replacement and with an exclusion (a symmetric graph's CPU subgraph lists its edges in the
    half-CSR order, so there the edge sets are compared)."""
    g = graph if symmetric else dgl.rand_graph(1500, 9000)
    w = torch.rand(g.num_edges(), generator=torch.Generator().manual_seed(3))
    w[::4] = 0
    g = g.clone() if symmetric else g
    g.edata["q"] = w
    seeds, excl = torch.arange(0, 1500, 13), torch.arange(0, g.num_edges(), 5)
    for kw in (dict(), dict(prob="q"), dict(replace=True)):
        out = {}
        for name in ("native", "triton"):
            with dgl_accel.use_backend(name):
                out[name] = ShaDowKHopSampler([5, 3], seed=2, **kw).sample(g, seeds, exclude_eids=excl)
        (inp, _, sg), (ref_inp, _, ref) = out["triton"], out["native"]
        assert torch.equal(inp, ref_inp) and inp.dtype == ref_inp.dtype, kw
        assert _edges(g, sg) == _edges(g, ref), kw
        assert not set(sg.edata[dgl.EID].tolist()) & set(excl.tolist())
        if not symmetric:
            assert torch.equal(sg.edata[dgl.EID], ref.edata[dgl.EID]), kw
