"""gspmm on both paths (native, and the grouped Triton kernels under the interpreter) against the
pure-torch reference and DGL, forward and backward, on the harness's graph strategies."""
import sys

import dgl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.functional import copy_u_sum, gspmm
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.reference import ref_gspmm
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
NORMS = ("none", "both", "left", "right")


def _degree_scale(deg, norm_kind, dtype):
    deg = deg.to(dtype).clamp(min=1)
    return deg.pow(-0.5) if norm_kind == "both" else 1.0 / deg


def reference(g, op, reduce, norm, x, w=None):
    """Independent reference: scale sources, aggregate with ref_gspmm, scale destinations."""
    if norm in ("left", "both"):
        x = x * _degree_scale(g.out_degrees(), norm, x.dtype).reshape(-1, *([1] * (x.dim() - 1)))
    out = ref_gspmm(g, op, reduce, x, w)
    if norm in ("right", "both"):
        out = out * _degree_scale(g.in_degrees(), norm, out.dtype).reshape(-1, *([1] * (out.dim() - 1)))
    return out


def _weights(draw, g, x, op):
    if op == "copy_u":
        return None
    return draw(gst.edge_weights(g.num_edges(), per_feature_dim=x.shape[1], dtypes=(x.dtype,)))


@st.composite
def cases(draw, graph_strategy=None, dim=st.integers(1, 24), dtypes=DTYPES):
    if graph_strategy is None:
        graph_strategy = st.one_of(gst.graphs(), gst.blocks())
    g, x = draw(gst.graph_and_features(graph_strategy=graph_strategy, dim=dim, dtypes=dtypes))
    op = draw(st.sampled_from(["copy_u", "u_mul_e"]))
    return g, x, op, _weights(draw, g, x, op), draw(st.sampled_from(["sum", "mean"])), draw(st.sampled_from(NORMS))


@pytest.mark.interpreter
@given(case=cases(), deterministic=st.booleans(), gs=st.one_of(st.none(), st.integers(1, 9)))
def test_forward_matches_reference(case, deterministic, gs):
    g, x, op, w, reduce, norm = case
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out = gspmm(g, op, reduce, x, w, norm=norm, deterministic=deterministic, group_size=gs)
        assert out.shape == (g.num_dst_nodes(), x.shape[1]) and out.dtype == x.dtype
        assert_matches_reference(out, lambda g_, x_, w_: reference(g_, op, reduce, norm, x_, w_), g, x, w,
                                 msg=f"{name} {op} {reduce} {norm}")


@pytest.mark.interpreter
@given(gf=gst.graph_and_features(graph_strategy=st.one_of(gst.graphs(), gst.blocks())),
       op=st.sampled_from(["copy_u", "u_mul_e"]), reduce=st.sampled_from(["sum", "mean"]))
def test_forward_matches_dgl_gspmm(gf, op, reduce):
    g, x = gf
    w = torch.rand(g.num_edges(), 1) if op == "u_mul_e" else None
    expected = dgl.ops.gspmm(g, "copy_lhs" if op == "copy_u" else "mul", reduce, x, w)
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            assert_close(gspmm(g, op, reduce, x, w), expected, msg=f"{name} vs dgl")


# The property needs rows longer than any Triton block: hubs of more than 1,024 in- and out-edges on ~2k
# rows, over 2 s on 2 cores under the interpreter (the slow case).  The quick case runs the same code on
# hubs of 41 to 60 edges over 40 to 60 nodes.
HUB_GRAPHS = quick_first([(40, dict(min_nodes=40, max_nodes=60, max_background_edges=60, hub_degree=(41, 60))),
                          (1024, {})])


@pytest.mark.interpreter
@pytest.mark.parametrize("hub, graph", HUB_GRAPHS, ids=["small-hubs", "hubs-above-1024"])
@settings(max_examples=3)  # ~2k rows with >1024-neighbour hubs: slow under the interpreter
@given(deterministic=st.booleans(), norm=st.sampled_from(NORMS), data=st.data())
def test_hubs_above_1024(hub, graph, deterministic, norm, data):
    g, x = data.draw(gst.graph_and_features(graph_strategy=gst.power_law_graphs(**graph), dim=st.integers(1, 8)),
                     label="gf")
    assert int(g.in_degrees().max()) > hub and int(g.out_degrees().max()) > hub
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out = gspmm(g, "copy_u", "sum", x, norm=norm, deterministic=deterministic)
        assert_matches_reference(out, lambda g_, x_: reference(g_, "copy_u", "sum", norm, x_), g, x, msg=name)
        xx = x.clone().requires_grad_()
        with dgl_accel.use_backend(name):
            (grad,) = torch.autograd.grad(gspmm(g, "copy_u", "sum", xx, norm=norm).sum(), xx)
        xr = x.clone().requires_grad_()
        (expected,) = torch.autograd.grad(reference(g, "copy_u", "sum", norm, xr).sum(), xr)
        assert_close(grad, expected, msg=f"{name} grad")


