"""The max/min rule per CPU vendor (``dgl_accel.policies.extrema``): on an Intel CPU, ``copy_u``
max/min over long rows that needs a gradient runs DGL's kernel; the front door's contract holds there
(rows without in-edges hold ``fill`` and pass no gradient back, DGL's module's numbers), and every
other call stays on the core's op."""
import copy

import dgl
import dgl.nn
import pytest
import torch

import dgl_accel
import dgl_accel.nn
from dgl_accel import functional
from dgl_accel.core import machine
from dgl_accel.policies import extrema as policy
from dgl_accel.testing.tolerances import assert_close

REASON = "fallthrough: long rows on an Intel CPU (average in-degree >= 32, <= 256 features)"


@pytest.fixture
def vendor(monkeypatch):
    def set_vendor(name):
        monkeypatch.setattr(machine, "_vendor", name)
    return set_vendor


def _long_rows(num_nodes=60, degree=40, seed=0):
    """A graph whose average in-degree is ``degree``, node 0 without in-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_nodes * degree,), generator=gen)
    dst = torch.randint(1, num_nodes, (num_nodes * degree,), generator=gen)
    return dgl.graph((src, dst), num_nodes=num_nodes)


def _max_with_grad(g, x, reduce="max", fill=0.0):
    xx = x.clone().requires_grad_()
    out = functional.gspmm(g, "copy_u", reduce, xx, fill=fill)
    out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
    return out.detach(), xx.grad


@pytest.mark.parametrize("reduce,fill", [("max", 0.0), ("min", 0.0), ("max", float("-inf")), ("min", 2.5)])
def test_intel_long_rows_run_dgl_with_the_core_contract(vendor, reduce, fill):
    g = _long_rows()
    x = torch.randn(g.num_nodes(), 8)
    vendor("AuthenticAMD")
    dgl_accel.reset_stats()
    expected = _max_with_grad(g, x, reduce, fill)
    assert REASON not in dgl_accel.stats()[f"copy_u_{reduce}"]
    vendor("GenuineIntel")
    dgl_accel.reset_stats()
    got = _max_with_grad(g, x, reduce, fill)
    assert dgl_accel.stats()[f"copy_u_{reduce}"] == {REASON: 1}
    assert torch.equal(got[0][0], torch.full((8,), fill))  # node 0: no in-edges
    assert_close(got[0], expected[0])
    assert_close(got[1], expected[1])  # DGL's backward would send node 0's gradient to node 0 too


def test_intel_sage_pool_drop_in_equals_dgl_module(vendor):
    vendor("GenuineIntel")
    g = _long_rows(seed=1)
    torch.manual_seed(0)
    theirs = dgl.nn.SAGEConv(8, 4, "pool")
    ours = copy.deepcopy(theirs)
    dgl_accel.nn.swap(ours)
    x = torch.randn(g.num_nodes(), 8)

    def run(conv):
        xx = x.clone().requires_grad_()
        out = conv(g, xx)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
        return out.detach(), xx.grad, {k: p.grad for k, p in conv.named_parameters()}

    dgl_accel.reset_stats()
    got, expected = run(ours), run(theirs)
    assert dgl_accel.stats()["copy_u_max"] == {REASON: 1}
    assert_close(got[0], expected[0])
    assert_close(got[1][1:], expected[1][1:])  # node 0 gets DGL's spurious gradient from its own empty row
    for k in expected[2]:
        assert_close(got[2][k], expected[2][k], msg=k)


@pytest.mark.parametrize("case", ["amd", "short rows", "wide rows", "no gradient", "edge weights", "triton"])
def test_everything_else_stays_on_the_core(vendor, case):
    vendor("AuthenticAMD" if case == "amd" else "GenuineIntel")
    g = _long_rows(degree=8 if case == "short rows" else 40)
    x = torch.randn(g.num_nodes(), policy.DGL_MAX_WIDTH + 1 if case == "wide rows" else 8)
    x.requires_grad_(case != "no gradient")
    w = torch.rand(g.num_edges(), requires_grad=True) if case == "edge weights" else None
    dgl_accel.reset_stats()
    with dgl_accel.use_backend("triton" if case == "triton" else "native"):
        functional.gspmm(g, "copy_u" if w is None else "u_mul_e", "max", x, w)
    labels = {label for d in dgl_accel.stats().values() for label in d}
    assert labels and not any(label.startswith("fallthrough") for label in labels), labels


@pytest.mark.parametrize("bad", ["one row short", "numpy", "list"])
def test_bad_input_gets_the_core_error_on_the_dgl_path(vendor, bad):
    vendor("GenuineIntel")
    g = _long_rows()
    x = torch.randn(g.num_nodes() - (bad == "one row short"), 8, requires_grad=True)
    x = {"numpy": x.detach().numpy(), "list": x.tolist()}.get(bad, x)
    with pytest.raises(ValueError, match="ufeat"):
        functional.gspmm(g, "copy_u", "max", x)
