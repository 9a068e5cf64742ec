"""The ``EdgeConv`` drop-in against PyG's with the same weights (outputs, feature gradients and every
parameter's) on hypothesis graphs, homogeneous and bipartite: ``nn`` a linear layer (the nodes'
products and a copy_u aggregation, no per-edge tensor) or a ``Sequential`` starting with one (the
first layer as an SDDMM, the rest on the edges, the extrema op over them), every core aggregation;
bf16 (PyG-in-fp64 rule and CPU autocast); ``torch.compile`` (no graph break, fullgraph=True equals
eager); what falls back (counted).  The custom ops it traces: tests/core/library/test_edges.py."""

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_geometric.nn.dense.linear import Linear as PygLinear  # noqa: E402

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

NETS = {
    "linear": lambda: torch.nn.Linear(8, 3),
    "pyg_linear": lambda: PygLinear(8, 3),
    "one_layer_sequential": lambda: torch.nn.Sequential(torch.nn.Linear(8, 3)),
    "mlp": lambda: torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3)),
    "mlp_no_bias": lambda: torch.nn.Sequential(torch.nn.Linear(8, 5, bias=False), torch.nn.Tanh()),
}


def _counted(reason: str) -> int:
    return dgl_accel.stats().get("pyg.EdgeConv", {}).get(f"fallthrough: {reason}", 0)


@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(["max", "min", "add", "mean"]), st.sampled_from(sorted(NETS)), JIT)
def test_edge_conv(graph, aggr, net, jit):
    ei, ns, nd, bip, seed = graph
    dgl_accel.reset_stats()
    theirs = build(pyg_nn.EdgeConv, NETS[net](), aggr=aggr)
    call = lambda m, f, w: m(pair_or_one(f), ei)  # noqa: E731
    feats = features(ns, nd, 4, bip, seed)
    if net.startswith("mlp") and aggr in ("add", "mean"):  # the core sums no edge rows: PyG's forward
        assert_close(call(swapped(theirs), feats, None), call(theirs, feats, None))
        reduce = {"add": "sum"}.get(aggr, aggr)  # the reason names the core's reduce
        assert _counted(f"aggr {reduce!r} after a multi-layer nn (the core sums no edge rows)") == 1
        return
    with forced_jit(jit):
        check(theirs, call, feats)


@pytest.mark.parametrize("net", ["linear", "mlp"])
def test_edge_conv_bf16_against_pyg_in_fp64(net):
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 5, 2, 1], [1, 2, 3, 0, 0, 1, 1, 2, 5]])
    theirs = build(pyg_nn.EdgeConv, NETS[net]())
    check(theirs, lambda m, f, w: m(f[0], ei), [tst.randn((6, 4), torch.float32, 5)], dtype=torch.bfloat16)


AUTOCAST_JIT = [False] + ([True] if runtime.enabled() else [])


@pytest.mark.parametrize("jit", AUTOCAST_JIT)
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("net,aggr", [("linear", "max"), ("linear", "mean"), ("mlp", "max")])
def test_edge_conv_under_autocast(net, aggr, warm, jit):
    """Gradients within the rule for the mean; for max only their dtypes and finiteness: the max's
    argument moves where bf16 rounding reorders two near-equal candidates (ours round the node
    products, PyG's the edge products), a jump no tolerance bounds, as a ReLU's mask."""
    torch.manual_seed(0)
    inner = torch.nn.Linear(48, 8) if net == "linear" else torch.nn.Sequential(
        torch.nn.Linear(48, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    theirs = pyg_nn.EdgeConv(inner, aggr=aggr)
    ours = swapped(uniform(theirs))
    gen = torch.Generator().manual_seed(1)
    ei, x = torch.randint(0, 60, (2, 400), generator=gen), torch.randn(60, 24, generator=gen)
    with forced_jit(jit):
        dgl_accel.reset_stats()
        assert_autocast_matches(theirs, ours, lambda m, h: m(h, ei), x, warm, where=f"EdgeConv {net} {aggr}",
                                grads=aggr == "mean")
        stats = dgl_accel.stats()
    assert stats and not any(k.startswith("pyg.") for k in stats), stats


# ---------------------------------------------------------------------------------------------- compile
MLP32 = lambda: torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))  # noqa: E731
KINDS = {  # the call kinds the layer traces: nn linear (add: the in-degrees; mean; max: copy_u), nn a Sequential
    **{f"linear-{aggr}": (lambda aggr=aggr: pyg_nn.EdgeConv(torch.nn.Linear(32, 16), aggr=aggr))
       for aggr in ("add", "mean", "max")},
    **{f"mlp-{aggr}": (lambda aggr=aggr: pyg_nn.EdgeConv(MLP32(), aggr=aggr)) for aggr in ("max", "min")},
}


