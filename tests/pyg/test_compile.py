"""``torch.compile`` of a model with swapped PyG convs.  On torch >= 2.4 the drop-ins' core ops run as
torch custom ops (:mod:`dgl_accel.core.library`): dynamo traces the layers, explain() finds no
graph break, ``fullgraph=True`` compiles, and the compiled model's outputs and gradients are the
eager model's, also over graphs of another size (dynamic shapes).  On torch 2.2 (no
``torch.library.custom_op``) each drop-in is a compile boundary
(:func:`dgl_accel.pyg.nn.inputs.compile_boundary`) and the model still compiles and agrees."""
import copy
import functools
import subprocess
import sys

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402

import dgl_accel.pyg  # noqa: E402
from dgl_accel.core import library  # noqa: E402
from dgl_accel.core.aggregation.views import TensorGraph  # noqa: E402
from dgl_accel.core.attention.gat import gat_attention, gat_layer  # noqa: E402
from dgl_accel.core.extrema import aggregate_extrema  # noqa: E402
from dgl_accel.pyg import graph as pyg_graph  # noqa: E402
from dgl_accel.testing.marks import quick_first  # noqa: E402

CONVS = {
    "GCNConv": lambda: pyg_nn.GCNConv(16, 12),
    "SAGEConv": lambda: pyg_nn.SAGEConv(16, 12),
    "SAGEConv-max": lambda: pyg_nn.SAGEConv(16, 12, aggr="max"),
    "GINConv": lambda: pyg_nn.GINConv(torch.nn.Linear(16, 12), train_eps=True),
    "GATConv": lambda: pyg_nn.GATConv(16, 6, heads=2),
    "GATConv-mean-heads": lambda: pyg_nn.GATConv(16, 12, heads=2, concat=False),  # gat_layer without its bias
    "GATv2Conv": lambda: pyg_nn.GATv2Conv(16, 6, heads=2),
    "GraphConv": lambda: pyg_nn.GraphConv(16, 12),
}
TRACED = library.AVAILABLE  # torch >= 2.4: the custom ops, no graph break


class Net(torch.nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.pre, self.conv, self.post = torch.nn.Linear(8, 16), conv, torch.nn.Linear(12, 3)

    def forward(self, x, edge_index):
        return self.post(self.conv(self.pre(x).relu(), edge_index).relu())


def _graph(n: int, e: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=gen), torch.randint(0, n, (2, e), generator=gen)


def _grads(model, x, edge_index):
    x = x.clone().requires_grad_()
    out = model(x, edge_index)
    out.square().sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return out.detach(), grads


def swapped_pair(make):
    """(a model ``make()`` builds from seed 0 with its convs swapped, a deep copy of it): the eager
    model and the twin to compile, with the same weights."""
    torch.manual_seed(0)
    eager = make()
    assert dgl_accel.pyg.swap(eager).swapped
    return eager, copy.deepcopy(eager)


def _models(name):
    return swapped_pair(lambda: Net(CONVS[name]()))


def _assert_same(compiled, eager, x, edge_index):
    got_out, got_grads = _grads(compiled, x, edge_index)
    want_out, want_grads = _grads(eager, x, edge_index)
    torch.testing.assert_close(got_out, want_out, rtol=1e-5, atol=1e-5)
    for got, want in zip(got_grads, want_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# one case in the quick lane: its fullgraph=True compiles below fail on any graph break too
@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op, the layers are boundaries")
@pytest.mark.parametrize("name", quick_first(list(CONVS)))
def test_swapped_convs_trace_without_graph_breaks(name):
    eager, _ = _models(name)
    assert_no_graph_breaks(eager, *_graph(50, 300, 1))


def assert_no_graph_breaks(model, *inputs) -> None:
    """``torch._dynamo.explain`` finds no graph break in ``model(*inputs)`` (each reason shown if it does)."""
    torch._dynamo.reset()
    found = torch._dynamo.explain(model)(*inputs)
    assert found.graph_break_count == 0, [str(r.reason)[:200] for r in found.break_reasons]


def assert_compiled_equals_eager(eager, twin, backend: str) -> None:
    """``twin`` (a copy of ``eager``) compiled with ``fullgraph=True`` where the ops trace gives the eager
    model's outputs and gradients (input, every parameter) on two graphs of different node and edge
    counts (the second one dynamic)."""
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend=backend, fullgraph=TRACED)
    for n, e, seed in ((200, 2500, 1), (150, 1700, 2)):
        _assert_same(compiled, eager, *_graph(n, e, seed))


@pytest.mark.parametrize("backend", quick_first(["aot_eager", "inductor"]))
@pytest.mark.parametrize("name", list(CONVS))
def test_compiled_model_with_swapped_convs_equals_eager(name, backend):
    assert_compiled_equals_eager(*_models(name), backend)


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
def test_compiled_graph_is_converted_once_and_ids_are_checked():
    """The custom ops fetch the PyG adapter's cached views (one conversion per graph across
    calls and layers), and PyG's IndexError for an id out of range comes from inside them."""
    eager, twin = _models("SAGEConv")
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend="aot_eager", fullgraph=True)
    x, edge_index = _graph(60, 400, 4)
    compiled(x, edge_index)
    builds = pyg_graph.CACHE.builds
    for _ in range(3):
        compiled(x, edge_index).sum().backward()
    assert pyg_graph.CACHE.builds == builds
    with pytest.raises(IndexError, match="larger than 59"):
        compiled(x, torch.cat([edge_index, torch.tensor([[60], [0]])], dim=1))


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
def test_inputs_the_ops_do_not_take_stay_behind_the_boundary():
    """A sparse adjacency and return_attention_weights run the layer eagerly inside the compiled
    model (behind the boundary: fullgraph=True refuses it), with the eager results."""
    class Weights(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = dgl_accel.pyg.nn.GATConv(8, 4, heads=2)

        def forward(self, x, edge_index):
            out, (graph, alpha) = self.conv(x, edge_index, return_attention_weights=True)
            return out.sum() + alpha.sum()

    model = Weights()
    x, edge_index = _graph(40, 200, 5)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported, match="disable"):  # the boundary: not one graph
        torch.compile(model, backend="aot_eager", fullgraph=True)(x, edge_index)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(model, backend="aot_eager")(x, edge_index), model(x, edge_index))
    gcn = dgl_accel.pyg.nn.GCNConv(8, 4)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(200), (40, 40)).coalesce().to_sparse_csr()
    torch._dynamo.reset()
    got = torch.compile(gcn, backend="aot_eager")(x, adj)
    torch.testing.assert_close(got, gcn(x, adj))