@pytest.mark.interpreter
@given(case=cases(graph_strategy=st.one_of(gst.graphs(max_nodes=30, max_edges=90),
                                           gst.blocks(max_dst=12, max_edges=90)),
                  dim=st.integers(1, 6), dtypes=(torch.float32,)),
       deterministic=st.booleans())
def test_backward_matches_reference_autograd(case, deterministic):
    g, x, op, w, reduce, norm = case
    grad_out = torch.randn(g.num_dst_nodes(), x.shape[1])
    leaves_ref = [x.clone().requires_grad_()] + ([w.clone().requires_grad_()] if w is not None else [])
    expected = torch.autograd.grad(reference(g, op, reduce, norm, *leaves_ref), leaves_ref, grad_out)
    for name in ("native", "triton"):
        leaves = [x.clone().requires_grad_()] + ([w.clone().requires_grad_()] if w is not None else [])
        with dgl_accel.use_backend(name):
            out = gspmm(g, op, reduce, leaves[0], leaves[1] if w is not None else None, norm=norm,
                        deterministic=deterministic)
            got = torch.autograd.grad(out, leaves, grad_out)
        for k, (a, b) in enumerate(zip(got, expected)):
            assert a.shape == b.shape
            assert_close(a, b, msg=f"{name} grad[{k}] {op} {reduce} {norm}")


@pytest.mark.parametrize("op, wshape", [("copy_u", None), ("u_mul_e", (9,)), ("u_mul_e", (9, 3))])
@pytest.mark.parametrize("norm, reduce", [("none", "sum"), ("both", "sum"), ("left", "mean"), ("right", "mean")])
def test_gradcheck_fp64_on_directed_graph(path, op, wshape, norm, reduce):
    # Not symmetric, with a self loop, a multi-edge and an isolated node.
    g = dgl.graph(([0, 0, 1, 2, 3, 3, 4, 4, 1], [1, 2, 2, 0, 0, 3, 2, 2, 3]), num_nodes=6)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    inputs = (x,) if wshape is None else (x, torch.rand(wshape, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(lambda *t: gspmm(g, op, reduce, *t, norm=norm, group_size=2), inputs)


@pytest.mark.interpreter
# 400 nodes, 6,000 edges: over 2 s on 2 cores under the interpreter (the slow case); 60 nodes and 900 edges
# (the same fifteen per node) run the same code quickly
@pytest.mark.parametrize("n, m", quick_first([(60, 900), (400, 6000)]))
def test_deterministic_mode_is_bit_identical_across_runs(n, m):
    g = dgl.rand_graph(n, m)
    x = torch.randn(n, 20)
    with dgl_accel.use_backend("triton"):
        runs = [gspmm(g, "copy_u", "sum", x, norm="both", deterministic=True, group_size=3) for _ in range(3)]
        atomic = gspmm(g, "copy_u", "sum", x, norm="both", deterministic=False, group_size=3)
    assert all(torch.equal(runs[0], r) for r in runs[1:])
    assert_close(atomic, runs[0])


@pytest.mark.interpreter
def test_torch_deterministic_flag_selects_the_two_phase_combine(monkeypatch):
    seen = []
    mod = sys.modules["dgl_accel.core.aggregation.plan"]  # where the op calls its launcher

    original = mod.gspmm_forward
    monkeypatch.setattr(mod, "gspmm_forward", lambda *a: seen.append(a[-1]) or original(*a))
    g, x = dgl.rand_graph(20, 60), torch.randn(20, 4)
    with dgl_accel.use_backend("triton"):
        gspmm(g, "copy_u", "sum", x)
        torch.use_deterministic_algorithms(True)
        try:
            gspmm(g, "copy_u", "sum", x)
        finally:
            torch.use_deterministic_algorithms(False)
    assert seen == [False, True]


@given(gf=gst.graph_and_features(graph_strategy=gst.graphs(max_nodes=30, max_edges=90), dim=st.integers(1, 5)),
       reduce=st.sampled_from(["max", "min"]))
def test_max_min_run_on_the_extrema_op(gf, reduce):
    g, x = gf
    dgl_accel.reset_stats()
    out = gspmm(g, "copy_u", reduce, x)
    assert_close(out, ref_gspmm(g, "copy_u", reduce, x))  # 0 in rows without in-edges, as update_all
    assert list(dgl_accel.stats()[f"copy_u_{reduce}"]) == ["native-cpu"]


def test_trailing_dims_and_graph_unchanged(path):
    g = dgl.rand_graph(30, 100)
    g.ndata["h"] = torch.randn(30, 2, 3)
    w = torch.rand(100, 2, 3)
    src, dst = (t.clone() for t in g.edges())
    out = gspmm(g, "u_mul_e", "sum", g.ndata["h"], w)
    assert out.shape == (30, 2, 3)
    assert_close(out, dgl.ops.u_mul_e_sum(g, g.ndata["h"], w))
    assert_close(copy_u_sum(g, g.ndata["h"]), dgl.ops.copy_u_sum(g, g.ndata["h"]))
    assert torch.equal(g.edges()[0], src) and torch.equal(g.edges()[1], dst)
    assert set(g.ndata.keys()) == {"h"} and set(g.edata.keys()) == set()


@pytest.mark.parametrize("call, match", [
    (lambda g: gspmm(g, "copy_u", "sum", torch.ones(7, 2)), r"expected ufeat with 10 rows, one per source node \(got 7\)"),
    (lambda g: gspmm(g, "copy_u", "sum", torch.ones(10, 2, dtype=torch.int64)), r"expected floating-point ufeat .*\(got torch.int64\)"),
    (lambda g: gspmm(g, "copy_u", "sum", [1.0]), r"expected ufeat to be a tensor"),
    (lambda g: gspmm(g, "u_add_v", "sum", torch.ones(10, 2)), r"expected op to be one of copy_u, u_mul_e \(got 'u_add_v'\)"),
    (lambda g: gspmm(g, "copy_u", "prod", torch.ones(10, 2)), r"expected reduce to be one of .* \(got 'prod'\)"),
    (lambda g: gspmm(g, "copy_u", "sum", torch.ones(10, 2), norm="sym"), r"expected norm to be one of .* \(got 'sym'\)"),
    (lambda g: gspmm(g, "u_mul_e", "sum", torch.ones(10, 2)), r"expected efeat for op='u_mul_e' \(got None\)"),
    (lambda g: gspmm(g, "copy_u", "sum", torch.ones(10, 2), torch.ones(20)), r"expected efeat to be None"),
    (lambda g: gspmm(g, "u_mul_e", "sum", torch.ones(10, 2), torch.ones(19)), r"expected efeat of shape .* \(got \[19\]\)"),
    (lambda g: gspmm(g, "u_mul_e", "sum", torch.ones(10, 2), torch.ones(20, 3)), r"expected efeat of shape .* \(got \[20, 3\]\)"),
    (lambda g: gspmm(g, "copy_u", "max", torch.ones(10, 2), norm="both"), r"expected norm='none' with reduce='max'"),
    (lambda g: gspmm(g, "copy_u", "sum", torch.ones(10, 2), group_size=0), r"expected group_size to be None or an int >= 1 \(got 0\)"),
    (lambda g: gspmm(g, "copy_u", "sum", torch.ones(10, 2, device="meta")), r"expected graph and features on one device"),
    (lambda g: gspmm("graph", "copy_u", "sum", torch.ones(10, 2)), r"expected a dgl.DGLGraph or block \(got str\)"),
    (lambda g: gspmm(dgl.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])}), "copy_u", "sum",
                     torch.ones(1, 2)), r"expected a homogeneous graph or block with one edge type"),
])
def test_bad_input_is_rejected_before_any_kernel(call, match, path):
    g = dgl.rand_graph(10, 20)
    with pytest.raises(ValueError, match=match):
        call(g)
    assert dgl_accel.stats() == {}  # nothing was launched or counted


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the group-size autotuner times kernels on a CUDA device")
def test_autotuner_times_candidates_on_cuda():
    from dgl_accel.grouping import choose_group_size, clear_autotune_cache

    clear_autotune_cache()
    g = dgl.rand_graph(5000, 80000).to("cuda")
    choice = choose_group_size(g, 64, torch.float32)
    assert choice.tuned_gs is not None and choice.gs == choice.tuned_gs


