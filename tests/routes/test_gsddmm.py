"""``gsddmm`` routed under ``dgl_accel.enable()`` (``dgl_accel/routes/gsddmm.py``): ``dgl.ops.gsddmm``
for every op and target pair, ``g.apply_edges`` with DGL's built-in message functions, and the
``dgl.nn`` modules built on them (DotGatConv, EdgeConv, GATv2Conv, GATConv) equal plain DGL's
outputs and gradients on hypothesis graphs and blocks, on both paths; ``stats()`` shows our path;
what DGL must judge falls through with DGL's own errors; ``disable()`` restores DGL's functions."""
import sys

import dgl
import dgl.function as fn
import dgl.nn
import dgl.ops
import dgl.ops.sddmm
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel import functional
from dgl_accel.routes import gsddmm as route
from dgl_accel.testing import strategies as gst
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.tolerances import assert_close

PATHS = ("native", "triton")
PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
PAIRS = (("u", "v"), ("v", "u"), ("u", "e"), ("e", "u"), ("v", "e"), ("e", "v"))
SHAPES = (((4,), (4,)), ((2, 1), (2, 3)), ((2, 3), (1, 3)), ((2, 3), (3,)), ((), ()))
DOT_SHAPES = (((4,), (4,)), ((2, 3), (2, 3)), ((2, 3), (1, 3)), ((2, 3), (3,)), ((), ()))  # equal last dims
GRAPHS = st.one_of(gst.graphs(max_nodes=16, max_edges=40), gst.blocks(max_dst=8, max_edges=40))


@pytest.fixture(autouse=True)
def _restore():
    yield
    dgl_accel.disable()


def rows(g, target):
    return {"u": g.num_src_nodes(), "v": g.num_dst_nodes(), "e": g.num_edges()}[target]


def operands(g, op, lshape, rshape, lt, rt, dtype, seed):
    lhs = tst.randn((rows(g, lt),) + lshape, dtype, seed)
    rhs = tst.randn((rows(g, rt),) + rshape, dtype, seed + 1)
    if op == "div":
        rhs = torch.where(rhs >= 0, rhs + 0.5, rhs - 0.5)
    return lhs, rhs


def forward_backward(call, lhs, rhs, seed=5):
    """(out, grad lhs, grad rhs) of ``call(lhs, rhs)`` for a fixed random output gradient."""
    a, b = lhs.clone().requires_grad_(), rhs.clone().requires_grad_()
    out = call(a, b)
    out.backward(tst.randn(tuple(out.shape), out.dtype, seed))
    return out.detach(), a.grad, b.grad


def assert_all_close(got, expected, msg):
    for k, (x, y) in enumerate(zip(got, expected, strict=True)):
        if y is None:
            assert x is None or not x.any(), f"{msg} [{k}]"
        else:
            assert_close(x, y, msg=f"{msg} [{k}]")


@pytest.mark.interpreter
@given(g=GRAPHS, op=st.sampled_from(OPS), pair=st.sampled_from(PAIRS), shape=st.integers(0, len(SHAPES) - 1),
       dtype=st.sampled_from((torch.float32, torch.float64)), seed=tst.SEEDS)
@settings(max_examples=20)
def test_dgl_ops_gsddmm_equals_dgl(g, op, pair, shape, dtype, seed):
    lt, rt = pair
    lshape, rshape = (DOT_SHAPES if op == "dot" else SHAPES)[shape]
    lhs, rhs = operands(g, op, lshape, rshape, lt, rt, dtype, seed)
    call = lambda a, b: dgl.ops.gsddmm(g, op, a, b, lt, rt)  # noqa: E731
    expected = forward_backward(call, lhs, rhs)
    for path in PATHS:
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(path), dgl_accel.enabled():
            got = forward_backward(call, lhs, rhs)
        assert dgl_accel.stats()[f"gsddmm_{op}"] == {PATH_LABEL[path]: 1}
        assert got[0].shape == expected[0].shape and got[0].dtype == expected[0].dtype
        assert_all_close(got, expected, f"{path} {op} {lt}{rt} {lshape} {rshape}")