def _views_args(n=30, e=120, seed=6):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, e), generator=gen), n


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("case", ["u_mul_e-mean", "max", "sum_self", "gat_layer", "gat_layer-dropout"] + [
    pytest.param(case, marks=pytest.mark.slow)
    for case in ("copy_u-sum", "copy_u-mean", "u_mul_e-sum", "transposed", "min", "gat_attention", "gatv2_attention")])
def test_opcheck(case):
    """torch.library.opcheck: schema, fake (shapes, dtypes), autograd registration, of each op."""
    edge_index, n = _views_args()
    g = (edge_index, n, n, True, "edges")
    gen = torch.Generator().manual_seed(7)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()

    ops = torch.ops.dgl_accel
    if case in ("copy_u-sum", "copy_u-mean", "u_mul_e-sum", "u_mul_e-mean", "transposed"):
        op, reduce = case.split("-") if "-" in case else ("u_mul_e", "mean")
        w = rand(edge_index.shape[1]) if op == "u_mul_e" else None
        call = (ops.aggregate, g + (op, reduce, case == "transposed", False, rand(n, 5), w))
    elif case in ("max", "min"):
        call = (ops.aggregate_extrema, g + (case, 0.0, True, rand(n, 5)))
    elif case == "sum_self":
        call = (ops.copy_u_sum_self, g + (rand(n, 5), rand(1), 0.0))
    elif case in ("gat_layer", "gat_layer-dropout"):
        drop = (0.5, torch.tensor([5])) if case.endswith("dropout") else (0.0, None)
        call = (ops.attention, g + ("gat_layer", 0.2, *drop,
                                    [rand(n, 5), rand(6, 5), rand(1, 2, 3), rand(1, 2, 3), rand(6)]))
    elif case == "gat_attention":
        call = (ops.attention, g + (case, 0.2, 0.0, None, [rand(n, 2, 3), rand(n, 2), rand(n, 2)]))
    else:
        call = (ops.attention, g + (case, 0.2, 0.0, None, [rand(n, 2, 3), rand(n, 2, 3), rand(2, 3)]))
    torch.library.opcheck(call[0], call[1])


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
def test_ops_gradients_are_the_eager_ops():
    """Each op's gradient (through register_autograd) against the eager core op's, gradcheck-exact."""
    edge_index, n = _views_args()
    views = TensorGraph(edge_index[0], edge_index[1], num_nodes=n)
    g = (edge_index, n, n, True, "edges")
    for reduce in ("sum", "mean"):
        torch.autograd.gradcheck(functools.partial(torch.ops.dgl_accel.aggregate, *g, "u_mul_e", reduce, False, False),
                                 (torch.randn(n, 3, dtype=torch.float64, requires_grad=True),
                                  torch.rand(edge_index.shape[1], dtype=torch.float64, requires_grad=True)))
    torch.autograd.gradcheck(lambda x, s: torch.ops.dgl_accel.copy_u_sum_self(*g, x, s, 0.0),
                             (torch.randn(n, 3, dtype=torch.float64, requires_grad=True),
                              torch.rand(1, dtype=torch.float64, requires_grad=True)))
    x = torch.randn(n, 4, dtype=torch.float64, requires_grad=True)
    out, _ = torch.ops.dgl_accel.aggregate_extrema(*g, "max", 0.0, True, x)
    cot = torch.randn_like(out)
    got = torch.autograd.grad(out, x, cot)[0]
    want = torch.autograd.grad(aggregate_extrema(views, "copy_u", "max", x), x, cot)[0]
    torch.testing.assert_close(got, want)


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("name", ["gat_layer", "gat_attention"])
def test_gat_attention_dropout_in_the_op_is_the_eager_ops_hashed_mask(name):
    """GAT's attention dropout through the custom op: the eager op's output for the same seed (one mask
    hashed from it), and the backward the forward's mask (gradcheck-exact)."""
    edge_index, n = _views_args(e=200)
    views = TensorGraph(edge_index[0], edge_index[1], num_nodes=n)
    gen = torch.Generator().manual_seed(8)
    if name == "gat_layer":
        inputs = [torch.randn(*s, generator=gen, dtype=torch.float64).requires_grad_()
                  for s in ((n, 5), (6, 5), (1, 2, 3), (1, 2, 3))]
        eager = gat_layer(views, *inputs, None, 0.2, 0.5, seed=5)
    else:
        inputs = [torch.randn(*s, generator=gen, dtype=torch.float64).requires_grad_()
                  for s in ((n, 2, 3), (n, 2), (n, 2))]
        eager = gat_attention(views, *inputs, 0.2, dropout=0.5, seed=5)
    op = functools.partial(torch.ops.dgl_accel.attention, edge_index, n, n, True, "edges", name, 0.2, 0.5,
                           torch.tensor([5]))
    got = op(inputs)[0]
    torch.testing.assert_close(got, eager)
    dropped = torch.ops.dgl_accel.attention(edge_index, n, n, True, "edges", name, 0.2, 0.0, None, inputs)[0]
    assert not torch.allclose(got, dropped)  # the mask did something
    torch.autograd.gradcheck(lambda *t: op(list(t))[0], tuple(inputs))


