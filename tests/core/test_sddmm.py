"""``gsddmm`` of the core (``dgl_accel.core.sddmm``) on plain tensors, without DGL: every op and
target pair, DGL's broadcasting and shape rules (multi-head [N, H, 1] with [N, H, D], rank padding,
1-D operands, dot), on the native path and on ``kernels/sddmm.py`` under the Triton interpreter,
against the pure-torch reference (``core/sddmm/reference.py``) with the tolerance rules; int32/int64
ids, fp32/fp64/fp16/bf16, gradients of both operands (the backward's segment-sum kernel), fp64
gradcheck and gradgradcheck, empty graphs, rows longer than a kernel chunk, and bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.jit import runtime as jit_runtime
from dgl_accel.core.sddmm.function import gsddmm
from dgl_accel.core.sddmm.reference import ref_gsddmm
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import PATHS as PATH_CASES
from dgl_accel.testing.marks import QUICK_NATIVE
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

PATHS = ("native", "triton")
PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
BINARY = ("add", "sub", "mul", "div", "dot")
OPS = BINARY + ("copy_lhs", "copy_rhs")
PAIRS = (("u", "v"), ("v", "u"), ("u", "e"), ("e", "u"), ("v", "e"), ("e", "v"), ("u", "u"))
# (lhs feature shape, rhs feature shape): same shape, multi-head broadcast both ways, rank padding,
# 1-D operands, a scalar per row against a vector
SHAPES = (((5,), (5,)), ((3, 1), (3, 4)), ((3, 4), (1, 4)), ((2, 3, 4), (4,)), ((), ()), ((1,), (6,)))
DOT_SHAPES = (((5,), (5,)), ((3, 4), (3, 4)), ((3, 4), (1, 4)), ((2, 3, 4), (4,)), ((), ()))
SMALL = st.one_of(tst.edge_lists(max_nodes=16, max_edges=40), tst.block_edge_lists(max_dst=8, max_edges=40))


def tensor_graph(e: tst.EdgeList) -> TensorGraph:
    if e.bipartite:
        return TensorGraph(e.src, e.dst, num_src=e.num_src, num_dst=e.num_dst)
    return TensorGraph(e.src, e.dst, num_nodes=e.num_src)


def fixed_graph(idtype=torch.int64) -> TensorGraph:
    src = torch.tensor([0, 1, 2, 2, 0, 3, 4, 4, 1], dtype=idtype)
    dst = torch.tensor([1, 2, 1, 0, 0, 4, 4, 2, 3], dtype=idtype)
    return TensorGraph(src, dst, num_nodes=5)


def rows(g, target: str) -> int:
    return {"u": g.num_src, "v": g.num_dst, "e": g.num_edges}[target]


def operands(g, op, lshape, rshape, lt, rt, dtype, seed):
    """(lhs, rhs) with the shapes given (None where the op does not read it); div's rhs away from 0."""
    lhs = tst.randn((rows(g, lt),) + lshape, dtype, seed) if op != "copy_rhs" else None
    rhs = tst.randn((rows(g, rt),) + rshape, dtype, seed + 1) if op != "copy_lhs" else None
    if op == "div":
        rhs = (rhs.float().sign() + (rhs.float() == 0).float()) * (rhs.float().abs() + 0.5)
        rhs = rhs.to(dtype)
    return lhs, rhs


def ref(g, op, lt, rt):
    src, dst = g.edges_by_id()
    return lambda lhs, rhs: ref_gsddmm(src, dst, op, lhs, rhs, lt, rt)


def run_grads(g, op, lhs, rhs, lt, rt, fn, grad_seed=7):
    """(out, grads of the used operands) of ``fn`` for a random output gradient."""
    leaves = [None if t is None else t.detach().clone().requires_grad_() for t in (lhs, rhs)]
    out = fn(g, op, leaves[0], leaves[1], lt, rt)
    grad = tst.randn(tuple(out.shape), out.dtype, grad_seed)
    used = [t for t in leaves if t is not None]
    return out, torch.autograd.grad(out, used, grad)


@pytest.mark.interpreter
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "".join(p))
@pytest.mark.parametrize("op", OPS)
def test_every_op_and_target_pair_matches_reference(op, pair):
    lt, rt = pair
    g = fixed_graph()
    shapes = DOT_SHAPES if op == "dot" else SHAPES
    for lshape, rshape in shapes:
        lhs, rhs = operands(g, op, lshape, rshape, lt, rt, torch.float64, seed=len(lshape) + 3 * len(rshape))
        expected, expected_grads = run_grads(g, op, lhs, rhs, lt, rt, lambda g_, *a: ref_gsddmm(
            *g_.edges_by_id(), *a))
        for path in PATHS:
            dgl_accel.reset_stats()
            with dgl_accel.use_backend(path):
                out, grads = run_grads(g, op, lhs, rhs, lt, rt, gsddmm)
            label = f"{path} {op} {lt}{rt} {lshape} {rshape}"
            assert dgl_accel.stats()[f"gsddmm_{op}"] == {PATH_LABEL[path]: 1}, label
            assert dgl_accel.stats()[f"gsddmm_{op}_backward"] == {PATH_LABEL[path]: 1}, label
            assert out.dtype == torch.float64
            assert_close(out, expected, msg=label)
            for got, want in zip(grads, expected_grads, strict=True):
                assert_close(got, want, msg=f"{label} grad")


