"""The ``RGCNConv`` and ``FastRGCNConv`` drop-ins against PyG's with the same weights: outputs and
gradients (features, every parameter) on hypothesis graphs with random edge types, homogeneous and
bipartite, plain / bases / blocks, mean / add / sum / max, with and without root and bias, narrowing
(projected first) and widening (aggregated first), featureless (node ids, None); CPU bf16 autocast;
what falls back (counted) and PyG's errors; state_dict keys; ``torch.compile`` (no graph break,
fullgraph equal to eager)."""
import copy

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.core import library  # noqa: E402
from dgl_accel.pyg import graph as pyg_graph  # noqa: E402
from dgl_accel.pyg.nn import FastRGCNConv, RGCNConv  # noqa: E402
from dgl_accel.pyg.nn.rgcn_conv import KEPT  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.autocast import assert_autocast_matches  # noqa: E402
from dgl_accel.testing.marks import quick_first  # noqa: E402
from dgl_accel.testing.tolerances import assert_close, tolerance  # noqa: E402
from tests.pyg.test_compile import assert_no_graph_breaks  # noqa: E402
from tests.pyg.test_convs import EXAMPLES, build, check, features, graphs, pair_or_one, swapped, uniform  # noqa: E402

CLASSES = {"RGCNConv": pyg_nn.RGCNConv, "FastRGCNConv": pyg_nn.FastRGCNConv}
DECOMPOSITIONS = {"plain": {}, "bases": {"num_bases": 2}, "blocks": {"num_blocks": 2}}
R = 3


def edge_types(num_edges: int, seed: int, relations: int = R) -> torch.Tensor:
    return torch.randint(0, relations, (num_edges,), generator=torch.Generator().manual_seed(seed + 11))


# ---------------------------------------------------------------------------------------------- the layers
@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(list(CLASSES)), st.sampled_from(list(DECOMPOSITIONS)),
       st.sampled_from(["mean", "add", "sum", "max"]), st.booleans(), st.booleans(), st.sampled_from([2, 6]))
def test_rgcn(graph, name, decomposition, aggr, root_weight, bias, out_channels):
    """Narrowing (out 2 < in 4: projected first) and widening (out 6: aggregated first)."""
    ei, ns, nd, bip, seed = graph
    if name == "FastRGCNConv" and aggr == "max":
        aggr = "mean"  # PyG's FastRGCNConv asserts add / sum / mean (test_errors)
    theirs = build(CLASSES[name], 4, out_channels, R, aggr=aggr, root_weight=root_weight, bias=bias,
                   **DECOMPOSITIONS[decomposition])
    et = edge_types(ei.shape[1], seed)
    check(theirs, lambda m, f, w: m(pair_or_one(f), ei, et), features(ns, nd, 4, bip, seed))


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("bipartite", [False, True])
def test_rgcn_every_variant(name, bipartite):
    """Every decomposition, aggregation and order (narrowing 6 -> 2, widening 6 -> 8) on one graph
    where targets have several in-edges of each relation and some relations none."""
    gen = torch.Generator().manual_seed(5)
    ns, nd = (15, 9) if bipartite else (15, 15)
    ei = torch.stack([torch.randint(0, ns, (70,), generator=gen), torch.randint(0, nd - 2, (70,), generator=gen)])
    et = edge_types(70, 5)
    feats = features(ns, nd, 6, bipartite, 5)
    for decomposition in DECOMPOSITIONS:
        for aggr in ["mean", "add"] + (["max"] if name == "RGCNConv" else []):
            for out_channels in (2, 8):
                theirs = build(CLASSES[name], 6, out_channels, R, aggr=aggr, **DECOMPOSITIONS[decomposition])
                check(theirs, lambda m, f, w: m(pair_or_one(f), ei, et), feats)


@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(list(CLASSES)), st.sampled_from(["plain", "bases"]),
       st.sampled_from(["mean", "add"]), st.sampled_from(["none", "arange", "ids"]), st.booleans())
def test_rgcn_featureless(graph, name, decomposition, aggr, ids, root_weight):
    """x None (node ids 0..in_channels-1) or node ids: the weights' rows are the embeddings
    (RGCNConv reads row x[j], FastRGCNConv row j, as PyG's)."""
    ei, ns, nd, bip, seed = graph
    in_channels = (ns, nd) if bip else ns
    theirs = build(CLASSES[name], in_channels, 3, R, aggr=aggr, root_weight=root_weight,
                   **DECOMPOSITIONS[decomposition])
    et = edge_types(ei.shape[1], seed)
    gen = torch.Generator().manual_seed(seed)
    src_ids = None if ids == "none" else (torch.arange(ns) if ids == "arange" else torch.randint(0, max(ns, 1), (ns,),
                                                                                                  generator=gen))
    dst_ids = torch.randint(0, max(nd, 1), (nd,), generator=gen) if ids == "ids" else torch.arange(nd)
    x = (src_ids, dst_ids) if bip else src_ids
    check(theirs, lambda m, f, w: m(x, ei, et), [torch.zeros(1)])


