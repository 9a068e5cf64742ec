"""The ``GINEConv`` drop-in against PyG's with the same weights (outputs and gradients: node and edge
features, eps, ``nn``'s and ``lin``'s parameters) on hypothesis graphs, homogeneous and bipartite,
every core aggregation, with and without ``edge_dim``; bf16 (PyG-in-fp64 rule and CPU autocast);
inference with ``lin``'s product inside the core's pass; ``torch.compile`` (no graph break,
fullgraph=True equals eager); what falls back (counted) and the errors.  Its core op:
tests/core/test_add_relu_sum.py, the op's custom op: tests/core/library/test_edges.py."""
import copy

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.core.jit import runtime  # noqa: E402
from dgl_accel.core.library import AVAILABLE as TRACED  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.autocast import assert_autocast_matches  # noqa: E402
from dgl_accel.testing.cpu_loops import forced_jit  # noqa: E402
from dgl_accel.testing.marks import quick_first  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402
from tests.pyg.test_compile import _assert_same as assert_same  # noqa: E402
from tests.pyg.test_compile import _graph as compile_graph  # noqa: E402
from tests.pyg.test_compile import assert_no_graph_breaks, swapped_pair  # noqa: E402
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
MLP16 = lambda: torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())  # noqa: E731
KINDS = {  # the call kinds the layer traces: lin's product then the fused sum, the mean without lin, max, min
    "add-lin": lambda: pyg_nn.GINEConv(MLP16(), edge_dim=16, train_eps=True),
    "mean": lambda: pyg_nn.GINEConv(MLP16(), aggr="mean", train_eps=True),
    "max-lin": lambda: pyg_nn.GINEConv(MLP16(), edge_dim=16, aggr="max"),
    "min": lambda: pyg_nn.GINEConv(MLP16(), aggr="min"),
}


class Net(torch.nn.Module):
    """test_compile's model shape, ``(x, edge_index)`` in, with a GINEConv per call kind in
    ``kinds``: the edge features come from x per edge through a linear layer, so that their
    gradient reaches x and that layer's parameters."""

    def __init__(self, kinds):
        super().__init__()
        self.pre, self.edge, self.post = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)
        self.convs = torch.nn.ModuleList([KINDS[kind]() for kind in kinds])

    def forward(self, x, edge_index):
        h, edge_attr = self.pre(x).relu(), self.edge(x[edge_index[0]] * x[edge_index[1]])
        for conv in self.convs:
            h = conv(h, edge_index, edge_attr).relu()
        return self.post(h)


def _models(kinds):
    return swapped_pair(lambda: Net(kinds))


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op, the layer is a boundary")
def test_swapped_gine_traces_without_graph_breaks():
    """Every call kind in one model: no graph break."""
    eager, _ = _models(list(KINDS))
    assert_no_graph_breaks(eager, *compile_graph(50, 300, 1))
    with torch.no_grad():  # inference: lin's product goes into the op (add_relu_sum_projected)
        assert_no_graph_breaks(eager, *compile_graph(50, 300, 1))


@pytest.mark.parametrize("backend,kinds", quick_first([("aot_eager", ["add-lin"]), ("aot_eager", list(KINDS)),
                                                       ("inductor", list(KINDS))]))
def test_compiled_model_with_swapped_gine_equals_eager(backend, kinds):
    """fullgraph=True where the ops trace; outputs and gradients (input, every parameter: eps,
    nn's, lin's, the edge features' layer) of the eager model, on two graphs of different node and
    edge counts (the second one dynamic)."""
    eager, twin = _models(kinds)
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend=backend, fullgraph=TRACED)
    for n, e, seed in ((200, 2500, 1), (150, 1700, 2)):
        assert_same(compiled, eager, *compile_graph(n, e, seed))
    with torch.no_grad(), forced_jit(True):  # inference: the projected op, its pass at every size
        torch.testing.assert_close(compiled(*compile_graph(150, 1700, 2)), eager(*compile_graph(150, 1700, 2)))


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


# ---------------------------------------------------------------------------------------------- inference
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
