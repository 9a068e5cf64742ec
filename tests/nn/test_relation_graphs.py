"""Uni-bipartite relation graphs (``hg[etype]`` between two node types, as ``dgl.nn.HeteroGraphConv``
passes them) in the drop-ins and the aggregation, and ``swap()`` on RGCN-style models: outputs and
gradients equal DGL's on both paths (issue 14, items 3 and 5)."""
import copy

import dgl
import dgl.nn
import pytest
import torch
from dgl import DGLError

import dgl_accel
import dgl_accel.nn
from dgl_accel.functional import gspmm
from dgl_accel.graph.structure import check_graph, in_csr, is_relation_graph, out_csr
from dgl_accel.graph.views import DGLGraphViews
from dgl_accel.testing.tolerances import assert_close


def _relation(num_src=12, num_dst=7, num_edges=40, seed=0, cover=True):
    """A uni-bipartite ('u', 'e', 'i') graph; ``cover``: every destination has an in-edge."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, num_dst, (num_edges,), generator=gen)
    if cover:
        dst[:num_dst] = torch.arange(num_dst)
    else:
        dst[dst == num_dst - 1] = 0  # the last destination has no in-edge
    return dgl.heterograph({("u", "e", "i"): (src, dst)}, num_nodes_dict={"u": num_src, "i": num_dst})


def _run(module, g, feats, **kw):
    """(output, input grads, edge-weight grad, parameter grads) of one forward/backward."""
    module.zero_grad()
    feats = tuple(f.clone().requires_grad_() for f in feats)
    ew = kw.pop("edge_weight", None)
    ew = None if ew is None else ew.clone().requires_grad_()
    out = module(g, feats if len(feats) > 1 else feats[0], edge_weight=ew, **kw)
    out.backward(torch.ones_like(out) + torch.arange(out.shape[-1], dtype=out.dtype))
    grads = {k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}
    return out.detach(), [f.grad for f in feats], (None if ew is None else ew.grad), grads


def _assert_same(a, b, msg):
    assert_close(a[0], b[0], msg=f"{msg} out")
    assert len(a[1]) == len(b[1])
    for ga, gb in zip(a[1], b[1]):
        assert (ga is None) == (gb is None), msg
        if ga is not None:
            assert_close(ga, gb, msg=f"{msg} dfeat")
    if a[2] is not None or b[2] is not None:
        assert_close(a[2], b[2], msg=f"{msg} dw")
    assert a[3].keys() == b[3].keys(), msg
    for k in a[3]:
        assert_close(a[3][k], b[3][k], msg=f"{msg} d{k}")


def _ran_here(op):
    """Every aggregation since the last reset_stats() was ``op`` on a dgl-accel path (no fallthrough)."""
    stats = dgl_accel.stats()
    assert {k.removesuffix("_backward") for k in stats} == {op}, stats
    assert not any(p.startswith("fallthrough") for v in stats.values() for p in v), stats


def _swapped_copy(native):
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    return ours


# ------------------------------------------------------------------------------------ the repro
def test_issue_repro_graphconv_on_a_relation_graph(path):
    torch.manual_seed(0)
    g = dgl.heterograph({("u", "e", "i"): (torch.randint(0, 100, (600,)), torch.randint(0, 50, (600,)))})
    feats = (torch.randn(100, 16), torch.randn(50, 16))
    native = dgl.nn.GraphConv(16, 8, allow_zero_in_degree=True)
    ours = dgl_accel.nn.GraphConv(16, 8, allow_zero_in_degree=True)
    ours.load_state_dict(native.state_dict())
    dgl_accel.reset_stats()
    _assert_same(_run(ours, g, feats), _run(native, g, feats), "repro")
    _ran_here("copy_u_sum")


# ------------------------------------------------------------------------- the graph layer
def test_relation_graph_views_match_dgl():
    g = _relation(cover=False)
    assert is_relation_graph(g) and not is_relation_graph(dgl.rand_graph(4, 6))
    check_graph(g, relation=True)
    with pytest.raises(ValueError, match=r"expected a homogeneous graph or block.*not here.*Fix:"):
        check_graph(g)  # the samplers' check stays strict
    views = DGLGraphViews(g)
    assert views.bipartite and (views.num_src, views.num_dst, views.num_edges) == (12, 7, 40)
    src, dst = g.edges(order="eid")
    for direction, rows, cols, (r, c) in (("in", 7, 12, (dst, src)), ("out", 12, 7, (src, dst))):
        csr = views.csr(direction)
        assert (csr.num_rows, csr.num_cols) == (rows, cols)
        dense = torch.zeros(rows, cols)
        counts = csr.indptr[1:] - csr.indptr[:-1]
        dense.index_put_((torch.repeat_interleave(torch.arange(rows), counts), csr.indices.long()),
                         torch.ones(csr.indices.numel()), accumulate=True)
        expected = torch.zeros(rows, cols).index_put_((r, c), torch.ones(40), accumulate=True)
        assert torch.equal(dense, expected), direction
        assert torch.equal(r[csr.eids.long()], torch.repeat_interleave(torch.arange(rows), counts))
    assert in_csr(g, relation=True) is views.csr("in") and out_csr(g, relation=True) is views.csr("out")
    assert all(torch.equal(a, b) for a, b in zip(views.edges_by_id(), (src, dst)))
    assert torch.equal(views.in_degrees(), g.in_degrees()) and views.in_degrees().shape == (7,)
    assert torch.equal(views.out_degrees(), g.out_degrees()) and views.out_degrees().shape == (12,)


def test_relation_graph_cache_follows_mutation_and_restricted_formats(path):
    g = _relation()
    x = torch.randn(12, 2)
    before = gspmm(g, "copy_u", "sum", x)
    assert in_csr(g, relation=True) is in_csr(g, relation=True)  # cached
    g.add_edges(torch.tensor([0]), torch.tensor([6]))  # mutated in place: rebuilt, not stale
    assert in_csr(g, relation=True).indices.numel() == 41
    assert_close(gspmm(g, "copy_u", "sum", x), before + torch.nn.functional.one_hot(
        torch.tensor(6), 7).float().unsqueeze(1) * x[0])
    full = _relation(seed=4)
    for fmt in ("csr", "csc", "coo"):  # a relation graph restricted to one sparse format
        h = _relation(seed=4).formats(fmt)
        views = DGLGraphViews(h)
        for direction in ("in", "out"):
            a, b = views.csr(direction), DGLGraphViews(full).csr(direction)
            assert torch.equal(a.indptr, b.indptr), (fmt, direction)
        assert all(torch.equal(a, b) for a, b in zip(views.edges_by_id(), full.edges(order="eid"))), fmt
        if fmt != "csr":  # DGL's own SpMM refuses CSR-only graphs, homogeneous or not
            assert_close(gspmm(h, "copy_u", "sum", x), dgl.ops.copy_u_sum(full, x), msg=fmt)


@pytest.mark.parametrize("op", ["copy_u", "u_mul_e"])
@pytest.mark.parametrize("reduce,norm", [("sum", "none"), ("sum", "both"), ("sum", "left"), ("sum", "right"),
                                         ("mean", "none")])
def test_gspmm_on_a_relation_graph_matches_dgl(path, op, reduce, norm):
    """What the patched route runs once patching accepts relation graphs (and GraphConv does now)."""
    g = _relation(cover=False)
    x, w = torch.randn(12, 3), torch.rand(40) + 0.5
    xo, wo = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = gspmm(g, op, reduce, xo, wo if op == "u_mul_e" else None, norm=norm)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    src = xr * g.out_degrees().clamp(min=1).float().pow(-0.5 if norm == "both" else -1).unsqueeze(1) \
        if norm in ("both", "left") else xr
    ref = dgl.ops.gspmm(g, "copy_lhs" if op == "copy_u" else "mul", reduce, src,
                        wr.unsqueeze(1) if op == "u_mul_e" else None)
    if norm in ("both", "right"):
        ref = ref * g.in_degrees().clamp(min=1).float().pow(-0.5 if norm == "both" else -1).unsqueeze(1)
    upstream = torch.randn(7, 3)
    (out * upstream).sum().backward()
    (ref * upstream).sum().backward()
    assert_close(out, ref)
    assert_close(xo.grad, xr.grad)
    if op == "u_mul_e":
        assert_close(wo.grad, wr.grad)


# ------------------------------------------------------------------------------ the drop-ins
@pytest.mark.parametrize("norm", ["both", "right", "left", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("in_f,out_f", [(3, 5), (6, 2)])  # aggregate first / multiply first
def test_graphconv_on_relation_graphs_matches_dgl(path, norm, weighted, in_f, out_f):
    g = _relation(seed=1)
    torch.manual_seed(0)
    native = dgl.nn.GraphConv(in_f, out_f, norm=norm, activation=torch.relu)
    ours = _swapped_copy(native)
    feats = (torch.randn(12, in_f), torch.randn(7, in_f))
    ew = torch.rand(40) + 0.5 if weighted else None
    dgl_accel.reset_stats()
    _assert_same(_run(ours, g, feats, edge_weight=ew), _run(native, g, feats, edge_weight=ew), norm)
    _ran_here("u_mul_e_sum" if weighted else "copy_u_sum")
    # a single source tensor, as DGL allows on a relation graph, and an external weight
    _assert_same(_run(ours, g, feats[:1]), _run(native, g, feats[:1]), f"{norm} one tensor")
    bare, bare_ours = dgl.nn.GraphConv(in_f, out_f, norm=norm, weight=False), None
    bare_ours = _swapped_copy(bare)
    weight = torch.randn(in_f, out_f)
    _assert_same(_run(bare_ours, g, feats, weight=weight), _run(bare, g, feats, weight=weight), f"{norm} weight=")


def test_zero_in_degree_semantics_are_dgls():
    g = _relation(cover=False)
    feats = (torch.randn(12, 4), torch.randn(7, 4))
    native = dgl.nn.GraphConv(4, 3)
    ours = _swapped_copy(native)
    with pytest.raises(DGLError) as theirs:
        native(g, feats)
    with pytest.raises(DGLError) as mine:
        ours(g, feats)
    assert str(mine.value) == str(theirs.value)
    native.set_allow_zero_in_degree(True)
    ours.set_allow_zero_in_degree(True)
    out = ours(g, feats)
    assert_close(out, native(g, feats))
    assert torch.equal(out[6], torch.relu(ours.bias) if ours._activation else ours.bias.detach())
    with pytest.raises(DGLError) as theirs:  # an external weight where the module has its own
        native(g, feats, weight=torch.randn(4, 3))
    with pytest.raises(DGLError) as mine:
        ours(g, feats, weight=torch.randn(4, 3))
    assert str(mine.value) == str(theirs.value)


@pytest.mark.parametrize("kind", ["SAGEConv-mean", "SAGEConv-gcn", "SAGEConv-pool", "GINConv-sum", "GINConv-mean"])
def test_sage_and_gin_on_relation_graphs_match_dgl(path, kind):
    g = _relation(seed=2, cover=False)
    torch.manual_seed(0)
    name, aggr = kind.split("-")
    native = (dgl.nn.SAGEConv(4, 3, aggr) if name == "SAGEConv"
              else dgl.nn.GINConv(torch.nn.Linear(4, 3), aggr, learn_eps=True))
    ours = _swapped_copy(native)
    feats = (torch.randn(12, 4), torch.randn(7, 4))
    ew = None if aggr == "pool" else torch.rand(40) + 0.5
    dgl_accel.reset_stats()
    _assert_same(_run(ours, g, feats), _run(native, g, feats), kind)
    assert not any("heterograph" in label for v in dgl_accel.stats().values() for label in v), dgl_accel.stats()
    _assert_same(_run(ours, g, feats, edge_weight=ew), _run(native, g, feats, edge_weight=ew), f"{kind} weighted")


# ------------------------------------------------------------------------ RGCN-style models
def _hetero_graph(seed=0):
    gen = torch.Generator().manual_seed(seed)

    def edges(ns, nd, ne):
        return torch.randint(0, ns, (ne,), generator=gen), torch.randint(0, nd, (ne,), generator=gen)

    return dgl.heterograph({("u", "follows", "u"): edges(10, 10, 30), ("u", "buys", "i"): edges(10, 6, 25),
                            ("i", "bought_by", "u"): edges(6, 10, 25)}, num_nodes_dict={"u": 10, "i": 6})


class RGCN(torch.nn.Module):
    def __init__(self, dims=(5, 4, 3)):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            act = torch.relu if i < len(dims) - 2 else None
            self.layers.append(dgl.nn.HeteroGraphConv({
                "follows": dgl.nn.GraphConv(a, b, norm="both", activation=act, allow_zero_in_degree=True),
                "buys": dgl.nn.SAGEConv(a, b, "mean", activation=act),
                "bought_by": dgl.nn.SAGEConv(a, b, "gcn", activation=act),
            }, aggregate="sum"))
        self.layers.append(dgl.nn.HeteroGraphConv({  # a relation-graph GraphConv with norm='right'
            "follows": dgl.nn.SAGEConv(dims[-1], 2, "mean"),
            "buys": dgl.nn.GraphConv(dims[-1], 2, norm="right", allow_zero_in_degree=True),
            "bought_by": dgl.nn.GraphConv(dims[-1], 2, norm="left", allow_zero_in_degree=True),
        }, aggregate="mean"))

    def forward(self, g, h):
        for layer in self.layers:
            h = layer(g, h)
        return h


def _rgcn_run(model, g, feats):
    model.zero_grad()
    feats = {k: v.clone().requires_grad_() for k, v in feats.items()}
    out = model(g, feats)
    sum((v * (1 + torch.arange(v.numel(), dtype=v.dtype).reshape(v.shape) / 10)).sum()
        for v in out.values()).backward()
    return out, feats, {k: p.grad for k, p in model.named_parameters() if p.grad is not None}


def _assert_same_rgcn(a, b, msg):
    assert a[0].keys() == b[0].keys() == {"u", "i"}, msg
    for k in a[0]:
        assert_close(a[0][k].detach(), b[0][k].detach(), msg=f"{msg} out[{k}]")
        assert_close(a[1][k].grad, b[1][k].grad, msg=f"{msg} dfeat[{k}]")
    assert a[2].keys() == b[2].keys() and len(a[2]) > 0, msg
    for k in a[2]:
        assert_close(a[2][k], b[2][k], msg=f"{msg} d{k}")


def test_rgcn_swapped_matches_dgl(path):
    g = _hetero_graph()
    torch.manual_seed(0)
    native = RGCN()
    ours = copy.deepcopy(native)
    report = dgl_accel.nn.swap(ours)
    assert len(report.swapped) == 12, str(report)  # 3 HeteroGraphConv containers, 9 relation modules
    assert {name for name, _, _ in report.swapped} >= {"layers.0.mods.follows", "layers.0.mods.buys"}
    feats = {"u": torch.randn(10, 5), "i": torch.randn(6, 5)}
    expected = _rgcn_run(native, g, feats)
    dgl_accel.reset_stats()
    _assert_same_rgcn(_rgcn_run(ours, g, feats), expected, "swapped")
    assert dgl_accel.stats()["copy_u_sum"], "the GraphConv relations did not reach dgl-accel"
    assert list(ours.state_dict()) == list(native.state_dict())
    with dgl_accel.enabled():  # the unswapped model under enable(): the same numbers
        _assert_same_rgcn(_rgcn_run(native, g, feats), expected, "enabled")


def test_rgcn_on_sampled_hetero_blocks_matches_dgl(path):
    g = _hetero_graph(seed=3)
    torch.manual_seed(0)
    native = RGCN()
    ours = _swapped_copy(native)
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(3)
    _, _, blocks = sampler.sample_blocks(g, {"u": torch.tensor([0, 3, 5]), "i": torch.tensor([1, 2])})
    feats = {k: torch.randn(blocks[0].num_src_nodes(k), 5) for k in ("u", "i")}

    def run(model):
        model.zero_grad()
        h = {k: v.clone().requires_grad_() for k, v in feats.items()}
        x = h
        for layer, block in zip(model.layers, blocks):
            x = layer(block, x)
        sum(v.sum() * (i + 1) for i, v in enumerate(x.values())).backward()
        return x, h, {k: p.grad for k, p in model.named_parameters() if p.grad is not None}

    _assert_same_rgcn(run(ours), run(native), "blocks")


# -------------------------------------------------------------------------------- the report
def test_swap_report_lists_what_it_left_alone():
    class MyConv(dgl.nn.SAGEConv):
        pass

    model = torch.nn.ModuleDict({
        "rel": dgl.nn.HeteroGraphConv({"follows": dgl.nn.GraphConv(3, 3),
                                       "buys": dgl.nn.NNConv(3, 3, torch.nn.Linear(1, 9), "mean"),
                                       "bought_by": MyConv(3, 3, "mean"), "rates": dgl.nn.GATConv(3, 3, 2)}),
        "gat": dgl.nn.NNConv(3, 3, torch.nn.Linear(1, 9), "mean", residual=True),  # its inner Identity: not listed
        "lin": torch.nn.Linear(3, 3),
    })
    report = dgl_accel.nn.swap(model)
    assert [r[0] for r in report.swapped] == ["rel", "rel.mods.follows", "rel.mods.rates"]
    kept = dict(report.kept)
    assert set(kept) == {"rel.mods.buys", "rel.mods.bought_by", "gat"}, kept
    assert kept["gat"] == kept["rel.mods.buys"] == (
        "NNConv: no dgl-accel drop-in; its aggregation still runs on dgl-accel under enable() where supported")
    assert "subclasses a dgl.nn layer" in kept["rel.mods.bought_by"]
    text = str(report)
    assert "kept gat: NNConv: no dgl-accel drop-in" in text and "kept rel.mods.buys: NNConv" in text
    again = dgl_accel.nn.swap(model)
    assert again.swapped == [] and dict(again.kept) == kept  # idempotent, same report of what stays
    back = dgl_accel.nn.unswap(model)
    assert [r[0] for r in back.swapped] == ["rel", "rel.mods.follows", "rel.mods.rates"] and dict(back.kept) == {
        "rel.mods.bought_by": kept["rel.mods.bought_by"]}


@pytest.mark.parametrize("mode", ["auto", True])
def test_redundancy_plans_on_a_relation_graph_match_dgl(mode):
    """GraphACT's rewrite plans a relation graph like a block; through a plan, the swapped layer
    still gives DGL's output and gradients."""
    from dgl_accel.policies.redundancy import reduce_redundancy, use_redundancy

    g = _relation(num_src=30, num_dst=20, num_edges=200, seed=4)
    plan = reduce_redundancy(g)
    assert plan.num_src == 30 and plan.num_dst == 20
    x = torch.randn(30, 6, requires_grad=True)
    want = gspmm(g, "copy_u", "sum", x, norm="both")
    with use_redundancy(mode):
        got = gspmm(g, "copy_u", "sum", x, norm="both")
    assert_close(got, want)
    assert_close(*(torch.autograd.grad(o.square().sum(), x)[0] for o in (got, want)))
