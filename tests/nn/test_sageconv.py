"""``dgl_accel.nn.SAGEConv``'s one-product mean forward (a layer narrowing at least
``ONE_PRODUCT_MIN_RATIO`` times: fc_neigh and fc_self as one product, then the mean of the neighbour
half): DGL's outputs and gradients on graphs with empty rows and on blocks, with bias, activation and
norm; narrower layers, pairs of features and edge weights take the direct mean forward (DGL's
operations with the aggregation called directly), which gives DGL's numbers too; so do layers where
the product would not run on oneDNN (Intel CPUs by default)."""
import copy

import dgl
import dgl.nn
import pytest
import torch

import dgl_accel
import dgl_accel.nn.sageconv as sageconv
from dgl_accel.nn.sageconv import ONE_PRODUCT_MIN_RATIO
from dgl_accel.testing.tolerances import assert_close


@pytest.fixture
def onednn(monkeypatch):
    """The one-product forward's condition on the machine (oneDNN products) set either way."""
    def set_onednn(on: bool):
        monkeypatch.setattr(sageconv, "onednn_enabled", lambda: on)
    set_onednn(True)
    return set_onednn


def _graph():
    gen = torch.Generator().manual_seed(4)
    src, dst = torch.randint(0, 40, (300,), generator=gen), torch.randint(0, 36, (300,), generator=gen)
    return dgl.graph((src, dst), num_nodes=40)  # nodes 36-39: no in-edges (mean 0)


def _run(conv, g, x):
    conv.zero_grad()
    out = conv(g, x)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), {k: p.grad.clone() for k, p in conv.named_parameters()}


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"activation": torch.tanh, "norm": torch.nn.LayerNorm(4)}])
def test_one_product_mean_equals_dgls_module(path, block, kw, onednn, monkeypatch):
    g = _graph()
    if block:
        g = dgl.to_block(dgl.in_subgraph(g, torch.arange(20)), torch.arange(20))
    torch.manual_seed(0)
    theirs = dgl.nn.SAGEConv(4 * ONE_PRODUCT_MIN_RATIO, 4, "mean", **kw)
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    x = torch.randn(g.num_src_nodes(), 4 * ONE_PRODUCT_MIN_RATIO)
    want = _run(theirs, g, x)
    calls = []
    one_product = sageconv.SAGEConv._mean_one_product
    monkeypatch.setattr(sageconv.SAGEConv, "_mean_one_product", lambda *a: calls.append(1) or one_product(*a))
    dgl_accel.reset_stats()
    got = _run(ours, g, x)
    assert calls == [1]
    stats = dgl_accel.stats()
    assert "copy_u_mean" in stats and not any(k.startswith("fallthrough") for k in str(stats).split("'")), stats
    assert_close(got[0], want[0])
    for k in want[1]:
        assert_close(got[1][k], want[1][k], msg=k)


def test_narrower_layers_feature_pairs_edge_weights_and_no_onednn_take_the_direct_mean(monkeypatch, onednn):
    calls = []
    monkeypatch.setattr(dgl_accel.nn.SAGEConv, "_mean_one_product", lambda self, g, f: calls.append(1))
    g = _graph()
    narrow = dgl_accel.nn.SAGEConv(4 * ONE_PRODUCT_MIN_RATIO - 1, 4, "mean")
    narrow(g, torch.randn(40, 4 * ONE_PRODUCT_MIN_RATIO - 1))
    wide = dgl_accel.nn.SAGEConv(4 * ONE_PRODUCT_MIN_RATIO, 4, "mean")
    x = torch.randn(40, 4 * ONE_PRODUCT_MIN_RATIO)
    wide(g, (x, x))  # a pair: the direct mean forward
    wide(g, x, edge_weight=torch.rand(g.num_edges()))  # edge weights: the direct mean forward
    assert calls == []
    onednn(False)  # an Intel CPU's default: DGL's two products beat the one there
    wide(g, x)
    assert calls == []
    onednn(True)
    wide(g, x)
    assert calls == [1]


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("in_feats, out_feats", [(12, 4), (4, 6)])  # fc_neigh before / after the aggregation
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"activation": torch.tanh, "norm": torch.nn.LayerNorm(4)}])
def test_gcn_equals_dgls_module(path, block, in_feats, out_feats, weighted, kw):
    g = _graph()
    if block:
        g = dgl.to_block(dgl.in_subgraph(g, torch.arange(20)), torch.arange(20))
    if "norm" in kw:
        kw = dict(kw, norm=torch.nn.LayerNorm(out_feats))
    torch.manual_seed(0)
    theirs = dgl.nn.SAGEConv(in_feats, out_feats, "gcn", **kw)
    ours, calls = _swapped_counting(theirs, "_gcn")
    x = torch.randn(g.num_src_nodes(), in_feats)
    ew = torch.rand(g.num_edges()) + 0.5 if weighted else None
    for _ in range(2):  # the second call reads the cached degrees
        _assert_same(_run_weighted(ours, g, x, ew), _run_weighted(theirs, g, x, ew))
    assert calls == [1, 1]


