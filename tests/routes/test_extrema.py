"""max/min message passing under ``dgl_accel.enable()`` (issue 18) equals DGL: ``dgl.ops`` (copy_u,
u_mul_e, u_add_e, u_sub_e, u_div_e, copy_e with max and min), ``update_all(fn.copy_u, fn.max)``,
``dgl.nn.SAGEConv(..., "pool")`` and ``dgl.nn.GINConv(aggregator_type="max")``, outputs and
gradients, on hypothesis graphs (empty rows, self-loops, multi-edges, int32/int64) and blocks, on
both paths, with our extrema op in ``stats()``.

DGL's own raw gspmm leaves -inf (max) / +inf (min) in rows without in-edges, and so does the routed
one; its backward sends those rows' gradient to node/edge 0 (its default arg), ours drops it:
``dgl.ops`` gradients are compared with a zero output gradient there (``update_all`` zeroes it
itself).  Ties: DGL's CPU kernel picks its own tied entry, so with ties only the weaker property
is checked: gradient sums agree and every gradient lands on a tied entry."""
import copy

import dgl
import dgl.function as fn
import dgl.nn
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
import dgl_accel.nn
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.marks import PATHS
from dgl_accel.testing.tolerances import assert_close

PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
GRAPHS = st.one_of(gst.graphs(max_nodes=24, max_edges=80), gst.blocks(max_dst=12, max_edges=80))
# name -> (call, what the edge operand is); the routed op in stats()
OPS = {
    "copy_u": (lambda g, x, w, r: getattr(dgl.ops, f"copy_u_{r}")(g, x), None, "copy_u"),
    "u_mul_e": (lambda g, x, w, r: getattr(dgl.ops, f"u_mul_e_{r}")(g, x, w), "any", "u_mul_e"),
    "u_div_e": (lambda g, x, w, r: getattr(dgl.ops, f"u_div_e_{r}")(g, x, w), "any", "u_mul_e"),
    "u_add_e": (lambda g, x, w, r: getattr(dgl.ops, f"u_add_e_{r}")(g, x, w), "any", "u_add_e"),
    "u_sub_e": (lambda g, x, w, r: getattr(dgl.ops, f"u_sub_e_{r}")(g, x, w), "any", "u_add_e"),
    "copy_e": (lambda g, x, w, r: getattr(dgl.ops, f"copy_e_{r}")(g, w), "feat", "copy_e"),
}


def _inputs(g, name, w_shape, dim, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_src_nodes(), dim, generator=gen, dtype=dtype)
    kind = OPS[name][1]
    if kind is None:
        return x, None
    shape = (g.num_edges(), dim) if kind == "feat" else \
        {"E": (g.num_edges(),), "E1": (g.num_edges(), 1), "EF": (g.num_edges(), dim)}[w_shape]
    w = torch.rand(shape, generator=gen, dtype=dtype) + 0.5  # away from 0 for u_div_e
    return x, w


def _grads(run, g, x, w, reduce, grad_fn):
    x, w = x.clone().requires_grad_(), None if w is None else w.clone().requires_grad_()
    out = run(g, x, w, reduce)
    out.backward(grad_fn(out))
    return out.detach(), x.grad, None if w is None else w.grad


@pytest.mark.interpreter
@settings(max_examples=20)
@given(g=GRAPHS, name=st.sampled_from(list(OPS)), reduce=st.sampled_from(["max", "min"]),
       w_shape=st.sampled_from(["E", "E1", "EF"]), dim=st.integers(1, 6),
       dtype=st.sampled_from([torch.float32, torch.float64]), path=st.sampled_from(["native", "triton"]),
       seed=st.integers(0, 2**31 - 1))
