"""Under dgl_accel.enable(), DGL's own rejections stay rejections (same exception type, a clearer
message) and every accepted call returns DGL's result shape: code written while enabled keeps
working when it is turned off (issue 14, item 4)."""
import dgl
import dgl.function as fn
import dgl.ops
import pytest
import torch

import dgl_accel
from dgl_accel.dgl_rules import DGLRuleError
from dgl_accel.testing.tolerances import assert_close

N, E = 6, 9
SRC, DST = torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 4]), torch.tensor([1, 2, 3, 4, 5, 0, 3, 5, 1])
f16, f64, i64 = torch.float16, torch.float64, torch.int64

# name: (node features, edge weights)
CASES = {
    "f32 x, f64 w": ((N, 3), (E, 1), None, f64),
    "f32 x, f16 w": ((N, 3), (E, 1), None, f16),
    "f64 x, f32 w": ((N, 3), (E, 1), f64, None),
    "f16 x, f16 w (DGL: no fp16 on CPU)": ((N, 3), (E, 1), f16, f16),
    "bf16 x, bf16 w": ((N, 3), (E, 1), torch.bfloat16, torch.bfloat16),
    "f64 x, f64 w": ((N, 3), (E, 1), f64, f64),
    "int x, f32 w": ((N, 3), (E, 1), i64, None),
    "int x, int w": ((N, 3), (E, 1), i64, i64),
    "int32 x, int32 w": ((N, 3), (E, 1), torch.int32, torch.int32),
    "f32 x, int w": ((N, 3), (E, 1), None, i64),
    "f32 x, bool w": ((N, 3), (E, 1), None, torch.bool),
    "w [E]": ((N, 3), (E,), None, None),
    "w [E, 1]": ((N, 3), (E, 1), None, None),
    "w [E, 1, 1]": ((N, 3), (E, 1, 1), None, None),
    "w [E, F]": ((N, 3), (E, 3), None, None),
    "w [E, 1, F]": ((N, 3), (E, 1, 3), None, None),
    "w [E + 1, 1]": ((N, 3), (E + 1, 1), None, None),
    "w [E - 1]": ((N, 3), (E - 1,), None, None),
    "w [E, 2] with F = 3": ((N, 3), (E, 2), None, None),
    "x [N, H, F], w [E, H, 1]": ((N, 2, 3), (E, 2, 1), None, None),
    "x [N, H, F], w [E, 1, 1]": ((N, 2, 3), (E, 1, 1), None, None),
    "x [N, H, F], w [E, H]": ((N, 2, 3), (E, 2), None, None),
    "x [N, H, F], w [E, 1, F]": ((N, 2, 3), (E, 1, 3), None, None),
    "x [N, H, F], w [E, H, F]": ((N, 2, 3), (E, 2, 3), None, None),
    "x [N, 1, F], w [E, H, 1]": ((N, 1, 3), (E, 2, 1), None, None),
    "x [N], w [E]": ((N,), (E,), None, None),
    "x [N], w [E, 1]": ((N,), (E, 1), None, None),
    "x [N + 1, F]": ((N + 1, 3), (E, 1), None, None),
    "x [N - 1, F]": ((N - 1, 3), (E, 1), None, None),
}


def _tensor(shape, dtype):
    dtype = dtype or torch.float32
    t = torch.rand(shape) + 0.5  # positive: u_div_e stays finite
    return t > 0.6 if dtype == torch.bool else t.to(dtype)


def _update_all(g, x, w):
    with g.local_scope():
        g.srcdata["x"], g.edata["w"] = x, w
        g.update_all(fn.u_mul_e("x", "w", "m"), fn.sum("m", "h"))
        return g.dstdata["h"]


CALLS = {
    "update_all u_mul_e/sum": _update_all,
    "dgl.ops.gspmm mul/sum": lambda g, x, w: dgl.ops.gspmm(g, "mul", "sum", x, w),
    "dgl.ops.gspmm div/mean": lambda g, x, w: dgl.ops.gspmm(g, "div", "mean", x, w),
    "dgl.ops.u_mul_e_sum": lambda g, x, w: dgl.ops.u_mul_e_sum(g, x, w),
    "dgl.ops.u_div_e_sum": lambda g, x, w: dgl.ops.u_div_e_sum(g, x, w),
    "dgl.ops.u_mul_e_max": lambda g, x, w: dgl.ops.u_mul_e_max(g, x, w),
    "dgl.ops.copy_u_sum": lambda g, x, w: dgl.ops.copy_u_sum(g, x),
    "dgl.ops.copy_u_mean": lambda g, x, w: dgl.ops.copy_u_mean(g, x),
}


def _outcome(call, g, x, w):
    try:
        return call(g, x, w)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return e


@pytest.fixture(autouse=True)
def _always_restore():
    yield
    dgl_accel.disable()


