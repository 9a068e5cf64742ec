"""The ``TransformerConv`` drop-in against PyG's with the same weights: outputs and gradients (features,
every parameter, the attention weights returned) on hypothesis graphs, homogeneous and bipartite,
heads, concat or mean, beta, root_weight, bias; bf16 (the PyG-in-fp64 rule, and CPU autocast, also
for bf16 features from a previous layer); ``torch.compile`` (no graph break, fullgraph=True equals
eager); what falls back (counted, with PyG's numbers) and PyG's errors; the state_dict keys; the
custom op ``dot_attention`` (opcheck, gradients)."""

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_geometric.utils import to_torch_csc_tensor  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.core import library  # noqa: E402
from dgl_accel.core.aggregation.views import TensorGraph  # noqa: E402
from dgl_accel.core.attention.dot import dot_attention  # noqa: E402
from dgl_accel.core.autocast import autocast_dtype  # noqa: E402
from dgl_accel.core.jit import runtime  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.autocast import assert_autocast_matches  # noqa: E402
from dgl_accel.testing.cpu_loops import forced_jit  # noqa: E402
from dgl_accel.testing.marks import quick_first  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402
from tests.pyg.test_compile import Net, _graph, assert_compiled_equals_eager, assert_no_graph_breaks, swapped_pair  # noqa: E402,E501
from tests.pyg.test_convs import EXAMPLES, JIT, build, check, features, graphs, pair_or_one, swapped, uniform  # noqa: E402

TRACED = library.AVAILABLE
OPTIONS = st.fixed_dictionaries({"heads": st.integers(1, 3), "concat": st.booleans(), "beta": st.booleans(),
                                 "root_weight": st.booleans(), "bias": st.booleans(),
                                 "dropout": st.sampled_from([0.0, 0.4])})


def _flat(out, attention: bool):
    """The output, or with the attention weights one vector of output, alpha and the returned edges."""
    if not attention:
        return out
    out, (graph, alpha) = out
    return torch.cat([out.flatten(), alpha.flatten(), graph.flatten().to(out.dtype)])


# ---------------------------------------------------------------------------------------------- the layer
@settings(max_examples=EXAMPLES)
@given(graphs(), OPTIONS, st.sampled_from([None, True, False]), JIT)
def test_transformer(graph, options, weights, jit):
    """Every option; ``return_attention_weights`` True or False (PyG returns alpha for any bool); a
    dropout in evaluation mode (PyG's is the identity there)."""
    ei, ns, nd, bip, seed = graph
    theirs = build(pyg_nn.TransformerConv, 4, 3, **options).eval()

    def call(m, f, w):
        return _flat(m(pair_or_one(f), ei, return_attention_weights=weights), weights is not None)

    with forced_jit(jit):
        check(theirs, call, features(ns, nd, 4, bip, seed))


def test_bipartite_with_other_widths_and_the_ops_counted():
    ei = torch.tensor([[0, 1, 2, 4, 4, 3], [1, 1, 0, 2, 0, 1]])
    theirs = build(pyg_nn.TransformerConv, (5, 3), 4, heads=2, beta=True)
    dgl_accel.reset_stats()
    check(theirs, lambda m, f, w: m(tuple(f), ei), [tst.randn((5, 5), torch.float32, 1),
                                                    tst.randn((3, 3), torch.float32, 2)])
    assert dgl_accel.stats()["dot_attention"] and dgl_accel.stats()["dot_attention_backward"]


@pytest.mark.parametrize("beta", [False, True])
def test_bf16_against_pyg_in_fp64(beta):
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 5, 2, 1], [1, 2, 3, 0, 0, 1, 1, 2, 5]])
    theirs = build(pyg_nn.TransformerConv, 8, 4, heads=2, beta=beta)
    check(theirs, lambda m, f, w: m(f[0], ei), [tst.randn((6, 8), torch.float32, 5)], dtype=torch.bfloat16)