def test_fast_and_plain_agree_in_pyg_and_ours():
    """PyG's two classes compute the same thing (FastRGCNConv's mean normalises per target and
    relation too), and ours gives it for both."""
    ei = torch.randint(0, 12, (2, 60), generator=torch.Generator().manual_seed(1))
    et, x = edge_types(60, 1), tst.randn((12, 6), torch.float32, 2)
    for conf in DECOMPOSITIONS.values():
        for aggr in ("mean", "add"):
            plain = build(pyg_nn.RGCNConv, 6, 4, R, aggr=aggr, **conf)
            fast = copy.deepcopy(plain)
            fast.__class__ = pyg_nn.FastRGCNConv
            want = plain(x, ei, et)
            assert_close(fast(x, ei, et), want)
            assert_close(swapped(plain)(x, ei, et), want)
            assert_close(swapped(fast)(x, ei, et), want)


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("shape", ["narrow", "wide", "blocks", "featureless"])
def test_rgcn_under_autocast(name, shape):
    """bf16 products beside PyG's fp32 zeros: PyG's fp32 output, within the autocast rule."""
    gen = torch.Generator().manual_seed(4)
    n, e = 40, 200
    ei = torch.randint(0, n, (2, e), generator=gen)
    et = edge_types(e, 4)
    in_channels, kwargs = {"narrow": (24, {}), "wide": (6, {}), "blocks": (8, {"num_blocks": 2}),
                           "featureless": (n, {"num_bases": 2})}[shape]
    theirs = uniform(CLASSES[name](in_channels, 12, R, **kwargs))
    ours = swapped(theirs)
    if shape == "featureless":
        ref = copy.deepcopy(theirs).double()(None, ei, et)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got, want = ours(None, ei, et), theirs(None, ei, et)
        assert got.dtype == want.dtype == torch.float32
        err, err_theirs = ((t.double() - ref).abs().max().item() for t in (got, want))
        assert err <= 2 * err_theirs + tolerance(torch.bfloat16).atol * ref.abs().max().item()
        return
    x = tst.randn((n, in_channels), torch.float32, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ours(x, ei, et).dtype == theirs(x, ei, et).dtype == torch.float32
    assert_autocast_matches(theirs, ours, lambda m, x: m(x, ei, et), x, warm=True, where=f"{name} {shape}")


# ---------------------------------------------------------------------------------------------- fallbacks, errors
def _pair(name, *args, **kwargs):
    theirs = build(CLASSES[name], *args, **kwargs)
    return theirs, swapped(theirs)


@pytest.mark.parametrize("name", list(CLASSES))
def test_what_falls_back_is_counted_and_equal(name):
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    x = tst.randn((4, 5), torch.float32, 0)
    cases = [("edge types outside [0, num_relations)", {}, None, torch.tensor([0, 1, 2, 3, 1])),
             ("node ids on one side, features on the other", {}, (x, x), None),
             ("edge_type other than an integer [num_edges] tensor", {}, None, torch.tensor([0, 1, 2, 1])),
             ("flow 'target_to_source'", {"flow": "target_to_source"}, None, None)]
    if name == "RGCNConv":
        cases += [("featureless aggr 'max'", {"aggr": "max"}, "none", None), ("aggr 'mul'", {"aggr": "mul"}, None, None)]
    for reason, kwargs, feats, et in cases:
        dgl_accel.reset_stats()
        theirs, ours = _pair(name, 4 if feats == "none" else 5, 3, R, **kwargs)
        et = torch.tensor([0, 1, 2, 0, 1]) if et is None else et
        if feats == (x, x):
            feats = (x, torch.arange(4))
        feats = None if feats == "none" else (x if feats is None else feats)
        try:
            want = theirs(feats, ei, et)
        except Exception as error:  # PyG's own error (edge types past R, ids beside features), through the fallback
            with pytest.raises(type(error)):
                ours(feats, ei, et)
        else:
            assert_close(ours(feats, ei, et), want)
        assert dgl_accel.stats()[f"pyg.{name}"] == {f"fallthrough: {reason}": 1}, reason


@pytest.mark.parametrize("name", list(CLASSES))
def test_errors_are_pygs(name):
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    et = torch.tensor([0, 1, 1])
    x = tst.randn((3, 4), torch.float32, 0)
    theirs, ours = _pair(name, 4, 4, 2)
    for module in (theirs, ours):
        with pytest.raises(RuntimeError if name == "FastRGCNConv" else AssertionError):
            module(x, ei)  # no edge_type
        with pytest.raises(IndexError):
            module(x, torch.tensor([[0, 1, 5], [1, 2, 0]]), et)  # a source id past the features
    blocks = _pair(name, 4, 4, 2, num_blocks=2)
    for module in blocks:
        with pytest.raises(ValueError, match="Block-diagonal"):
            module(torch.arange(4), torch.tensor([[0, 1, 3], [1, 2, 0]]), et)
    if name == "FastRGCNConv":
        for module in _pair(name, 4, 4, 2, aggr="max"):
            with pytest.raises(AssertionError):
                module(x, ei, et)
    else:
        for module in (theirs, ours):
            with pytest.raises(IndexError):  # a node id past the embeddings
                module(torch.tensor([0, 1, 7]), ei, et)


@pytest.mark.parametrize("name", list(CLASSES))
def test_state_dict_and_swap(name):
    theirs = build(CLASSES[name], 4, 6, R, num_bases=2)
    ours = swapped(theirs)
    assert isinstance(ours, (RGCNConv, FastRGCNConv)) and type(ours).__name__ == name
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight", "comp", "root", "bias"]
    back = CLASSES[name](4, 6, R, num_bases=2)
    back.load_state_dict(ours.state_dict())
    assert str(ours) == str(theirs)


def test_relational_graph_is_built_once_and_follows_edge_type_changes():
    ei = torch.randint(0, 20, (2, 80), generator=torch.Generator().manual_seed(3))
    et = edge_types(80, 3)
    theirs, ours = _pair("RGCNConv", 5, 4, R)
    x = tst.randn((20, 5), torch.float32, 1)
    ours(x, ei, et)
    kept = pyg_graph.edges_of(ei).derived("relational", dict)
    assert len(kept) == 1
    for _ in range(2):
        ours(x, ei, et)
    assert len(kept) == 1
    et[:10] = (et[:10] + 1) % R  # in place: a new version, a new relational graph
    assert_close(ours(x, ei, et), theirs(x, ei, et))
    assert len(kept) == 2
    for _ in range(KEPT + 2):  # a new edge_type tensor every call: the last KEPT are kept
        assert_close(ours(x, ei, et.clone()), theirs(x, ei, et))
    assert len(kept) == KEPT


# ---------------------------------------------------------------------------------------------- compile
class Net(torch.nn.Module):
    def __init__(self, cls, **kwargs):
        super().__init__()
        self.pre = torch.nn.Linear(8, 16)
        self.conv1, self.conv2 = cls(16, 12, R, **kwargs), cls(12, 4, R, **kwargs)

    def forward(self, x, edge_index, edge_type):
        return self.conv2(self.conv1(self.pre(x).relu(), edge_index, edge_type).relu(), edge_index, edge_type)


def _inputs(n, e, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=gen), torch.randint(0, n, (2, e), generator=gen), edge_types(e, seed)


def _grads(model, x, ei, et):
    x = x.clone().requires_grad_()
    out = model(x, ei, et)
    out.square().sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return out.detach(), grads


COMPILED = {"plain": ("RGCNConv", {}), "bases-sum": ("RGCNConv", {"num_bases": 2, "aggr": "add"}),
            "fast-blocks": ("FastRGCNConv", {"num_blocks": 2})}


@pytest.mark.skipif(not library.AVAILABLE, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("case", quick_first(list(COMPILED)))
def test_traces_without_graph_breaks(case):
    name, kwargs = COMPILED[case]
    torch.manual_seed(0)
    model = Net(CLASSES[name], **kwargs)
    dgl_accel.pyg.swap(model)
    assert_no_graph_breaks(model, *_inputs(50, 300, 1))


@pytest.mark.parametrize("case,backend", quick_first([(c, b) for b in ("aot_eager", "inductor") for c in COMPILED]))
def test_compiled_equals_eager(case, backend):
    """fullgraph=True where the op traces; outputs and gradients (input, every parameter) of the
    eager model on two graphs of different sizes."""
    name, kwargs = COMPILED[case]
    torch.manual_seed(0)
    eager = Net(CLASSES[name], **kwargs)
    dgl_accel.pyg.swap(eager)
    twin = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend=backend, fullgraph=library.AVAILABLE)
    for n, e, seed in ((200, 2500, 1), (150, 1700, 2)):
        got_out, got_grads = _grads(compiled, *_inputs(n, e, seed))
        want_out, want_grads = _grads(eager, *_inputs(n, e, seed))
        torch.testing.assert_close(got_out, want_out, rtol=1e-4, atol=1e-4)  # inductor fuses: other roundings
        for got, want in zip(got_grads, want_grads):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