class Net(torch.nn.Module):
    """test_compile's model shape, ``(x, edge_index)`` in, with an EdgeConv per call kind in
    ``kinds`` (an ``nn`` Sequential: the SDDMM, the rest of ``nn`` on the edges, copy_e's extrema)."""

    def __init__(self, kinds):
        super().__init__()
        self.pre, self.post = torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)
        self.convs = torch.nn.ModuleList([KINDS[kind]() for kind in kinds])

    def forward(self, x, edge_index):
        h = self.pre(x).relu()
        for conv in self.convs:
            h = conv(h, edge_index).relu()
        return self.post(h)


def _models(kinds):
    return swapped_pair(lambda: Net(kinds))


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op, the layer is a boundary")
def test_swapped_edge_conv_traces_without_graph_breaks():
    """Every call kind in one model: no graph break."""
    eager, _ = _models(list(KINDS))
    assert_no_graph_breaks(eager, *compile_graph(50, 300, 1))


@pytest.mark.parametrize("backend,kinds", quick_first([("aot_eager", ["mlp-max"]), ("aot_eager", list(KINDS)),
                                                       ("inductor", list(KINDS))]))
def test_compiled_model_with_swapped_edge_conv_equals_eager(backend, kinds):
    """fullgraph=True where the ops trace; outputs and gradients (input, every parameter) of the
    eager model, on two graphs of different node and edge counts (the second one dynamic)."""
    eager, twin = _models(kinds)
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend=backend, fullgraph=TRACED)
    for n, e, seed in ((200, 2500, 1), (150, 1700, 2)):
        assert_same(compiled, eager, *compile_graph(n, e, seed))


# ---------------------------------------------------------------------------------------------- fallbacks
def test_edge_conv_fallbacks_are_pygs_numbers_and_counted():
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    x = tst.randn((4, 4), torch.float32, 1)
    adj = torch.sparse_coo_tensor(ei.flip(0), torch.ones(5), (4, 4)).coalesce()
    shape = "nn neither a linear layer nor a Sequential starting with one (taking 2 * F features)"
    hooked = torch.nn.Linear(8, 3)
    hooked.register_forward_hook(lambda mod, args, out: out * 2)
    cases = [(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(8, 3)), lambda m: m(x, ei), shape),
             (pyg_nn.MLP([8, 6, 3]), lambda m: m(x, ei), shape),
             (hooked, lambda m: m(x, ei), shape),
             (torch.nn.Linear(8, 3), lambda m: m(x, adj), "torch.sparse adjacency")]
    for inner, call, reason in cases:
        theirs = build(pyg_nn.EdgeConv, inner)
        ours = swapped(theirs)
        dgl_accel.reset_stats()
        assert_close(call(ours), call(theirs))
        assert _counted(reason) == 1, dgl_accel.stats()
    theirs = build(pyg_nn.EdgeConv, torch.nn.Linear(8, 3), aggr="mul")
    dgl_accel.reset_stats()
    assert_close(swapped(theirs)(x, ei), theirs(x, ei))
    assert _counted("aggr 'mul'") == 1


def test_edge_conv_pair_without_targets_raises_pygs_error():
    ei = torch.tensor([[0, 1], [1, 0]])
    x = tst.randn((2, 4), torch.float32, 1)
    theirs = pyg_nn.EdgeConv(torch.nn.Linear(8, 3))
    with pytest.raises(Exception) as pyg_error:
        theirs((x, None), ei)
    dgl_accel.reset_stats()
    with pytest.raises(pyg_error.type):
        swapped(theirs)((x, None), ei)
    assert _counted("a pair without target features") == 1
