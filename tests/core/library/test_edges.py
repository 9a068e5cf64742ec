"""The per-edge custom ops of :mod:`dgl_accel.core.library.edges` (GINEConv's and EdgeConv's, for
``torch.compile``), without PyG: ``torch.library.opcheck`` of each op (schema, fake shapes and
dtypes, autograd registration, AOT dispatch), and the core entries on a
:class:`~dgl_accel.core.library.TracedGraph` (the hand-off to the ops) against the same entries on
the eager views: outputs and every gradient."""
import pytest
import torch

import dgl_accel
from dgl_accel.core import library
from dgl_accel.core.add_relu_sum import add_relu_sum
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.extrema import aggregate_extrema
from dgl_accel.core.sddmm.function import gsddmm
from dgl_accel.testing.cpu_loops import forced_jit

pytestmark = pytest.mark.skipif(not library.AVAILABLE, reason="torch < 2.4: no torch.library.custom_op")

N, E = 30, 120


def _graph(seed=6):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, N, (2, E), generator=gen)


def _rand(*shape, seed=7, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_()


def _calls(edge_index):
    """{case: (op, args)} of every op of the module, its backward ops included."""
    g = (edge_index, N, N, True, "edges")
    ops = torch.ops.dgl_accel
    arg = ops.aggregate_extrema_edges(*g, "u_add_e", "max", 0.0, True, _rand(N, 5), _rand(E, 5))[1]
    return {
        "add_relu_sum": (ops.add_relu_sum, g + (_rand(N, 5), _rand(E, 5))),
        "add_relu_sum_projected": (ops.add_relu_sum_projected, g + (_rand(N, 5).detach(), _rand(E, 3).detach(),
                                                                    _rand(5, 3).detach(), _rand(5).detach())),
        "add_relu_sum_backward": (ops.add_relu_sum_backward, g + (_rand(N, 5), _rand(E, 5), _rand(N, 5), True, False)),
        "gsddmm-add": (ops.gsddmm, g + ("add", _rand(N, 2, 3), _rand(N, 2, 3), "u", "v")),
        "gsddmm-mul-e": (ops.gsddmm, g + ("mul", _rand(N, 2, 3), _rand(E, 2, 1), "u", "e")),
        "gsddmm-dot": (ops.gsddmm, g + ("dot", _rand(N, 2, 3), _rand(N, 2, 3), "v", "u")),
        "gsddmm-div": (ops.gsddmm, g + ("div", _rand(N, 2, 3), _rand(E, 2, 3).detach().abs().add(0.5)
                                        .requires_grad_(), "u", "e")),
        "gsddmm-copy_rhs": (ops.gsddmm, g + ("copy_rhs", None, _rand(E, 4), "u", "e")),
        "gsddmm_backward": (ops.gsddmm_backward, g + ("add", None, None, "u", "e", [N, 4], [E, 4], True, True,
                                                      _rand(E, 4))),
        "extrema-u_add_e": (ops.aggregate_extrema_edges, g + ("u_add_e", "max", 0.0, True, _rand(N, 5), _rand(E, 5))),
        "extrema-u_mul_e": (ops.aggregate_extrema_edges, g + ("u_mul_e", "min", 0.0, True, _rand(N, 5), _rand(E, 1))),
        "extrema-copy_e": (ops.aggregate_extrema_edges, g + ("copy_e", "max", 1.5, True, None, _rand(E, 2, 3))),
        "extrema_backward": (ops.aggregate_extrema_edges_backward, g + ("u_add_e", arg, _rand(N, 5), None, None,
                                                                        [N, 5], [E, 5], True, True)),
        "in_degrees": (ops.in_degrees, g),
    }


CASES = list(_calls(_graph()) if library.AVAILABLE else [])
QUICK = ("add_relu_sum", "gsddmm-add", "extrema-u_add_e", "extrema-copy_e", "in_degrees")


@pytest.mark.parametrize("case", [c if c in QUICK else pytest.param(c, marks=pytest.mark.slow) for c in CASES])
def test_opcheck(case):
    op, args = _calls(_graph())[case]
    if "backward" in case:  # no double backward: the backward ops' inputs need no gradient
        args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    torch.library.opcheck(op, args)


def _grads(out, inputs, seed):
    cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    wrt = [t for t in inputs if t is not None and t.requires_grad]
    return [out.detach()] + list(torch.autograd.grad(out, wrt, cot))


ENTRIES = {  # (entry, operands): the core entry as GINEConv / EdgeConv call it, and further kinds
    "add_relu_sum": (add_relu_sum, lambda: (_rand(N, 5), _rand(E, 5))),
    "add_relu_sum-x": (add_relu_sum, lambda: (_rand(N, 5), _rand(E, 5).detach())),
    "gsddmm-add": (lambda g, a, b: gsddmm(g, "add", a, b, "u", "v"), lambda: (_rand(N, 4), _rand(N, 4))),
    "gsddmm-dot-1d": (lambda g, a, b: gsddmm(g, "mul", a, b, "u", "e"), lambda: (_rand(N), _rand(E))),
    "gsddmm-div": (lambda g, a, b: gsddmm(g, "div", a, b, "e", "v"),
                   lambda: (_rand(E, 3), _rand(N, 1).detach().abs().add(0.5).requires_grad_())),
    "u_add_e-max": (lambda g, x, w: aggregate_extrema(g, "u_add_e", "max", x, w), lambda: (_rand(N, 5), _rand(E, 5))),
    "u_mul_e-min": (lambda g, x, w: aggregate_extrema(g, "u_mul_e", "min", x, w), lambda: (_rand(N, 5), _rand(E, 1))),
    "copy_e-max": (lambda g, w: aggregate_extrema(g, "copy_e", "max", None, w, fill=0.0), lambda: (_rand(E, 2, 3),)),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", list(ENTRIES))
def test_entries_on_a_traced_graph_equal_eager(case, jit):
    """The core entry on a TracedGraph (the custom op and its registered backward) against the same
    entry on TensorGraph views: the output and every input's gradient, fp64, compiled loops or not."""
    edge_index = _graph()
    entry, operands = ENTRIES[case]
    traced = library.TracedGraph(edge_index, N, N, True)
    views = TensorGraph(edge_index[0], edge_index[1], num_nodes=N)
    with forced_jit(jit):
        got = _grads(entry(traced, *(inputs := operands())), inputs, 1)
        want = _grads(entry(views, *(inputs := operands())), inputs, 1)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b)


def test_traced_in_degrees_and_cache():
    edge_index = _graph()
    traced = library.TracedGraph(edge_index, N, N, True)
    want = torch.bincount(edge_index[1], minlength=N)
    assert torch.equal(traced.in_degrees(), want)
    assert torch.equal(traced.cached("in", traced.in_degrees), want)


@pytest.mark.parametrize("jit", [False, True])
def test_projected_inference_on_a_traced_graph_is_eagers(jit):
    """Inference with a linear layer on the edge features: the projected op runs the eager function
    (the per-edge projected pass where the loops run), the same numbers."""
    edge_index = _graph()
    x, a, weight, bias = (_rand(N, 5), _rand(E, 3), _rand(5, 3), _rand(5))
    views = TensorGraph(edge_index[0], edge_index[1], num_nodes=N)
    with torch.no_grad(), forced_jit(jit):
        dgl_accel.reset_stats()
        got = add_relu_sum(library.TracedGraph(edge_index, N, N, True), x, a, weight, bias)
        assert bool(dgl_accel.stats().get("add_relu_sum_projected")) == jit
        want = add_relu_sum(views, x, a, weight, bias)
    torch.testing.assert_close(got, want)