# ------------------------------------------------------------------ the DGL-free core entry
from dgl_accel.core.aggregation.function import aggregate  # noqa: E402
from dgl_accel.core.aggregation.views import TensorGraph  # noqa: E402


@pytest.mark.parametrize("op", ["copy_u", "u_mul_e"])
@pytest.mark.parametrize("reduce,norm", [("sum", "none"), ("sum", "both"), ("mean", "none"), ("sum", "left"),
                                         ("sum", "right")])
def test_tensor_graph_matches_the_dgl_graph(path, op, reduce, norm):
    """The core on plain tensors (its own native kernels: compiled loops / torch) gives DGL's
    graph's results, forward and both gradients, on both paths."""
    gen = torch.Generator().manual_seed(7)
    n, e = 60, 400
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    g = dgl.graph((src, dst), num_nodes=n)
    x = torch.randn(n, 5, generator=gen, requires_grad=True)
    w = torch.rand(e, generator=gen, requires_grad=True) if op == "u_mul_e" else None
    want = gspmm(g, op, reduce, x, w, norm=norm)
    want_grads = torch.autograd.grad(want.square().sum(), [t for t in (x, w) if t is not None])
    got = aggregate(TensorGraph(src, dst, num_nodes=n), op, reduce, x, w, norm=norm)
    got_grads = torch.autograd.grad(got.square().sum(), [t for t in (x, w) if t is not None])
    assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        assert_close(a, b)