MESSAGES = {  # built-in message function -> the gsddmm op it runs
    "u_add_v": (fn.u_add_v("x", "y", "m"), "add"), "v_sub_u": (fn.v_sub_u("y", "x", "m"), "sub"),
    "u_mul_e": (fn.u_mul_e("x", "w", "m"), "mul"), "e_div_v": (fn.e_div_v("w", "y", "m"), "div"),
    "u_dot_v": (fn.u_dot_v("x", "y", "m"), "dot"), "copy_u": (fn.copy_u("x", "m"), "copy_lhs"),
}


@pytest.mark.interpreter
@given(g=GRAPHS, name=st.sampled_from(sorted(MESSAGES)), seed=tst.SEEDS)
@settings(max_examples=12)
def test_apply_edges_with_builtin_messages_equals_dgl(g, name, seed):
    message, op = MESSAGES[name]

    def run(x, y, w):
        g.srcdata["x"], g.dstdata["y"], g.edata["w"] = x, y, w
        g.apply_edges(message)
        return g.edata.pop("m")

    x = tst.randn((g.num_src_nodes(), 2, 3), torch.float32, seed)
    y = tst.randn((g.num_dst_nodes(), 2, 3), torch.float32, seed + 1).abs() + 0.5
    w = tst.randn((g.num_edges(), 2, 1), torch.float32, seed + 2).abs() + 0.5
    leaves = [t.clone().requires_grad_() for t in (x, y, w)]
    out = run(*leaves)
    out.sum().backward()
    expected = [out.detach()] + [t.grad for t in leaves]
    for path in PATHS:
        dgl_accel.reset_stats()
        leaves = [t.clone().requires_grad_() for t in (x, y, w)]
        with dgl_accel.use_backend(path), dgl_accel.enabled():
            out = run(*leaves)
            out.sum().backward()
        assert dgl_accel.stats()[f"gsddmm_{op}"] == {PATH_LABEL[path]: 1}
        assert_all_close([out.detach()] + [t.grad for t in leaves], expected, f"{path} {name}")


MODULES = {
    "DotGatConv": (lambda: dgl.nn.DotGatConv(6, 4, num_heads=2), ("gsddmm_dot",)),
    # e_add_v + max is DGL's two-step message passing (its message step stays DGL's, counted once)
    "EdgeConv": (lambda: dgl.nn.EdgeConv(6, 4), ("gsddmm_sub",)),
    "EdgeConv-bn": (lambda: dgl.nn.EdgeConv(6, 4, batch_norm=True), ("gsddmm_sub", "gsddmm_add")),
    "GATv2Conv": (lambda: dgl.nn.GATv2Conv(6, 4, num_heads=2), ("gsddmm_add",)),
    "GATConv": (lambda: dgl.nn.GATConv(6, 4, num_heads=2), ("gsddmm_add",)),
}


@pytest.mark.parametrize("block", [False, True], ids=["graph", "block"])
@pytest.mark.parametrize("name", sorted(MODULES))
def test_dgl_nn_modules_equal_dgl_and_run_on_our_path(name, block, path):
    make, ops = MODULES[name]
    g = dgl.add_self_loop(dgl.rand_graph(12, 30))
    if block:
        g = dgl.to_block(dgl.in_subgraph(g, torch.arange(5)), torch.arange(5))
    x = torch.randn(g.num_src_nodes(), 6)

    def step():
        torch.manual_seed(0)
        module = make()
        leaf = x.clone().requires_grad_()
        out = module(g, leaf)  # a block: every module takes the first num_dst rows as destinations
        out.pow(2).sum().backward()
        return [out.detach(), leaf.grad] + [p.grad for p in module.parameters()]

    expected = step()
    dgl_accel.reset_stats()
    with dgl_accel.enabled():
        got = step()
    assert_all_close(got, expected, f"{name} {path}")
    stats = dgl_accel.stats()
    for op in ops:
        assert stats[op] == {PATH_LABEL[path]: 1}, stats
        assert stats[f"{op}_backward"] == {PATH_LABEL[path]: 1}, stats


def _names_holding(fn_):
    return [name for name, m in list(sys.modules.items())
            if (name == "dgl" or name.startswith("dgl.")) and getattr(m, "gsddmm", None) is fn_]


