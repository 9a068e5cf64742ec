"""``dgl_accel.nn.GINConv``'s linear-first forward (``(1 + eps) Wx + A(Wx) + b`` where that moves
fewer columns through the aggregation): DGL's outputs and gradients (input, weights, eps, edge
weights) on graphs with empty rows and on square blocks; the rule that picks it, and the cases that
keep DGL's forward on the routed ops."""
import copy

import dgl
import dgl.nn
import pytest
import torch

import dgl_accel
from dgl_accel.nn.ginconv import linear_first_pays
from dgl_accel.testing.tolerances import assert_close


def _graph():
    gen = torch.Generator().manual_seed(5)
    src, dst = torch.randint(0, 40, (300,), generator=gen), torch.randint(0, 36, (300,), generator=gen)
    return dgl.graph((src, dst), num_nodes=40)  # nodes 36-39: no in-edges


def _run(conv, g, x, ew):
    conv.zero_grad()
    x = x.clone().requires_grad_()
    ew = None if ew is None else ew.clone().requires_grad_()
    out = conv(g, x, edge_weight=ew)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    grads = {k: p.grad.clone() for k, p in conv.named_parameters() if p.grad is not None}
    return out.detach(), x.grad, None if ew is None else ew.grad, grads


def _assert_swapped_equals(theirs, g, weighted: bool, path_method: str):
    """The swapped copy of DGL's module ``theirs`` takes ``path_method`` and gives DGL's outputs and
    gradients (input, edge weights, every parameter)."""
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    calls = []
    original = getattr(type(ours), path_method)
    setattr(ours, path_method, lambda *a: calls.append(1) or original(ours, *a))
    x, ew = torch.randn(40, 12), (torch.rand(g.num_edges()) + 0.5 if weighted else None)
    want, got = _run(theirs, g, x, ew), _run(ours, g, x, ew)
    assert calls, f"{path_method} did not run"
    for name, a, b in (("out", got[0], want[0]), ("dx", got[1], want[1]), ("dw", got[2], want[2])):
        if b is not None:
            assert_close(a, b, msg=name)
    assert got[3].keys() == want[3].keys()
    for k in want[3]:
        assert_close(got[3][k], want[3][k], msg=k)


@pytest.mark.parametrize("aggregator", ["sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kw", [{}, {"learn_eps": True, "activation": torch.tanh}, {"init_eps": 0.3}])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_first_equals_dgls_module(path, aggregator, weighted, kw, bias):
    g = _graph()
    torch.manual_seed(0)
    theirs = dgl.nn.GINConv(torch.nn.Linear(12, 5, bias=bias), aggregator, **kw)
    _assert_swapped_equals(theirs, g, weighted, "_linear_first")


def test_linear_first_pays_only_where_fewer_columns_move():
    assert linear_first_pays(128, 64, x_needs_grad=True, any_grad=True)       # hidden layer: 128 < 256
    assert not linear_first_pays(128, 64, x_needs_grad=False, any_grad=True)  # input layer: 128 = 128
    assert linear_first_pays(129, 64, x_needs_grad=False, any_grad=True)
    assert linear_first_pays(128, 64, x_needs_grad=False, any_grad=False)     # inference
    assert not linear_first_pays(64, 64, x_needs_grad=True, any_grad=True)


def test_other_cases_keep_dgls_forward():
    g = _graph()
    conv = dgl_accel.nn.GINConv(torch.nn.Linear(12, 5), "sum")
    calls = []
    conv._linear_first = lambda *a: calls.append(1)
    x = torch.randn(40, 12)
    conv(g, x)                                    # an input layer at 12 -> 5: 2 x 5 columns < 12
    assert calls == [1]
    calls.clear()
    conv(g, torch.randn(40, 12, requires_grad=True))  # a hidden layer: 2 x 5 < 2 x 12
    wide = dgl_accel.nn.GINConv(torch.nn.Linear(8, 5), "sum")
    wide._linear_first = conv._linear_first
    wide(g, torch.randn(40, 8))                   # input layer, 8 < 2 * 5: DGL's order moves fewer
    for module in (dgl_accel.nn.GINConv(torch.nn.Sequential(torch.nn.Linear(12, 5)), "sum"),  # not a plain Linear
                   dgl_accel.nn.GINConv(torch.nn.Linear(12, 5), "max")):                      # max does not commute
        module._linear_first = conv._linear_first
        module(g, torch.randn(40, 12, requires_grad=True))
    conv(g, (x, x[:40]))                          # a pair of features
    block = dgl.to_block(dgl.in_subgraph(g, torch.arange(10)), torch.arange(10))
    conv(block, torch.randn(block.num_src_nodes(), 12, requires_grad=True))  # more sources than destinations
    assert calls == [1]


@pytest.mark.parametrize("aggregator", ["sum", "mean", "max"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kw", [{"init_eps": 0.3}, {"learn_eps": True, "init_eps": -0.2, "activation": torch.tanh}])
@pytest.mark.parametrize("apply_func", ["wide_linear", "mlp"])
def test_direct_forward_equals_dgls_module(path, aggregator, weighted, kw, apply_func):
    # where linear first does not apply (a layer that widens, an MLP, max), DGL's forward runs with
    # the aggregation called directly, not through update_all: the same outputs and gradients
    g = _graph()
    torch.manual_seed(0)
    func = (torch.nn.Linear(12, 30) if apply_func == "wide_linear"
            else torch.nn.Sequential(torch.nn.Linear(12, 8), torch.nn.ReLU(), torch.nn.Linear(8, 5)))
    theirs = dgl.nn.GINConv(func, aggregator, **kw)
    _assert_swapped_equals(theirs, g, weighted, "_direct")


def test_a_pair_of_features_keeps_dgls_forward():
    # (x_src, x_dst) is DGL's bipartite input: neither own path takes it, whatever apply_func is
    g = _graph()
    x = torch.randn(40, 12)
    for func in (torch.nn.Linear(12, 5), torch.nn.Sequential(torch.nn.Linear(12, 5))):
        theirs = dgl.nn.GINConv(func, "sum", init_eps=0.3)
        ours = copy.deepcopy(theirs)
        dgl_accel.swap(ours)
        ours._direct = ours._linear_first = None  # calling either would fail here
        assert_close(ours(g, (x, x)), theirs(g, (x, x)))
