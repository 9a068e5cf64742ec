"""dgl_accel.nn.GraphConv is a drop-in for dgl.nn.GraphConv: same parameters, state_dict keys,
outputs and gradients, on both paths; unaccelerated cases fall back to DGL unchanged."""
import dgl
import dgl.nn
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.nn import GraphConv
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.tolerances import assert_close


def _pair(in_f, out_f, norm, seed=0):
    torch.manual_seed(seed)
    ours = GraphConv(in_f, out_f, norm=norm, allow_zero_in_degree=True)
    theirs = dgl.nn.GraphConv(in_f, out_f, norm=norm, allow_zero_in_degree=True)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


@pytest.mark.interpreter
@given(gf=gst.graph_and_features(graph_strategy=st.one_of(gst.graphs(max_nodes=40, max_edges=120),
                                                          gst.blocks(max_dst=16, max_edges=120)),
                                 dim=st.integers(1, 12)),
       out_f=st.integers(1, 12), norm=st.sampled_from(["both", "left", "right", "none"]))
def test_matches_dgl_forward_and_backward(gf, out_f, norm):
    g, x = gf
    ours, theirs = _pair(x.shape[1], out_f, norm)
    x_ref = x.detach().clone().requires_grad_()
    expected = theirs(g, x_ref)
    expected.sum().backward()
    for name in ("native", "triton"):
        ours.zero_grad()
        xx = x.detach().clone().requires_grad_()
        with dgl_accel.use_backend(name):
            got = ours(g, xx)
        got.sum().backward()
        assert_close(got, expected, msg=f"{name} out")
        assert_close(xx.grad, x_ref.grad, msg=f"{name} dx")
        for (k, p), q in zip(ours.named_parameters(), theirs.parameters()):
            assert_close(p.grad, q.grad, msg=f"{name} d{k}")


def test_is_a_dgl_graphconv_with_identical_state_dict_keys():
    ours, theirs = _pair(5, 3, "both")
    assert isinstance(ours, dgl.nn.GraphConv)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_zero_in_degree_raises_dgls_error_when_not_allowed(path):
    g = dgl.graph(([0], [1]), num_nodes=3)
    conv = GraphConv(2, 2)
    with pytest.raises(dgl.DGLError, match="0-in-degree"):
        conv(g, torch.ones(3, 2))


@pytest.mark.parametrize("in_f, out_f", [(4, 3), (3, 5)])  # both matmul orders
@pytest.mark.parametrize("wshape", [(60,), (60, 1)])
def test_edge_weight_runs_u_mul_e_and_matches_dgl(path, in_f, out_f, wshape):
    g = dgl.add_self_loop(dgl.rand_graph(20, 60 - 20))
    ours, theirs = _pair(in_f, out_f, "both")
    x, w = torch.randn(20, in_f), torch.rand(wshape)
    xo, wo = x.clone().requires_grad_(), w.clone().requires_grad_()
    xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
    ours(g, xo, edge_weight=wo).sum().backward()
    theirs(g, xt, edge_weight=wt).sum().backward()
    assert_close(ours(g, x, edge_weight=w), theirs(g, x, edge_weight=w))
    assert_close(xo.grad, xt.grad)
    assert_close(wo.grad, wt.grad)
    assert {k.removesuffix("_backward") for k in dgl_accel.stats()} == {"u_mul_e_sum"}  # (backward recorded too)


def test_single_relation_heterograph_is_accelerated(path):
    g = dgl.heterograph({("a", "r", "a"): ([0, 1, 2], [1, 2, 0])})  # one etype: accelerated
    ours, theirs = _pair(3, 2, "both")
    x = torch.randn(3, 3)
    assert_close(ours(g, x), theirs(g, x))
    assert set(dgl_accel.stats()) == {"copy_u_sum"}