@given(e=SMALL, op=st.sampled_from(OPS), pair=st.sampled_from(PAIRS), shape=st.integers(0, len(SHAPES) - 1),
       dtype=st.sampled_from(DTYPES), seed=tst.SEEDS)
@pytest.mark.interpreter
@settings(max_examples=15)
def test_random_graphs_match_reference(e, op, pair, shape, dtype, seed):
    g = tensor_graph(e)
    lt, rt = pair
    lshape, rshape = (DOT_SHAPES if op == "dot" else SHAPES)[shape % len(DOT_SHAPES if op == "dot" else SHAPES)]
    lhs, rhs = operands(g, op, lshape, rshape, lt, rt, dtype, seed)
    for path in PATHS:
        with dgl_accel.use_backend(path):
            out = gsddmm(g, op, lhs, rhs, lt, rt)
        assert out.dtype == dtype
        assert_matches_reference(out, ref(g, op, lt, rt), lhs, rhs, msg=f"{path} {op} {lt}{rt} {dtype}")


@given(e=SMALL, op=st.sampled_from(OPS), pair=st.sampled_from(PAIRS), shape=st.integers(0, 4),
       dtype=st.sampled_from((torch.float32, torch.float64)), seed=tst.SEEDS)
@pytest.mark.interpreter
@settings(max_examples=15)
def test_random_graph_gradients_match_reference(e, op, pair, shape, dtype, seed):
    g = tensor_graph(e)
    lt, rt = pair
    lshape, rshape = (DOT_SHAPES if op == "dot" else SHAPES)[shape]
    lhs, rhs = operands(g, op, lshape, rshape, lt, rt, dtype, seed)
    _, expected = run_grads(g, op, lhs, rhs, lt, rt, lambda g_, *a: ref_gsddmm(*g_.edges_by_id(), *a))
    for path in PATHS:
        with dgl_accel.use_backend(path):
            _, got = run_grads(g, op, lhs, rhs, lt, rt, gsddmm)
        for a, b in zip(got, expected, strict=True):
            assert_close(a, b, msg=f"{path} {op} {lt}{rt} grad")


@pytest.mark.skipif(not jit_runtime.enabled(), reason="the compiled loops need numba")
@pytest.mark.parametrize("idtype", tst.IDTYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_native_loops_match_reference(dtype, idtype, monkeypatch):
    # the native path's numba loops (op and backward scatter) run from any size here
    monkeypatch.setattr(jit_runtime, "MIN_WORK", 0)
    g = fixed_graph(idtype)
    with dgl_accel.use_backend("native"):
        for op in OPS:
            for lt, rt in PAIRS:
                for lshape, rshape in DOT_SHAPES if op == "dot" else SHAPES:
                    lhs, rhs = operands(g, op, lshape, rshape, lt, rt, dtype, seed=len(lshape) + 5 * len(rshape))
                    want, want_grads = run_grads(g, op, lhs, rhs, lt, rt,
                                                 lambda g_, *a: ref_gsddmm(*g_.edges_by_id(), *a))
                    got, grads = run_grads(g, op, lhs, rhs, lt, rt, gsddmm)
                    label = f"{op} {lt}{rt} {lshape} {rshape} {dtype}"
                    assert_close(got, want, msg=label)
                    for a, b in zip(grads, want_grads, strict=True):
                        assert_close(a, b, msg=f"{label} grad")


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["mul", "div", "dot"])
def test_half_types_compute_in_fp32(op, dtype):
    g = fixed_graph(torch.int32)
    lhs, rhs = operands(g, op, (3, 8), (3, 8), "u", "v", dtype, seed=11)
    expected = ref(g, op, "u", "v")(lhs.float(), rhs.float()).to(dtype)  # fp32 math, one rounding
    for path in PATHS:
        with dgl_accel.use_backend(path):
            out = gsddmm(g, op, lhs, rhs)
        assert out.dtype == dtype
        if op == "dot":  # summation order may move the fp32 sum by an ulp before rounding
            assert_close(out, expected, msg=path)
        else:
            assert torch.equal(out, expected), path