AUTOCAST_JIT = [False] + ([True] if runtime.enabled() else [])


@pytest.mark.parametrize("jit", AUTOCAST_JIT)
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("case", ["one", "pair", "bf16-input"])
def test_under_autocast(case, warm, jit):
    """bf16 projections and attention, as PyG's; bf16 features (a previous layer's output under
    autocast) beside fp32 parameters run on the core too."""
    torch.manual_seed(0)
    theirs = uniform(pyg_nn.TransformerConv(24, 4, heads=3, beta=case == "pair", concat=case != "pair"))
    ours = swapped(theirs)
    gen = torch.Generator().manual_seed(1)
    ei = torch.randint(0, 60, (2, 400), generator=gen)
    x = torch.randn(60, 24, generator=gen)
    if case == "pair":
        x = {"src": x, "dst": torch.randn(30, 24, generator=gen)}
        ei = ei[:, ei[1] < 30]
        call = lambda m, h: m((h["src"], h["dst"]), ei)  # noqa: E731
    elif case == "bf16-input":
        call = lambda m, h: m(h.bfloat16() if autocast_dtype("cpu") else h, ei)  # noqa: E731
    else:
        call = lambda m, h: m(h, ei)  # noqa: E731
    with forced_jit(jit):
        dgl_accel.reset_stats()
        assert_autocast_matches(theirs, ours, call, x, warm, where=case)
        stats = dgl_accel.stats()
    assert stats["dot_attention"] and not any(k.startswith("pyg.") for k in stats), stats
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x0 = x["src"] if case == "pair" else x
        assert ours(x0, ei[:, ei[1] < 30]).dtype == theirs(x0, ei[:, ei[1] < 30]).dtype == torch.bfloat16


def test_state_dict_and_swap_back():
    theirs = build(pyg_nn.TransformerConv, 6, 4, heads=2, beta=True, edge_dim=3)
    ours = swapped(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    twin = pyg_nn.TransformerConv(6, 4, heads=2, beta=True, edge_dim=3)
    twin.load_state_dict(ours.state_dict())
    dgl_accel.pyg.unswap(ours)
    assert type(ours) is pyg_nn.TransformerConv


# ---------------------------------------------------------------------------------------------- fallbacks, errors
def _counted(reason):
    return dgl_accel.stats().get("pyg.TransformerConv", {}).get(f"fallthrough: {reason}", 0)


def test_fallbacks_are_pygs_numbers_and_counted():
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    x, ea = tst.randn((4, 4), torch.float32, 1), tst.randn((5, 3), torch.float32, 2)
    adj = to_torch_csc_tensor(ei, size=(4, 4)).t()  # PyG's own test's adjacency
    cases = [(build(pyg_nn.TransformerConv, 4, 3, heads=2, edge_dim=3), lambda m: m(x, ei, ea),
              "edge_dim (per-edge key and value terms)"),
             (build(pyg_nn.TransformerConv, 4, 6), lambda m: m(x, ei, tst.randn((5, 1, 6), torch.float32, 3)),
              "edge_attr (PyG adds it to the values)"),
             (build(pyg_nn.TransformerConv, 4, 3), lambda m: m(x, adj), "torch.sparse adjacency"),
             (build(pyg_nn.TransformerConv, 4, 3, aggr="mean"), lambda m: m(x, ei), "aggr 'mean'")]
    for theirs, call, reason in cases:
        ours = swapped(theirs)
        dgl_accel.reset_stats()
        assert_close(call(ours), call(theirs))
        assert _counted(reason) == 1, dgl_accel.stats()


def test_attention_dropout_in_training_is_pygs_mask():
    """PyG's ``F.dropout`` on alpha: its forward (counted), the same numbers from one seed."""
    ei = torch.tensor([[0, 1, 2, 3, 3, 1], [1, 2, 3, 0, 1, 1]])
    theirs = build(pyg_nn.TransformerConv, 4, 3, heads=2, dropout=0.5).train()
    ours = swapped(theirs).train()
    x = tst.randn((4, 4), torch.float32, 3)
    dgl_accel.reset_stats()
    for seed in range(3):
        torch.manual_seed(seed)
        want = theirs(x, ei)
        torch.manual_seed(seed)
        assert_close(ours(x, ei), want, msg=f"seed {seed}")
    assert _counted("attention dropout while training") == 3
    ours.eval()
    ours(x, ei)
    assert dgl_accel.stats()["dot_attention"]


def test_errors_are_pygs_types():
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x = tst.randn((4, 4), torch.float32, 1)
    theirs = build(pyg_nn.TransformerConv, 4, 3, heads=2)
    ours = swapped(theirs)
    bad = [(lambda m: m(x, ei.t()), ValueError), (lambda m: m(x, ei.float()), ValueError),
           (lambda m: m(x, torch.tensor([[0, 4], [1, 0]])), IndexError),
           (lambda m: m(tst.randn((4, 5), torch.float32, 1), ei), RuntimeError)]
    for call, error in bad:
        with pytest.raises(error):
            call(theirs)
        dgl_accel.reset_stats()
        with pytest.raises(error):
            call(ours)
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\].*Fix"):
        ours(x, ei.t())
    with pytest.raises(IndexError, match="larger than"):
        ours(x, torch.tensor([[0, 4], [1, 0]]))


