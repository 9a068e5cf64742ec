"""The ``GINEConv`` drop-in against PyG's with the same weights (outputs and gradients: node and edge
features, eps, ``nn``'s and ``lin``'s parameters) on hypothesis graphs, homogeneous and bipartite,
every core aggregation, with and without ``edge_dim``; bf16 (PyG-in-fp64 rule and CPU autocast);
``torch.compile``; what falls back (counted) and the errors; and its core op,
:func:`dgl_accel.core.add_relu_sum.add_relu_sum`, on the compiled loops against the composed torch
ops (float32/64, bf16, mixed dtypes, ``create_graph``)."""
import copy
from unittest import mock

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.core import add_relu_sum as add_relu_sum_module  # noqa: E402
from dgl_accel.core.add_relu_sum import add_relu_sum, add_relu_sum_reference  # noqa: E402
from dgl_accel.core.aggregation.views import TensorGraph  # noqa: E402
from dgl_accel.core.jit import runtime  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.autocast import assert_autocast_matches  # noqa: E402
from dgl_accel.testing.cpu_loops import forced_jit  # noqa: E402
from dgl_accel.testing.marks import quick_first  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402
from tests.pyg.test_convs import EXAMPLES, JIT, build, check, features, graphs, pair_or_one, swapped, uniform  # noqa: E402

MLP = lambda: torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))  # noqa: E731


def edge_features(num_edges: int, width: int, seed: int) -> torch.Tensor:
    return tst.randn((num_edges, width), torch.float32, seed + 3)


# ---------------------------------------------------------------------------------------------- the layer
@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(["add", "mean", "max", "min"]), st.booleans(), st.sampled_from([None, 3]),
       st.floats(-0.5, 0.5), JIT)
def test_gine(graph, aggr, train_eps, edge_dim, eps, jit):
    ei, ns, nd, bip, seed = graph
    theirs = build(pyg_nn.GINEConv, MLP(), eps=eps, train_eps=train_eps, edge_dim=edge_dim, aggr=aggr)
    with torch.no_grad():
        theirs.eps.fill_(eps)
    ea = edge_features(ei.shape[1], edge_dim or 4, seed)
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(pair_or_one(f), ei, w, size=(ns, nd) if bip else None),
              features(ns, nd, 4, bip, seed), ea)


def test_gine_without_target_features_sizes_targets_as_pyg():
    ei = torch.tensor([[0, 1, 2, 4], [1, 1, 0, 2]])
    theirs = build(pyg_nn.GINEConv, torch.nn.Linear(3, 2), edge_dim=2)
    x, ea = tst.randn((5, 3), torch.float32, 0), edge_features(4, 2, 0)
    check(theirs, lambda m, f, w: m((f[0], None), ei, w, size=(5, 3)), [x], ea)
    check(theirs, lambda m, f, w: m((f[0], None), ei, w), [x], ea)


@pytest.mark.parametrize("edge_dim", [None, 5])
def test_gine_bf16_against_pyg_in_fp64(edge_dim):
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 5, 2, 1], [1, 2, 3, 0, 0, 1, 1, 2, 5]])
    theirs = build(pyg_nn.GINEConv, torch.nn.Linear(8, 4), edge_dim=edge_dim, train_eps=True)
    check(theirs, lambda m, f, w: m(f[0], ei, w), [tst.randn((6, 8), torch.float32, 5)],
          edge_features(9, edge_dim or 8, 1), dtype=torch.bfloat16)


AUTOCAST_JIT = [False] + ([True] if runtime.enabled() else [])


@pytest.mark.parametrize("jit", AUTOCAST_JIT)
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("edge_dim", [None, 6])
def test_gine_under_autocast(edge_dim, warm, jit):
    """lin's bf16 output beside fp32 x: PyG's promoted sum, within the autocast rule."""
    torch.manual_seed(0)
    theirs = pyg_nn.GINEConv(torch.nn.Sequential(torch.nn.Linear(24, 8)), edge_dim=edge_dim, train_eps=True)
    ours = swapped(uniform(theirs))
    gen = torch.Generator().manual_seed(1)
    ei = torch.randint(0, 60, (2, 400), generator=gen)
    h = {"x": torch.randn(60, 24, generator=gen), "edge_attr": torch.randn(400, edge_dim or 24, generator=gen)}
    with forced_jit(jit):
        dgl_accel.reset_stats()
        assert_autocast_matches(theirs, ours, lambda m, t: m(t["x"], ei, t["edge_attr"]), h, warm, where="GINEConv")
        stats = dgl_accel.stats()
    assert stats["add_relu_sum"] and not any(k.startswith("pyg.") for k in stats), stats


