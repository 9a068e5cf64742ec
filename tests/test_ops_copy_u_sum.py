"""copy_u_sum on both paths (native and the Triton kernel under the interpreter) against the pure-torch
reference and DGL's own gspmm, forward and backward, on the harness's graph strategies."""
import dgl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.ops import copy_u_sum
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.reference import ref_gspmm
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _ref(g, x):
    return ref_gspmm(g, "copy_u", "sum", x)


def _check(g, x, name):
    with dgl_accel.use_backend(name):
        out = copy_u_sum(g, x)
    assert out.shape == (g.num_dst_nodes(), x.shape[1]) and out.dtype == x.dtype
    assert_matches_reference(out, _ref, g, x, msg=name)
    if x.dtype == torch.float32:  # DGL itself is the second reference (fp32 only on CPU)
        assert_close(out, dgl.ops.copy_u_sum(g, x), msg=f"{name} vs dgl")


@given(gf=gst.graph_and_features(graph_strategy=st.one_of(gst.graphs(), gst.blocks()), dtypes=DTYPES))
def test_forward_matches_reference_and_dgl(gf):
    g, x = gf
    for name in ("native", "triton"):
        _check(g, x, name)


@settings(max_examples=3)  # ~2k rows with >1024-neighbour hubs: slow under the interpreter
@given(gf=gst.graph_and_features(graph_strategy=gst.power_law_graphs(), dim=st.integers(1, 8)))
def test_forward_on_hubs_above_1024(gf):
    g, x = gf
    assert int(g.in_degrees().max()) > 1024
    for name in ("native", "triton"):
        _check(g, x, name)


@given(gf=gst.graph_and_features(graph_strategy=st.one_of(gst.graphs(max_nodes=24, max_edges=64),
                                                          gst.blocks(max_dst=12, max_edges=64)),
                                 dim=st.integers(1, 4), non_contiguous=False))
def test_backward_matches_dgl(gf):
    g, x = gf
    grad_out = torch.randn(g.num_dst_nodes(), x.shape[1])
    x_ref = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(dgl.ops.copy_u_sum(g, x_ref), x_ref, grad_out)
    for name in ("native", "triton"):
        xx = x.clone().requires_grad_()
        with dgl_accel.use_backend(name):
            (got,) = torch.autograd.grad(copy_u_sum(g, xx), xx, grad_out)
        assert_close(got, expected, msg=name)


def test_gradcheck_fp64_on_directed_graph(path):
    g = dgl.graph(([0, 0, 1, 2, 3, 3], [1, 2, 2, 0, 0, 3]), num_nodes=5)  # not symmetric, self loop, isolated
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: copy_u_sum(g, t), (x,))


def test_trailing_dims_and_graph_unchanged(path):
    g = dgl.rand_graph(30, 100)
    g.ndata["h"] = torch.randn(30, 2, 3)
    before = (g.edges()[0].clone(), g.edges()[1].clone(), dict(g.ndata))
    out = copy_u_sum(g, g.ndata["h"])
    assert out.shape == (30, 2, 3)
    assert_close(out, dgl.ops.copy_u_sum(g, g.ndata["h"]))
    assert torch.equal(g.edges()[0], before[0]) and torch.equal(g.edges()[1], before[1])
    assert set(g.ndata.keys()) == {"h"} and g.num_edges() == 100


@pytest.mark.parametrize("make, match", [
    (lambda g: copy_u_sum(g, torch.ones(7, 2)), r"expected feat with 10 rows, one per source node \(got 7\)"),
    (lambda g: copy_u_sum(g, torch.ones(10, 2, dtype=torch.int64)), r"expected floating-point features .*\(got torch.int64\)"),
    (lambda g: copy_u_sum(g, [1.0]), r"expected feat to be a tensor"),
    (lambda g: copy_u_sum(dgl.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])}),
                          torch.ones(1, 2)), r"expected"),
])
def test_bad_input_is_rejected_before_any_kernel(make, match, path):
    g = dgl.rand_graph(10, 20)
    with pytest.raises((ValueError, dgl.DGLError), match=match):
        make(g)
    assert dgl_accel.stats() == {}  # nothing was launched or counted