@pytest.mark.parametrize("path", QUICK_NATIVE)  # triton (the interpreter): about 8 s on 2 cores
@pytest.mark.parametrize("idtype", tst.IDTYPES)
def test_long_rows_and_many_edges(path, idtype):
    # 300 edges (more than the widest edge tile), 280 of them into node 0 and out of node 1
    # (the segment sum walks rows longer than its chunk)
    n = 300
    src = torch.cat([torch.ones(280, dtype=torch.int64), torch.arange(20) + 2]).to(idtype)
    dst = torch.cat([torch.zeros(280, dtype=torch.int64), torch.arange(20) + 3]).to(idtype)
    g = TensorGraph(src, dst, num_nodes=n)
    for op, lshape, rshape in (("add", (), ()), ("dot", (2, 40), (2, 40)), ("mul", (4, 1), (4, 70))):
        lhs, rhs = operands(g, op, lshape, rshape, "u", "v", torch.float64, seed=5)
        want, want_grads = run_grads(g, op, lhs, rhs, "u", "v", lambda g_, *a: ref_gsddmm(*g_.edges_by_id(), *a))
        with dgl_accel.use_backend(path):
            got, grads = run_grads(g, op, lhs, rhs, "u", "v", gsddmm)
        assert_close(got, want, msg=op)
        for a, b in zip(grads, want_grads, strict=True):
            assert_close(a, b, msg=f"{op} grad")


@pytest.mark.parametrize("path", PATH_CASES)
def test_empty_graph_and_empty_features(path):
    g = TensorGraph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), num_nodes=4)
    x = torch.randn(4, 3, requires_grad=True)
    with dgl_accel.use_backend(path):
        out = gsddmm(g, "dot", x, x.detach())
        assert out.shape == (0, 1)
        (grad,) = torch.autograd.grad(out.sum(), x)
        assert torch.equal(grad, torch.zeros(4, 3))
        assert gsddmm(fixed_graph(), "add", torch.zeros(5, 0), torch.zeros(5, 0)).shape == (9, 0)
        assert torch.equal(gsddmm(fixed_graph(), "dot", torch.ones(5, 2, 0), torch.ones(5, 2, 0)), torch.zeros(9, 2, 1))


@pytest.mark.parametrize("path", QUICK_NATIVE)  # triton (the interpreter): 1 to 6 s each on 2 cores
@pytest.mark.parametrize("op,pair,shapes", [("mul", ("u", "e"), ((3, 1), (3, 2))), ("div", ("e", "v"), ((2,), ())),
                                            ("dot", ("u", "v"), ((2, 3), (1, 3))), ("sub", ("v", "u"), ((2,), (2,)))])
def test_fp64_gradcheck(path, op, pair, shapes):
    g = fixed_graph(torch.int32)
    lt, rt = pair
    lhs, rhs = operands(g, op, *shapes, lt, rt, torch.float64, seed=3)
    lhs, rhs = lhs.requires_grad_(), rhs.requires_grad_()
    with dgl_accel.use_backend(path):
        assert torch.autograd.gradcheck(lambda a, b: gsddmm(g, op, a, b, lt, rt), (lhs, rhs))
        if op in ("mul", "div"):  # the backward is differentiable too (create_graph)
            assert torch.autograd.gradgradcheck(lambda a, b: gsddmm(g, op, a, b, lt, rt), (lhs, rhs))


@pytest.mark.parametrize("call,match", [
    (lambda g, x: gsddmm(g, "pow", x, x), "expected op to be one of"),
    (lambda g, x: gsddmm(g, "add", x, x, "w", "v"), "expected lhs_target to be 'u'"),
    (lambda g, x: gsddmm(g, "add", x, x[:3]), r"expected rhs of shape \[5, \.\.\.\]"),
    (lambda g, x: gsddmm(g, "add", x, x, "u", "e"), r"expected rhs of shape \[9, \.\.\.\]"),
    (lambda g, x: gsddmm(g, "mul", x, x.double()), "expected lhs and rhs of one dtype"),
    (lambda g, x: gsddmm(g, "add", x.long(), x.long()), "expected lhs to be a float32"),
    (lambda g, x: gsddmm(g, "copy_rhs", None, [1.0]), "expected rhs to be a float32"),
    (lambda g, x: gsddmm(g, "add", x, torch.randn(5, 3)), "expected feature shapes that broadcast"),
    (lambda g, x: gsddmm(g, "dot", x, torch.randn(5, 3)), "expected lhs and rhs of one last dimension"),
])
def test_bad_input_says_what_and_how_to_fix(call, match):
    g = fixed_graph()
    with pytest.raises(ValueError, match=match) as info:
        call(g, torch.randn(5, 4))
    assert "Fix:" in str(info.value)