def test_dgl_ops_max_min_equal_dgl(g, name, reduce, w_shape, dim, dtype, path, seed):
    run, _, routed = OPS[name]
    x, w = _inputs(g, name, w_shape, dim, dtype, seed)
    empty = (g.in_degrees() == 0)[:, None]

    def grad_fn(out):  # a weight per output, 0 on empty rows (see the module docstring)
        weights = torch.linspace(-1, 2, out.numel(), dtype=out.dtype).reshape(out.shape)
        return torch.where(empty, torch.zeros((), dtype=out.dtype), weights)

    if g.num_edges():
        expected = _grads(run, g, x, w, reduce, grad_fn)
    else:  # DGL's backward fails without edges (it gathers its default arg 0 from an empty tensor)
        with torch.no_grad():
            expected = (run(g, x, w, reduce), None if name == "copy_e" else torch.zeros_like(x),
                        None if w is None else torch.zeros_like(w))
    dgl_accel.reset_stats()
    with dgl_accel.use_backend(path), dgl_accel.enabled():
        got = _grads(run, g, x, w, reduce, grad_fn)
    # the result is one of the messages; -inf/+inf in empty rows (0 if the graph has no edge at all)
    assert torch.equal(got[0], expected[0])
    for k, (a, b) in enumerate(zip(got[1:], expected[1:])):
        if b is not None:
            assert_close(a, b, msg=f"gradient {k}")
    assert dgl_accel.stats()[f"{routed}_{reduce}"] == {PATH_LABEL[path]: 1}
    assert not any(label.startswith("fallthrough") for d in dgl_accel.stats().values() for label in d)


@pytest.mark.interpreter
@settings(max_examples=15)
@given(g=GRAPHS, edge_weight=st.booleans(), reduce=st.sampled_from(["max", "min"]),
       path=st.sampled_from(["native", "triton"]), seed=st.integers(0, 2**31 - 1))
def test_update_all_max_min_equal_dgl(g, edge_weight, reduce, path, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_src_nodes(), 3, generator=gen)
    w = torch.rand(g.num_edges(), 1, generator=gen)
    message = fn.u_mul_e("x", "w", "m") if edge_weight else fn.copy_u("x", "m")

    def run():
        xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
        with g.local_scope():
            g.srcdata["x"], g.edata["w"] = xx, ww
            g.update_all(message, getattr(fn, reduce)("m", "h"))
            out = g.dstdata["h"]
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))  # nonzero on empty rows too
        return out.detach(), xx.grad, ww.grad

    expected = run()
    dgl_accel.reset_stats()
    with dgl_accel.use_backend(path), dgl_accel.enabled():
        got = run()
    assert torch.equal(got[0], expected[0])  # update_all's 0 in rows without in-edges
    assert_close(got[1], expected[1])
    assert_close(got[2] if edge_weight else torch.zeros(()), expected[2] if edge_weight else torch.zeros(()))
    assert list(dgl_accel.stats()[f"{'u_mul_e' if edge_weight else 'copy_u'}_{reduce}"]) == [PATH_LABEL[path]]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_ties_weaker_property(path, reduce):
    # integer features: many ties; DGL's kernel and ours may pick different tied sources
    torch.manual_seed(1)
    g = dgl.rand_graph(30, 150)
    x = torch.randint(-2, 3, (30, 4)).float()
    expected = _grads(OPS["copy_u"][0], g, x, None, reduce, lambda out: torch.ones_like(out))
    with dgl_accel.use_backend(path), dgl_accel.enabled():
        got = _grads(OPS["copy_u"][0], g, x, None, reduce, lambda out: torch.ones_like(out))
    assert torch.equal(got[0], expected[0])
    nonempty = int((g.in_degrees() > 0).sum())
    assert got[1].sum(0).tolist() == [float(nonempty)] * 4  # every non-empty row passes its gradient on once
    src, dst = (t.long() for t in g.edges())
    # tied[u, f]: x[u, f] is the result of some destination v that u sends to
    tied = torch.zeros(30, 4, dtype=torch.int64).index_add_(0, src, (x[src] == got[0][dst]).long()) > 0
    assert bool((got[1][~tied] == 0).all()) and bool((got[1] >= 0).all())


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", ["sage_pool", "gin_max", "gin_max_weighted"])
@pytest.mark.parametrize("block", [False, True])
def test_sage_pool_and_gin_max_equal_dgl(path, kind, block):
    torch.manual_seed(0)
    g = dgl.rand_graph(40, 120)  # some nodes without in-edges
    if block:  # the first 25 nodes' in-edges as a block (sources keep all 40 ids, the first 25 are the dst)
        src, dst = g.edges()
        keep = dst < 25
        g = dgl.create_block((src[keep], dst[keep]), num_src_nodes=40, num_dst_nodes=25)
    conv = dgl.nn.SAGEConv(5, 4, "pool") if kind == "sage_pool" else \
        dgl.nn.GINConv(torch.nn.Linear(5, 4), aggregator_type="max")
    x = torch.randn(g.num_src_nodes(), 5)
    ew = torch.rand(g.num_edges()) if kind == "gin_max_weighted" else None

    def run():
        conv.zero_grad()
        xx = x.clone().requires_grad_()
        out = conv(g, (xx, xx[:g.num_dst_nodes()]) if block else xx, edge_weight=ew)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
        return out.detach(), xx.grad, {k: p.grad.clone() for k, p in conv.named_parameters()}

    expected = run()
    dgl_accel.reset_stats()
    with dgl_accel.use_backend(path), dgl_accel.enabled():
        got = run()
    assert_close(got[0], expected[0])
    assert_close(got[1], expected[1])
    for k in expected[2]:
        assert_close(got[2][k], expected[2][k], msg=k)
    op = "u_mul_e_max" if kind == "gin_max_weighted" else "copy_u_max"
    assert dgl_accel.stats()[op] == {PATH_LABEL[path]: 1}
    assert not any(label.startswith("fallthrough") for d in dgl_accel.stats().values() for label in d)