# ---------------------------------------------------------------------------------------------- compile
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = torch.nn.Linear(8, 16)
        self.conv = pyg_nn.GINEConv(torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.ReLU()), edge_dim=4)
        self.post = torch.nn.Linear(12, 3)

    def forward(self, x, edge_index, edge_attr):
        return self.post(self.conv(self.pre(x).relu(), edge_index, edge_attr).relu())


@pytest.mark.parametrize("backend", quick_first(["aot_eager", "inductor"]))
def test_compiled_model_with_swapped_gine_equals_eager(backend):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x, ei = torch.randn(200, 8, generator=gen), torch.randint(0, 200, (2, 2500), generator=gen)
    ea = torch.randn(2500, 4, generator=gen)
    eager = Net()
    assert dgl_accel.pyg.swap(eager).swapped
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(eager), backend=backend)
    got, want = [], []
    for model, into in ((eager, want), (compiled, got)):
        out = model(x, ei, ea)
        out.square().sum().backward()
        into += [out.detach()] + [p.grad.clone() for p in model.parameters()]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------- fallbacks, errors
def _counted(ours, reason):
    return dgl_accel.stats().get("pyg.GINEConv", {}).get(f"fallthrough: {reason}", 0)


def test_gine_fallbacks_are_pygs_numbers_and_counted():
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x, ea = tst.randn((4, 4), torch.float32, 1), edge_features(4, 4, 1)
    adj = torch.sparse_coo_tensor(ei.flip(0), torch.ones(4), (4, 4)).coalesce()
    cases = [(pyg_nn.GINEConv(MLP(), aggr="mul"), lambda m: m(x, ei, ea), "aggr 'mul'"),
             (pyg_nn.GINEConv(MLP()), lambda m: m(x, adj, ea), "torch.sparse adjacency"),
             (pyg_nn.GINEConv(MLP()), lambda m: m(x, ei, ea[:, 0]),  # PyG broadcasts it (E == F here)
              "edge_attr not a 2-D float tensor (a tensor of dtype torch.float32, shape [4])")]
    for theirs, call, reason in cases:
        ours = swapped(theirs)
        dgl_accel.reset_stats()
        assert_close(call(ours), call(theirs))
        assert _counted(ours, reason) == 1, dgl_accel.stats()


def test_gine_errors_are_pygs_types():
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x = tst.randn((4, 4), torch.float32, 1)
    theirs = pyg_nn.GINEConv(MLP())
    ours = swapped(theirs)
    with pytest.raises(ValueError, match="dimensionalities do not match") as pyg_error:
        theirs(x, ei, edge_features(4, 3, 0))
    with pytest.raises(ValueError, match=r"4 node features, 3 edge features\). Fix: GINEConv\(nn, edge_dim=3\)"):
        ours(x, ei, edge_features(4, 3, 0))
    assert pyg_error.type is ValueError
    for m in (theirs, ours):  # a row count other than the edges'
        with pytest.raises(RuntimeError, match=r"Expected edge features of shape \[4, 4\]" if m is ours else ""):
            m(x, ei, edge_features(5, 4, 0))
    dgl_accel.reset_stats()
    for m in (theirs, ours):  # no edge_attr: PyG's own error, through its forward
        with pytest.raises(AttributeError):
            m(x, ei)
    assert _counted(ours, "no edge_attr (PyG's message needs one)") == 1


# ---------------------------------------------------------------------------------------------- the core op
@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from([(torch.float32,) * 2, (torch.float64,) * 2, (torch.bfloat16,) * 2,
                                  (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32)]),
       st.booleans(), st.integers(1, 9), st.booleans())
def test_add_relu_sum_loops_equal_composed_ops(graph, dtypes, need_w, width, edge_order):
    """The compiled loops (in edge order, one thread's; or per CSR row, several threads') against the
    composed ops in fp64, at the tolerance table's row of each result's dtype (fp32 sums in another
    order; bf16 results rounded once); gradients in their inputs' dtypes."""
    if not runtime.enabled():
        pytest.skip("numba absent: add_relu_sum runs the composed ops")
    ei, ns, nd, _, seed = graph
    g = TensorGraph(ei[0], ei[1], num_src=ns, num_dst=nd)
    x = tst.randn((ns, width), torch.float32, seed).to(dtypes[0]).requires_grad_()
    w = tst.randn((ei.shape[1], width), torch.float32, seed + 1).to(dtypes[1]).requires_grad_(need_w)
    with forced_jit(True), mock.patch.object(add_relu_sum_module, "_one_thread", lambda: edge_order):
        out = add_relu_sum(g, x, w)
        assert out.dtype == torch.promote_types(*dtypes)
        cot = tst.randn(tuple(out.shape), torch.float32, seed + 2).to(out.dtype)
        wrt = [x, w] if need_w else [x]
        got = torch.autograd.grad((out * cot).sum(), wrt)
    ref = add_relu_sum_reference(g, x.double(), w.double())
    want = torch.autograd.grad((ref * cot.double()).sum(), wrt)
    assert_close(out, ref, msg="out")  # at the table's row for out's dtype: bf16 results rounded once
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == wrt[k].dtype
        assert_close(a, b, msg=f"grad {k}")


