"""Multi-head ``u_mul_e`` / ``u_div_e`` (edge weights broadcast against the node features, [E, H, 1] on
[N, H, D]) and ``copy_e`` with sum and mean under ``dgl_accel.enable()`` (issue 18) equal DGL's own
gspmm: ``dgl.ops`` and ``update_all`` outputs and gradients on hypothesis graphs (rows without
in-edges, self-loops, multi-edges, int32/int64) and blocks, on both paths, with our head-wise op
in ``stats()``; ``dgl.nn.GATConv`` / ``GATv2Conv`` / ``DotGatConv`` with 4 heads forward and backward
equal plain DGL; the broadcasts we leave to DGL still fall through with their reason."""
import copy

import dgl
import dgl.function as fn
import dgl.nn
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.tolerances import assert_close

PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
GRAPHS = st.one_of(gst.graphs(max_nodes=24, max_edges=80), gst.blocks(max_dst=12, max_edges=80))
# (node feature shape, edge weight shape) without the row dim: every one broadcasts the weights only
SHAPES = [((4, 3), (4, 1)), ((2, 5), (2, 1)), ((3, 4), (1, 4)), ((3, 4), (4,)), ((2, 3, 2), (2, 3, 1)),
          ((2, 3, 2), (3, 1)), ((1, 3), (1, 1, 1))]


def _grads(run, g, x, w, grad_weights=None):
    x = None if x is None else x.clone().requires_grad_()
    w = w.clone().requires_grad_()
    out = run(g, x, w)
    weights = torch.linspace(-1, 2, out.numel(), dtype=out.dtype).reshape(out.shape)
    out.backward(weights if grad_weights is None else grad_weights)
    return out.detach(), None if x is None else x.grad, w.grad


def _both(run, g, x, w, path):
    expected = _grads(run, g, x, w)
    dgl_accel.reset_stats()
    with dgl_accel.use_backend(path), dgl_accel.enabled():
        got = _grads(run, g, x, w)
    for k, (a, b) in enumerate(zip(got, expected)):
        if b is not None:
            assert a.shape == b.shape and a.dtype == b.dtype
            assert_close(a, b, msg=["out", "grad x", "grad w"][k])
    assert not any(label.startswith("fallthrough") for d in dgl_accel.stats().values() for label in d)


@pytest.mark.interpreter
@settings(max_examples=25)
@given(g=GRAPHS, shapes=st.sampled_from(SHAPES), name=st.sampled_from(["u_mul_e", "u_div_e"]),
       reduce=st.sampled_from(["sum", "mean"]), dtype=st.sampled_from([torch.float32, torch.float64]),
       path=st.sampled_from(["native", "triton"]), seed=st.integers(0, 2**31 - 1))