def _check_same_as_dgl(call, g, x, w):
    dgl_accel.disable()
    expected = _outcome(call, g, x, w)
    dgl_accel.enable()
    got = _outcome(call, g, x, w)
    dgl_accel.disable()
    if isinstance(expected, Exception):
        assert isinstance(got, type(expected)), f"DGL raised {type(expected).__name__}: {expected}; we gave {got!r}"
        if isinstance(got, DGLRuleError):
            assert "expected" in str(got) and "Fix:" in str(got)
            assert isinstance(got, ValueError)  # also the type dgl-accel raises for bad input
    else:
        assert isinstance(got, torch.Tensor), f"DGL accepted it (shape {tuple(expected.shape)}); we raised {got!r}"
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert_close(got, expected)  # the tolerance of the dtype
    return expected, got


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_same_exception_type_or_same_shape_as_dgl(call, case):
    xs, ws, xd, wd = CASES[case]
    torch.manual_seed(0)
    g = dgl.graph((SRC, DST), num_nodes=N)
    _check_same_as_dgl(CALLS[call], g, _tensor(xs, xd), _tensor(ws, wd))


@pytest.mark.parametrize("case", ["w [E, 1, 1]", "x [N + 1, F]", "w [E - 1]", "f32 x, f64 w", "w [E, F]"])
def test_blocks_follow_the_same_rules(case):
    xs, ws, xd, wd = CASES[case]
    dst = torch.tensor([1, 3, 5])
    block = dgl.to_block(dgl.in_subgraph(dgl.graph((SRC, DST), num_nodes=N), dst), dst_nodes=dst)
    n_src, n_edges = block.num_src_nodes(), block.num_edges()
    x = _tensor((n_src + xs[0] - N,) + xs[1:], xd)
    w = _tensor((n_edges + ws[0] - E,) + ws[1:], wd)
    for call in (CALLS["update_all u_mul_e/sum"], CALLS["dgl.ops.u_mul_e_sum"]):
        _check_same_as_dgl(call, block, x, w)


@pytest.mark.parametrize("case, pattern", [
    ("f32 x, f64 w", r"one dtype.*node features torch.float32, edge features torch.float64.*Fix: .*to\(x.dtype\)"),
    ("w [E + 1, 1]", rf"edge features with {E} rows, one per edge.*\(got {E + 1}\). Fix"),
    ("x [N - 1, F]", rf"node features with {N} rows, one per source node.*\(got {N - 1}\). Fix"),
    ("w [E, 2] with F = 3", r"shapes that broadcast.*\[\*, 3\].*\[E, 2\].*Fix: .*\[E, H, 1\]"),
    ("f16 x, f16 w (DGL: no fp16 on CPU)", r"bfloat16, float32 or float64 features on cpu.*torch.float16.*Fix"),
])
def test_rejections_say_what_was_expected_what_came_and_how_to_fix(case, pattern):
    xs, ws, xd, wd = CASES[case]
    g = dgl.graph((SRC, DST), num_nodes=N)
    with dgl_accel.enabled(), pytest.raises(dgl.DGLError, match=pattern):
        dgl.ops.u_mul_e_sum(g, _tensor(xs, xd), _tensor(ws, wd))
    assert dgl_accel.stats() == {} or "u_mul_e_sum" not in dgl_accel.stats()  # rejected before anything ran


def test_gat_shapes_run_and_match_dgl():
    """[E, 1, 1] weights on [N, F] features give DGL's [N, 1, F]; [E, H, 1] on [N, H, F] stays [N, H, F]."""
    g = dgl.graph((SRC, DST), num_nodes=N)
    x, w = torch.randn(N, 4), torch.rand(E, 1, 1)
    ref = dgl.ops.u_mul_e_sum(g, x, w)
    dgl_accel.reset_stats()
    with dgl_accel.enabled():
        got = dgl.ops.u_mul_e_sum(g, x, w)
    assert got.shape == ref.shape == (N, 1, 4)
    assert_close(got, ref)
    assert not any(k.startswith("fallthrough") for k in dgl_accel.stats()["u_mul_e_sum"])  # ours ran


@pytest.mark.skipif(not torch.cuda.is_available(), reason="devices differ only with a GPU")
@pytest.mark.parametrize("where", ["x", "w", "graph"])
def test_devices_differ_as_dgl(where):
    g = dgl.graph((SRC, DST), num_nodes=N)
    x, w = torch.randn(N, 3), torch.rand(E, 1)
    if where == "x":
        x = x.cuda()
    elif where == "w":
        w = w.cuda()
    else:
        g = g.to("cuda")
    for call in (CALLS["update_all u_mul_e/sum"], CALLS["dgl.ops.u_mul_e_sum"], CALLS["dgl.ops.copy_u_sum"]):
        _check_same_as_dgl(call, g, x, w)