# ---------------------------------------------------------------------------------------------- compile
COMPILED = {"mean-beta": lambda: pyg_nn.TransformerConv(16, 12, heads=3, concat=False, beta=True),
            "concat": lambda: pyg_nn.TransformerConv(16, 6, heads=2)}


def _models(name):
    return swapped_pair(lambda: Net(COMPILED[name]()))


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op, the layer is a boundary")
@pytest.mark.parametrize("name", quick_first(list(COMPILED)))
def test_traces_without_graph_breaks(name):
    eager, _ = _models(name)
    assert_no_graph_breaks(eager, *_graph(50, 300, 1))


@pytest.mark.parametrize("name,backend", quick_first([(n, b) for b in ("aot_eager", "inductor") for n in COMPILED]))
def test_compiled_equals_eager(name, backend):
    """fullgraph=True where the ops trace: outputs and gradients of the eager model on two graphs
    (the second dynamic); the attention ran as the custom op."""
    assert_compiled_equals_eager(*_models(name), backend)


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
def test_attention_weights_under_compile_stay_behind_the_boundary():
    conv = swapped(build(pyg_nn.TransformerConv, 8, 4, heads=2))
    x, ei = _graph(40, 200, 5)
    call = lambda x, ei: _flat(conv(x, ei, return_attention_weights=False), True)  # noqa: E731
    torch._dynamo.reset()
    assert_close(torch.compile(call, backend="aot_eager")(x, ei), call(x, ei))


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
def test_dot_attention_op():
    """opcheck of the custom op under the name ``dot_attention`` (key and value widths differ), and
    its gradients against the eager core op's."""
    gen = torch.Generator().manual_seed(7)
    n = 30
    ei = torch.randint(0, n, (2, 120), generator=gen)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()

    q, k, v = rand(n, 2, 3), rand(n, 2, 3), rand(n, 2, 5)
    torch.library.opcheck(torch.ops.dgl_accel.attention, (ei, n, n, True, "edges", "dot_attention", 0.5, 0.0, None, [q, k, v]))
    out, _ = torch.ops.dgl_accel.attention(ei, n, n, True, "edges", "dot_attention", 0.5, 0.0, None, [q, k, v])
    want = dot_attention(TensorGraph(ei[0], ei[1], num_nodes=n), q, k, v, 0.5)
    cot = torch.randn_like(out)
    assert_close(out, want)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), cot), torch.autograd.grad(want, (q, k, v), cot)):
        assert_close(a, b)