def test_multi_head_dgl_ops_equal_dgl(g, shapes, name, reduce, dtype, path, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((g.num_src_nodes(),) + shapes[0], generator=gen, dtype=dtype)
    w = torch.rand((g.num_edges(),) + shapes[1], generator=gen, dtype=dtype) + 0.5  # away from 0 for u_div_e

    def run(g, x, w):
        return getattr(dgl.ops, f"{name}_{reduce}")(g, x, w)

    _both(run, g, x, w, path)
    assert dgl_accel.stats()[f"u_mul_e_{reduce}"] == {PATH_LABEL[path]: 1}  # u_div_e: mul by 1 / w


@pytest.mark.interpreter
@settings(max_examples=20)
@given(g=GRAPHS, feat=st.sampled_from([(), (1,), (3,), (2, 3)]), reduce=st.sampled_from(["sum", "mean"]),
       dtype=st.sampled_from([torch.float32, torch.float64]), path=st.sampled_from(["native", "triton"]),
       seed=st.integers(0, 2**31 - 1))
def test_copy_e_equals_dgl(g, feat, reduce, dtype, path, seed):
    w = torch.randn((g.num_edges(),) + feat, generator=torch.Generator().manual_seed(seed), dtype=dtype)

    def run(g, x, w):
        return getattr(dgl.ops, f"copy_e_{reduce}")(g, w)

    _both(run, g, None, w, path)
    assert dgl_accel.stats()[f"copy_e_{reduce}"] == {PATH_LABEL[path]: 1}


@pytest.mark.interpreter
@settings(max_examples=12)
@given(g=GRAPHS, reduce=st.sampled_from(["sum", "mean"]), path=st.sampled_from(["native", "triton"]),
       seed=st.integers(0, 2**31 - 1))
def test_update_all_multi_head_and_copy_e_equal_dgl(g, reduce, path, seed):
    gen = torch.Generator().manual_seed(seed)
    ft = torch.randn(g.num_src_nodes(), 4, 3, generator=gen)
    a = torch.rand(g.num_edges(), 4, 1, generator=gen)

    def run(g, ft, a):
        with g.local_scope():
            g.srcdata["ft"], g.edata["a"] = ft, a
            g.update_all(fn.u_mul_e("ft", "a", "m"), getattr(fn, reduce)("m", "ft"))  # GAT's aggregation
            g.update_all(fn.copy_e("a", "m"), getattr(fn, reduce)("m", "e"))
            return g.dstdata["ft"] + g.dstdata["e"]

    _both(run, g, ft, a, path)
    assert dgl_accel.stats()[f"u_mul_e_{reduce}"] == {PATH_LABEL[path]: 1}
    assert dgl_accel.stats()[f"copy_e_{reduce}"] == {PATH_LABEL[path]: 1}


def _graph(block: bool):
    torch.manual_seed(0)
    g = dgl.rand_graph(40, 160)  # some nodes without in-edges
    if block:  # the first 25 nodes' in-edges as a block
        src, dst = g.edges()
        keep = dst < 25
        g = dgl.create_block((src[keep], dst[keep]), num_src_nodes=40, num_dst_nodes=25)
    return g


@pytest.mark.parametrize("layer", ["GATConv", "GATv2Conv", "DotGatConv"])
@pytest.mark.parametrize("block", [False, True])
def test_multi_head_attention_layers_equal_dgl(path, layer, block):
    g = _graph(block)
    torch.manual_seed(1)
    conv = getattr(dgl.nn, layer)(6, 5, num_heads=4, allow_zero_in_degree=True)
    x = torch.randn(g.num_src_nodes(), 6)
    twin = copy.deepcopy(conv)

    def step(module):
        xx = x.clone().requires_grad_()
        out = module(g, xx)  # on a block the layers take the first num_dst rows as destinations
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
        return out.detach(), xx.grad, [p.grad for p in module.parameters()]

    expected = step(conv)
    dgl_accel.reset_stats()
    with dgl_accel.enabled():
        got = step(twin)
    assert_close(got[0], expected[0], msg="out")
    assert_close(got[1], expected[1], msg="grad x")
    for a, b in zip(got[2], expected[2]):
        assert_close(a, b, msg="parameter grad")
    stats = dgl_accel.stats()
    assert stats["u_mul_e_sum"] == {PATH_LABEL[path]: 1}  # the heads' aggregation ran ours
    assert not any(label.startswith("fallthrough") for d in stats.values() for label in d)


@pytest.mark.parametrize("name, run, reason", [
    ("u_mul_e_sum", lambda g, x, w: dgl.ops.u_mul_e_sum(g, x.reshape(30, 4), w), "broadcast shape"),  # x broadcasts
    ("u_mul_e_max", lambda g, x, w: dgl.ops.u_mul_e_max(g, x, w), "broadcast shape"),
    ("u_div_e_mean", lambda g, x, w: dgl.ops.u_div_e_mean(g, x.reshape(30, 2, 1, 2), w.reshape(120, 1, 2, 1)),
     "broadcast shape"),  # the node features broadcast to [N, 2, 2, 2]
    ("u_add_e_sum", lambda g, x, w: dgl.ops.u_add_e_sum(g, x, w), "op add"),
])
def test_other_broadcasts_still_fall_through_with_their_reason(name, run, reason):
    g = dgl.rand_graph(30, 120)
    x, w = torch.randn(30, 2, 2), torch.rand(120, 2, 1)
    expected = run(g, x, w)
    with dgl_accel.enabled():
        got = run(g, x, w)
    assert torch.equal(got, expected)  # DGL itself ran
    assert dgl_accel.stats() == {name: {f"fallthrough: {reason}": 1}}


def test_dgls_errors_come_first():
    g = dgl.rand_graph(10, 30)
    with dgl_accel.enabled():
        with pytest.raises(dgl.DGLError, match="broadcast"):
            dgl.ops.u_mul_e_sum(g, torch.ones(10, 4, 3), torch.ones(30, 2, 1))  # 2 heads against 4
        with pytest.raises(dgl.DGLError, match="broadcast"):
            dgl.ops.u_mul_e_sum(g, torch.ones(10, 4, 3), torch.ones(30, 4))  # DGL reads [E, 4] as [E, 1, 4]
        with pytest.raises(dgl.DGLError, match="one per edge"):
            dgl.ops.copy_e_sum(g, torch.ones(29, 3))
    assert "u_mul_e_sum" not in dgl_accel.stats() and "copy_e_sum" not in dgl_accel.stats()