def _swapped_counting(theirs, method: str):
    """(a swapped deep copy of ``theirs`` whose ``method`` counts its calls, the list of calls)."""
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    calls = []
    original = getattr(type(ours), method)
    setattr(ours, method, lambda *a: calls.append(1) or original(ours, *a))
    return ours, calls


def _assert_same(got, want):
    assert_close(got[0], want[0])
    for k in want[1]:
        assert_close(got[1][k], want[1][k], msg=k)


def _run_weighted(conv, g, x, ew):
    conv.zero_grad()
    out = conv(g, x, edge_weight=ew)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), {k: p.grad.clone() for k, p in conv.named_parameters()}


def _relation_graph():
    gen = torch.Generator().manual_seed(5)
    src, dst = torch.randint(0, 40, (200,), generator=gen), torch.randint(0, 26, (200,), generator=gen)
    return dgl.heterograph({("user", "rates", "item"): (src, dst)}, {"user": 40, "item": 30})  # 26-29: empty


@pytest.mark.parametrize("aggregator", ["mean", "pool"])
@pytest.mark.parametrize("graph", ["graph", "block", "relation pair", "graph pair"])
@pytest.mark.parametrize("in_feats, out_feats", [(12, 4), (4, 6)])  # fc_neigh before / after the aggregation
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"activation": torch.tanh, "norm": torch.nn.LayerNorm(4)},
                                {"feat_drop": 0.5}])
def test_direct_forward_equals_dgls_module(path, aggregator, graph, in_feats, out_feats, weighted, kw):
    """The direct mean (narrower than the one-product rule) and pool forwards: DGL's outputs and
    gradients, dropout included (the same draws in the same order: a pair's source features first)."""
    g = _relation_graph() if graph == "relation pair" else _graph()
    if graph == "block":
        g = dgl.to_block(dgl.in_subgraph(g, torch.arange(20)), torch.arange(20))
    if "norm" in kw:
        kw = dict(kw, norm=torch.nn.LayerNorm(out_feats))
    in_dst = in_feats + 1 if graph == "relation pair" else in_feats
    torch.manual_seed(0)
    theirs = dgl.nn.SAGEConv((in_feats, in_dst) if graph.endswith("pair") else in_feats, out_feats, aggregator, **kw)
    ours, calls = _swapped_counting(theirs, "_direct")
    x = torch.randn(g.num_src_nodes(), in_feats)
    feat = (x, torch.randn(g.num_dst_nodes(), in_dst)) if graph.endswith("pair") else x
    ew = torch.rand(g.num_edges()) + 0.5 if weighted else None
    torch.manual_seed(1)
    want = _run_weighted(theirs, g, feat, ew)
    dgl_accel.reset_stats()
    torch.manual_seed(1)
    got = _run_weighted(ours, g, feat, ew)
    op = ("u_mul_e_" if weighted else "copy_u_") + ("max" if aggregator == "pool" else "mean")
    assert calls == [1] and any(k.startswith(op) for k in dgl_accel.stats()), dgl_accel.stats()
    _assert_same(got, want)