def test_add_relu_sum_backward_under_create_graph_is_recorded():
    g = TensorGraph(torch.tensor([0, 1, 2, 2]), torch.tensor([1, 1, 2, 0]), num_nodes=3)
    x = torch.tensor([[1.0, -2.0], [2.0, 0.5], [-1.0, 3.0]], requires_grad=True)
    w = torch.tensor([[1.0, 1.0], [-5.0, 0.0], [0.5, -4.0], [2.0, 2.0]], requires_grad=True)
    with forced_jit(True):
        out = add_relu_sum(g, x, w)
    cot = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    gx, = torch.autograd.grad((out * cot).sum(), x, create_graph=True)
    ref = add_relu_sum_reference(g, x, w)
    rx, = torch.autograd.grad((ref * cot).sum(), x, create_graph=True)
    assert torch.equal(gx, rx)
    assert torch.equal(torch.autograd.grad(gx.sum(), cot)[0], torch.autograd.grad(rx.sum(), cot)[0])


def test_add_relu_sum_rejects_bad_arguments():
    g = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 0]), num_nodes=2)
    with pytest.raises(ValueError, match=r"expected w with one row per edge \(2; got 3\)"):
        add_relu_sum(g, torch.zeros(2, 4), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="expected w with x's 4 features"):
        add_relu_sum(g, torch.zeros(2, 4), torch.zeros(2, 3))


@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("jit", AUTOCAST_JIT)
def test_gine_inference_forms_lins_product_per_edge(jit, autocast):
    """No gradient asked for: ``lin``'s product inside the core's pass (the compiled loops; under bf16
    autocast autocast's product, then the op), PyG's output at fp32's row, or under autocast at most
    twice PyG's own error against fp64."""
    theirs = build(pyg_nn.GINEConv, MLP(), edge_dim=5, eps=0.25)
    ours = swapped(theirs)
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 50, (2, 300), generator=gen)
    x, ea = torch.randn(50, 4, generator=gen), torch.randn(300, 5, generator=gen)
    want64 = copy.deepcopy(theirs).double()(x.double(), ei, ea.double())
    dgl_accel.reset_stats()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), forced_jit(jit):
        got, want = ours(x, ei, ea), theirs(x, ei, ea)
    assert got.dtype == want.dtype
    assert bool(dgl_accel.stats().get("add_relu_sum_projected")) == (jit and not autocast), dgl_accel.stats()
    if autocast:
        assert (got.double() - want64).abs().max() <= 2 * (want.double() - want64).abs().max() + 1e-2
    else:
        assert_close(got, want)


@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from([torch.float32, torch.float64, torch.bfloat16]), st.booleans(), st.integers(1, 6))
def test_add_relu_sum_projected_pass_equals_composed_ops(graph, dtype, with_bias, depth):
    """Inference with a linear layer on the edge features: the per-edge product inside the pass against
    ``F.linear`` then the composed ops in fp64, at the table's row of the output's dtype."""
    if not runtime.enabled():
        pytest.skip("numba absent: add_relu_sum runs the composed ops")
    ei, ns, nd, _, seed = graph
    g = TensorGraph(ei[0], ei[1], num_src=ns, num_dst=nd)
    wide = torch.float64 if dtype == torch.float64 else torch.float32  # the layer's dtype (F.linear's rule)
    x = tst.randn((ns, 3), torch.float32, seed).to(dtype)
    a = tst.randn((ei.shape[1], depth), wide, seed + 1)
    weight = tst.randn((3, depth), wide, seed + 2)
    bias = tst.randn((3,), wide, seed + 3) if with_bias else None
    dgl_accel.reset_stats()
    with torch.no_grad(), forced_jit(True):
        out = add_relu_sum(g, x, a, weight, bias)
    assert dgl_accel.stats()["add_relu_sum_projected"]
    assert out.dtype == torch.promote_types(dtype, wide)
    ref = add_relu_sum_reference(g, x.double(), torch.nn.functional.linear(
        a.double(), weight.double(), None if bias is None else bias.double()))
    assert_close(out, ref)
