"""Tests for dgl_accel.graph: cached CSR views and degree statistics."""
import gc

import dgl
import numpy as np
import pytest
import scipy.stats
import torch

from dgl_accel.graph import cache_info, clear_cache, degree_stats, in_csr, out_csr

IDTYPES = [torch.int32, torch.int64]


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def random_graph(seed, idtype, num_nodes=50, num_edges=300):
    """Random multigraph: duplicate edges, self loops, and (usually) zero-in-degree nodes."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    # Destinations only in the lower 80%, so the rest have zero in-degree.
    dst = torch.randint(0, max(1, int(num_nodes * 0.8)), (num_edges,), generator=gen)
    if num_edges:
        src[:5], dst[:5] = 3, 3  # self loops, also a multi-edge
        src[5:8], dst[5:8] = 1, 2  # repeated edge
    return dgl.graph((src, dst), num_nodes=num_nodes, idtype=idtype)


def graphs(idtype):
    yield random_graph(0, idtype)
    yield random_graph(1, idtype, num_nodes=200, num_edges=2000)
    yield random_graph(2, idtype, num_nodes=7, num_edges=0)  # no edges
    yield dgl.graph(([], []), num_nodes=0, idtype=idtype)  # empty graph
    # Block (MFG): in-edges of some seeds, src nodes != dst nodes.
    g = random_graph(3, idtype, num_nodes=100, num_edges=600)
    seeds = torch.tensor([0, 5, 7, 11, 99], dtype=idtype)  # 99 has no in-edges
    yield dgl.to_block(dgl.in_subgraph(g, seeds), dst_nodes=seeds)
    yield dgl.to_block(g)


def csr_to_triples(s, transpose=False):
    """(src, dst, eid) sorted by eid, rebuilt from a Structure."""
    counts = s.indptr[1:] - s.indptr[:-1]
    rows = torch.repeat_interleave(torch.arange(s.num_rows), counts)
    cols = s.indices.long()
    src, dst = (rows, cols) if transpose else (cols, rows)
    order = torch.argsort(s.eids.long())
    return src[order], dst[order], s.eids.long()[order]


def assert_matches(g, reference=None):
    """in_csr/out_csr of g hold exactly the edges of `reference` (default g itself)."""
    ref = g if reference is None else reference
    src, dst, eid = (t.long() for t in ref.edges(form="all", order="eid"))
    for s, transpose, n_rows, n_cols in [
        (in_csr(g), False, g.num_dst_nodes(), g.num_src_nodes()),
        (out_csr(g), True, g.num_src_nodes(), g.num_dst_nodes()),
    ]:
        assert s.indptr.dtype == torch.int64
        assert s.indices.dtype == g.idtype and s.eids.dtype == g.idtype
        assert (s.num_rows, s.num_cols) == (n_rows, n_cols)
        assert s.indptr.shape == (n_rows + 1,)
        assert s.indptr[0] == 0 and s.indptr[-1] == g.num_edges()
        assert bool((s.indptr[1:] >= s.indptr[:-1]).all())
        assert s.device == g.device
        # eids are unique, so equality after sorting by eid is multiset equality of edges.
        got = csr_to_triples(s, transpose)
        for a, b in zip(got, (src, dst, eid)):
            assert torch.equal(a, b)


@pytest.mark.parametrize("idtype", IDTYPES)
def test_csr_reproduces_edges(idtype):
    for g in graphs(idtype):
        assert_matches(g)


@pytest.mark.parametrize("idtype", IDTYPES)
def test_out_csr_is_transpose(idtype):
    for g in graphs(idtype):
        a, b = in_csr(g), out_csr(g)
        n = g.num_edges()
        # Dense count matrices (multi-edges add up) built straight from each CSR.
        dense_in = torch.zeros(a.num_rows, a.num_cols)
        dense_out = torch.zeros(b.num_rows, b.num_cols)
        rows_in = torch.repeat_interleave(torch.arange(a.num_rows), a.indptr.diff())
        rows_out = torch.repeat_interleave(torch.arange(b.num_rows), b.indptr.diff())
        dense_in.index_put_((rows_in, a.indices.long()), torch.ones(n), accumulate=True)
        dense_out.index_put_((rows_out, b.indices.long()), torch.ones(n), accumulate=True)
        assert torch.equal(dense_in.T, dense_out)
        # Same edge ids on both sides: entry (dst, src, eid) of one is (src, dst, eid) of the other.
        assert torch.equal(torch.sort(a.eids).values, torch.sort(b.eids).values)


def test_cache_hit_returns_same_object():
    g = random_graph(0, torch.int64)
    assert in_csr(g) is in_csr(g)
    assert out_csr(g) is out_csr(g)
    assert degree_stats(g) is degree_stats(g)
    info = cache_info()
    assert info["graphs"] == 1 and info["hits"] >= 3


def test_cache_released_with_graph():
    g = random_graph(0, torch.int64)
    in_csr(g)
    assert cache_info()["graphs"] == 1
    del g
    gc.collect()
    assert cache_info()["graphs"] == 0


@pytest.mark.parametrize("idtype", IDTYPES)
def test_rebuilt_after_mutation(idtype):
    g = random_graph(0, idtype)
    old = in_csr(g)
    old_stats = degree_stats(g)
    g.add_edges(torch.tensor([0, 1], dtype=idtype), torch.tensor([45, 45], dtype=idtype))
    new = in_csr(g)
    assert new is not old and new.num_edges == old.num_edges + 2
    assert degree_stats(g).num_edges == old_stats.num_edges + 2
    assert_matches(g)

    g.remove_edges(torch.tensor([0, 10, 20], dtype=idtype))
    assert in_csr(g).num_edges == new.num_edges - 3
    assert_matches(g)

    # Same counts after remove + add: the rebuilt index must still be detected.
    before = in_csr(g)
    g.remove_edges(torch.tensor([0], dtype=idtype))
    g.add_edges(torch.tensor([4], dtype=idtype), torch.tensor([44], dtype=idtype))
    assert g.num_edges() == before.num_edges
    assert in_csr(g) is not before
    assert_matches(g)

    g.add_nodes(3)
    assert in_csr(g).num_rows == g.num_nodes() and out_csr(g).num_rows == g.num_nodes()
    assert_matches(g)
    assert cache_info()["invalidations"] >= 4


def test_user_graph_unchanged():
    g = random_graph(0, torch.int64)
    g.ndata["h"] = torch.randn(g.num_nodes(), 4)
    g.edata["w"] = torch.randn(g.num_edges())
    edges = [t.clone() for t in g.edges(form="all", order="eid")]
    h, w = g.ndata["h"].clone(), g.edata["w"].clone()
    in_csr(g), out_csr(g), degree_stats(g)
    assert set(g.ndata.keys()) == {"h"} and set(g.edata.keys()) == {"w"}
    assert torch.equal(g.ndata["h"], h) and torch.equal(g.edata["w"], w)
    for a, b in zip(g.edges(form="all", order="eid"), edges):
        assert torch.equal(a, b)


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
def test_restricted_formats(fmt):
    # A graph restricted to one sparse format makes DGL refuse the others; we fall back.
    full = random_graph(1, torch.int64)
    assert_matches(full.formats(fmt), reference=full)


@pytest.mark.parametrize("idtype", IDTYPES)
def test_degree_stats_match_numpy(idtype):
    for g in graphs(idtype):
        _, dst = g.edges()
        deg = np.bincount(dst.numpy().astype(np.int64), minlength=g.num_dst_nodes()).astype(float)
        s = degree_stats(g)
        assert (s.num_nodes, s.num_src, s.num_edges) == (g.num_dst_nodes(), g.num_src_nodes(), g.num_edges())
        if deg.size == 0:
            assert s.avg_degree == 0 and s.max_degree == 0 and s.num_zero_in_degree == 0
            continue
        std = deg.std()
        assert s.avg_degree == pytest.approx(deg.mean())
        assert s.max_degree == deg.max()
        assert s.std == pytest.approx(std)
        assert s.cv == pytest.approx(std / deg.mean() if deg.mean() else 0.0)
        expected_skew = scipy.stats.skew(deg, bias=True) if std > 0 else 0.0
        assert s.skewness == pytest.approx(expected_skew, abs=1e-9)
        assert s.num_zero_in_degree == int((deg == 0).sum())
        assert [s.p50, s.p90, s.p99] == pytest.approx(list(np.quantile(deg, [0.5, 0.9, 0.99])))
        assert s.num_hubs_over_1024 == int((deg > 1024).sum())


def test_degree_stats_hubs_and_constant_degree():
    n_hub = 1500
    src = torch.arange(n_hub)
    dst = torch.cat([torch.zeros(1100, dtype=torch.long), torch.ones(400, dtype=torch.long)])
    s = degree_stats(dgl.graph((src, dst), num_nodes=n_hub))
    assert s.num_hubs_over_1024 == 1 and s.max_degree == 1100
    ring = dgl.graph((torch.arange(10), (torch.arange(10) + 1) % 10))
    r = degree_stats(ring)
    assert r.std == 0 and r.skewness == 0 and r.cv == 0 and r.avg_degree == 1


def test_heterograph_rejected():
    hg = dgl.heterograph(
        {("user", "follows", "user"): ([0, 1], [1, 2]), ("user", "likes", "item"): ([0], [0])}
    )
    for fn in (in_csr, out_csr, degree_stats):
        with pytest.raises(ValueError, match="expected"):
            fn(hg)
    bipartite = dgl.heterograph({("user", "likes", "item"): ([0, 1], [0, 0])})
    with pytest.raises(ValueError, match="to_homogeneous"):
        in_csr(bipartite)  # samplers' default: one node set
    for fn in (in_csr, out_csr):
        with pytest.raises(ValueError, match=r"expected a homogeneous graph or block.*relation graph.*Fix:"):
            fn(hg, relation=True)  # several relations: not even for aggregation
    assert cache_info()["graphs"] == 0
    # the aggregation's view of a relation graph between two node types: rows = items, cols = users
    csr = in_csr(bipartite, relation=True)
    assert (csr.num_rows, csr.num_cols) == (1, 2) and csr.indptr.tolist() == [0, 2]
    assert out_csr(bipartite, relation=True).indptr.tolist() == [0, 1, 2]


# --------------------------------------------- relation views: DGL's update_all runs on a new g[etype] per call
def _dgl_graphconv_steps(g, x, conv, steps):
    """(cache_info after each forward+backward of DGL's own GraphConv under enable(), outputs)."""
    import dgl_accel
    infos, outs = [], []
    with dgl_accel.enabled():
        for _ in range(steps):
            out = conv(g, x)
            out.sum().backward()
            infos.append(cache_info())
            outs.append(out.detach())
    return infos, outs


@pytest.mark.parametrize("backend", ["native", "triton"])
def test_dgl_graphconv_under_enable_builds_the_structure_once(backend):
    import dgl_accel
    g = dgl.add_self_loop(random_graph(1, torch.int64, num_nodes=40, num_edges=200))
    conv = dgl.nn.GraphConv(6, 3)
    x = torch.randn(40, 6, requires_grad=True)
    with dgl_accel.use_backend(backend):
        infos, outs = _dgl_graphconv_steps(g, x, conv, 4)
    misses = [i["misses"] for i in infos]
    assert misses[0] > 0 and misses == [misses[0]] * 4  # everything built on the first call only
    assert infos[-1]["hits"] > infos[0]["hits"] and infos[-1]["relation_views"] == 1
    with torch.no_grad():
        assert torch.allclose(outs[-1], conv(g, x), atol=1e-5)  # DGL's own numbers


def test_relation_view_entry_follows_mutation_and_dies_with_the_graph():
    g = dgl.add_self_loop(random_graph(2, torch.int64, num_nodes=30, num_edges=120))
    conv = dgl.nn.GraphConv(4, 2)
    x = torch.randn(30, 4)
    _dgl_graphconv_steps(g, x, conv, 2)
    before = cache_info()
    g.add_edges(torch.tensor([0, 1]), torch.tensor([29, 29]))  # a new structure index
    _, outs = _dgl_graphconv_steps(g, x, conv, 1)
    assert cache_info()["misses"] > before["misses"]
    with torch.no_grad():
        assert torch.allclose(outs[0], conv(g, x), atol=1e-5)  # built from the new edges
    del g
    gc.collect()
    assert cache_info()["relation_views"] == 0


def test_relation_view_links_stay_bounded():
    from dgl_accel.graph import structure
    g = random_graph(3, torch.int64)
    import dgl_accel
    with dgl_accel.enabled():
        for _ in range(3 * structure.VIEW_LINKS_PRUNE):
            g[g.canonical_etypes[0]]  # every view dies at once
    assert len(structure._VIEW_OF) <= structure.VIEW_LINKS_PRUNE


def test_swapped_hetero_graph_conv_builds_each_relation_once():
    """HeteroGraphConv cuts hg[etype] per call and DGL's update_all cuts a view of that view; the
    backward runs after both are gone: every relation's structure is still built on the first call
    only."""
    import dgl_accel
    gen = torch.Generator().manual_seed(0)
    hg = dgl.heterograph({("u", "follows", "u"): (torch.randint(0, 30, (90,), generator=gen),
                                                  torch.randint(0, 30, (90,), generator=gen)),
                          ("u", "buys", "i"): (torch.randint(0, 30, (60,), generator=gen),
                                               torch.randint(0, 20, (60,), generator=gen))},
                         num_nodes_dict={"u": 30, "i": 20})
    conv = dgl.nn.HeteroGraphConv({"follows": dgl.nn.SAGEConv(4, 3, "mean"), "buys": dgl.nn.SAGEConv(4, 3, "mean")})
    dgl_accel.swap(conv)
    x = {"u": torch.randn(30, 4, requires_grad=True), "i": torch.randn(20, 4)}
    misses = []
    for _ in range(4):
        out = conv(hg, x)
        sum(v.sum() for v in out.values()).backward()
        misses.append(cache_info()["misses"])
    assert misses[0] > 0 and misses == [misses[0]] * 4, misses