def test_drop_in_sageconv_pool_and_ginconv_max_run_ours(path):
    torch.manual_seed(0)
    g = dgl.add_self_loop(dgl.rand_graph(30, 90))
    x = torch.randn(30, 6)
    for theirs in (dgl.nn.SAGEConv(6, 3, "pool"), dgl.nn.GINConv(None, aggregator_type="max")):
        ours = copy.deepcopy(theirs)
        dgl_accel.nn.swap(ours)
        dgl_accel.reset_stats()
        assert_close(ours(g, x), theirs(g, x))
        assert dgl_accel.stats()["copy_u_max"] == {PATH_LABEL[path]: 1}


@pytest.mark.parametrize("kind", ["sage_pool", "gin_max"])
def test_compiled_cpu_path_equals_dgl_on_a_larger_graph(kind):
    # 30,000 edges: above jit.runtime.MIN_WORK, so the native path runs the compiled loops (with numba)
    torch.manual_seed(0)
    g = dgl.rand_graph(3000, 30000)
    x = torch.randn(3000, 12)
    conv = dgl.nn.SAGEConv(12, 7, "pool") if kind == "sage_pool" else \
        dgl.nn.GINConv(torch.nn.Linear(12, 7), aggregator_type="max")

    def run():
        conv.zero_grad()
        xx = x.clone().requires_grad_()
        out = conv(g, xx)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
        return out.detach(), xx.grad, {k: p.grad.clone() for k, p in conv.named_parameters()}

    expected = run()
    with dgl_accel.use_backend("native"), dgl_accel.enabled():
        got = run()
    assert_close(got[0], expected[0])
    assert_close(got[1], expected[1])
    for k in expected[2]:
        assert_close(got[2][k], expected[2][k], msg=k)
    assert dgl_accel.stats() == {"copy_u_max": {"native-cpu": 1}, "copy_u_max_backward": {"native-cpu": 1}}