@pytest.mark.skipif(not TRACED, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("name,traced", [("GATConv", True), ("TransformerConv", True), ("GATv2Conv", False)])
def test_attention_dropout_while_training_under_compile(name, traced):
    """The GAT paper's recipe (dropout 0.6, training): GATConv's dropout inside the custom op and
    TransformerConv's through PyG's own forward trace in one graph; GATv2Conv's stays behind the
    boundary (PyG's forward, which runs it, breaks the graph itself).  The compiled model trains:
    a seeded run repeats, another seed draws another mask."""
    make = {"GATConv": lambda: pyg_nn.GATConv(16, 6, heads=2, dropout=0.6),
            "TransformerConv": lambda: pyg_nn.TransformerConv(16, 12, heads=2, dropout=0.6, concat=False),
            "GATv2Conv": lambda: pyg_nn.GATv2Conv(16, 12, heads=2, dropout=0.6, concat=False)}[name]
    eager, twin = swapped_pair(lambda: Net(make()))
    x, edge_index = _graph(50, 300, 1)
    if traced:
        assert_no_graph_breaks(eager, x, edge_index)
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend="aot_eager", fullgraph=traced)
    runs = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        runs.append(_grads(compiled, x, edge_index))
    torch.testing.assert_close(runs[0], runs[1])
    assert not torch.allclose(runs[0][0], runs[2][0])


EXPLAIN_MULTI_AGGR = """
import torch, dgl_accel.pyg, torch_geometric.nn as pyg_nn
conv = pyg_nn.SAGEConv(8, 32, aggr=["mean", "sum", "max"])
dgl_accel.pyg.swap(conv)
x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
print(type(conv).__module__, torch._dynamo.explain(conv)(x, edge_index).graph_break_count)
"""


# a fresh process by necessity: tracing a multi-aggregation SAGEConv changes PyG's SAGEConv class
# for the rest of the process (plain PyG too: a later SAGEConv on a sparse adjacency then raises
# "'message_and_aggregate' not implemented")
def test_a_layer_its_settings_send_to_pyg_is_traced_as_pygs():
    """PyG's own test_compile_multi_aggr_sage_conv: a multi-aggregation SAGEConv runs PyG's forward,
    and dynamo traces it whole, swapped or not (the compile boundary is for the core's layers)."""
    done = subprocess.run([sys.executable, "-c", EXPLAIN_MULTI_AGGR], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["dgl_accel.pyg.nn.sage_conv", "0"], done.stdout