def test_enable_routes_every_dgl_name_and_disable_restores_dgls_exactly():
    original = _names_holding(route.ORIGINAL_GSDDMM)
    assert {"dgl.ops", "dgl.ops.sddmm"} <= set(original)
    dgl_accel.enable()
    assert _names_holding(route.routed_gsddmm) == original and _names_holding(route.ORIGINAL_GSDDMM) == []
    dgl_accel.enable()  # idempotent
    dgl_accel.disable()
    assert _names_holding(route.ORIGINAL_GSDDMM) == original and _names_holding(route.routed_gsddmm) == []
    with dgl_accel.enabled():
        assert dgl.ops.sddmm.gsddmm is route.routed_gsddmm
    assert dgl.ops.sddmm.gsddmm is route.ORIGINAL_GSDDMM and dgl.ops.gsddmm is route.ORIGINAL_GSDDMM


def _hetero():
    hg = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0, 1], [0, 0])})
    return hg, {"a": torch.randn(2, 3), "b": torch.randn(2, 3)}


FALLTHROUGH = {  # name: (call, stats key, reason, DGL's error type)
    "int data": (lambda g: dgl.ops.gsddmm(g, "add", torch.ones(4, 2, dtype=torch.int64),
                                          torch.ones(4, 2, dtype=torch.int64)), "gsddmm_add", "dtype", dgl.DGLError),
    "mixed dtypes": (lambda g: dgl.ops.gsddmm(g, "mul", torch.ones(4, 2), torch.ones(4, 2).double()),
                     "gsddmm_mul", "mixed dtypes", dgl.DGLError),
    "no broadcast": (lambda g: dgl.ops.gsddmm(g, "add", torch.ones(4, 2), torch.ones(4, 3)),
                     "gsddmm_add", "shape DGL judges", dgl.DGLError),
    "dot last dim": (lambda g: dgl.ops.gsddmm(g, "dot", torch.ones(4, 2), torch.ones(4, 3)),
                     "gsddmm_dot", "shape DGL judges", dgl.DGLError),
    "unknown op": (lambda g: dgl.ops.gsddmm(g, "pow", torch.ones(4, 2), torch.ones(4, 2)),
                   "gsddmm_pow", "op pow", Exception),
}


@pytest.mark.parametrize("name", sorted(FALLTHROUGH))
def test_what_dgl_judges_falls_through_with_dgls_own_error(name):
    call, key, reason, error = FALLTHROUGH[name]
    g = dgl.graph(([0, 1, 2], [1, 2, 3]))
    with pytest.raises(error) as plain:
        call(g)
    with dgl_accel.enabled(), pytest.raises(type(plain.value)):
        call(g)
    assert dgl_accel.stats() == {key: {f"fallthrough: {reason}": 1}}


def test_heterograph_falls_through_and_one_relation_runs_on_our_path():
    hg, x = _hetero()
    hg.ndata["x"] = x
    hg.apply_edges(fn.u_add_v("x", "x", "m"))  # every relation in one call: DGL's heterograph kernel
    expected = {etype: hg.edges[etype].data.pop("m") for etype in hg.etypes}
    hg.apply_edges(fn.u_add_v("x", "x", "m"), etype="r")  # one relation (a -> b): a bipartite graph
    expected_r = hg.edges["r"].data.pop("m")
    with dgl_accel.enabled():
        hg.apply_edges(fn.u_add_v("x", "x", "m"))
        assert dgl_accel.stats() == {"gsddmm_add": {"fallthrough: heterograph": 1}}
        assert all(torch.equal(hg.edges[etype].data.pop("m"), expected[etype]) for etype in hg.etypes)
        dgl_accel.reset_stats()
        hg.apply_edges(fn.u_add_v("x", "x", "m"), etype="r")
        assert dgl_accel.stats() == {"gsddmm_add": {"native-cpu": 1}}
        assert_close(hg.edges["r"].data["m"], expected_r)


def test_front_door_matches_route():
    g = dgl.graph(([0, 1, 2], [1, 2, 0]))
    x = torch.randn(3, 2, 4)
    with dgl_accel.enabled():
        routed = dgl.ops.u_dot_v(g, x, x)
    assert torch.equal(functional.gsddmm(g, "dot", x, x), routed)
    assert routed.shape == (3, 2, 1)
