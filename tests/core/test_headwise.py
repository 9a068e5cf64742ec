"""The head-wise aggregation of the core (``dgl_accel.core.headwise``) on plain tensors, without DGL:
``u_mul_e`` with broadcast edge weights ([E, H, 1] on [N, H, D] and the other one-block broadcasts)
and ``copy_e``, sum and mean, outputs and both gradients against the pure-torch reference
(``headwise_reference``, torch broadcasting and autograd) with the flash-attention rule, on the
native path and on ``kernels/headwise.py`` under the Triton interpreter; fp32/fp64/fp16/bf16,
int32/int64 ids, blocks, rows without in-edges, rows longer than a kernel chunk, the compiled loop,
fp64 gradcheck/gradgradcheck, DGL's shape split and bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.headwise.function import aggregate_headwise
from dgl_accel.core.headwise.paths import headwise_reference
from dgl_accel.core.headwise.shapes import HeadSplit, head_split
from dgl_accel.core.jit import runtime as jit_runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import QUICK_NATIVE, quick_first
from dgl_accel.testing.tolerances import assert_matches_reference

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
SMALL = st.one_of(tst.edge_lists(max_nodes=20, max_edges=60), tst.block_edge_lists(max_dst=10, max_edges=60))
# (node feature shape, edge weight shape) without the row dim; None: copy_e on edge features of the first
SHAPES = [((4, 8), (4, 1)), ((2, 3), (2, 1)), ((3, 5), (1, 5)), ((2, 3, 4), (2, 3, 1)), ((2, 3, 4), (1, 3, 1)),
          ((2, 3, 4), (3, 1)), ((5, 2), (2,)), ((1, 3), (1, 1)), ((3,), None), ((2, 2), None)]


def operands(g: TensorGraph, shapes, dtype, seed: int):
    """(ufeat, efeat) of ``shapes`` (a SHAPES entry); efeat away from 0 (the u_div_e callers invert it)."""
    feat, weight = shapes
    if weight is None:
        return None, tst.randn((g.num_edges,) + feat, dtype, seed)
    w = (tst.randn((g.num_edges,) + weight, torch.float32, seed + 1).abs() + 0.5).to(dtype)
    return tst.randn((g.num_src,) + feat, dtype, seed), w


def run(path, g, op, reduce, ufeat, efeat):
    with dgl_accel.use_backend(path):
        return aggregate_headwise(g, op, reduce, ufeat, efeat)


def with_grads(fn, g, op, reduce, ufeat, efeat, grad_out):
    """(out, grad of ufeat (zeros for copy_e), grad of efeat) of ``fn(g, op, reduce, ufeat, efeat)``."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (ufeat, efeat) if t is not None]
    u, w = (None, leaves[0]) if ufeat is None else leaves
    out = fn(g, op, reduce, u, w)
    grads = torch.autograd.grad(out, leaves, grad_out.to(out.dtype))
    grad_u = torch.zeros(()) if ufeat is None else grads[0]
    return out.detach(), grad_u, grads[-1]


def reference(g, op, reduce, ufeat, efeat):
    src, dst = g.edges_by_id()
    return headwise_reference(src, dst, g.num_dst, op, reduce, ufeat, efeat)


# ------------------------------------------------------------------------------------------ values
@settings(max_examples=25)
@given(e=SMALL, shapes=st.sampled_from(SHAPES), reduce=st.sampled_from(["sum", "mean"]),
       dtype=st.sampled_from(DTYPES), path=st.sampled_from(["native", "triton"]), seed=tst.SEEDS)
@pytest.mark.interpreter
def test_outputs_and_gradients_match_the_reference(e, shapes, reduce, dtype, path, seed):
    g = tst.tensor_graph(e)
    op = "copy_e" if shapes[1] is None else "u_mul_e"
    ufeat, efeat = operands(g, shapes, dtype, seed % 2**31)
    out_shape = (g.num_dst,) + (shapes[0] if op == "copy_e" else tuple(reference(g, op, reduce, ufeat, efeat).shape[1:]))
    grad_out = tst.randn(out_shape, dtype, seed % 2**31 + 7)
    dgl_accel.reset_stats()
    got = with_grads(lambda *a: run(path, *a), g, op, reduce, ufeat, efeat, grad_out)
    assert got[0].dtype == dtype and got[0].shape == out_shape
    assert dgl_accel.stats()[f"{op}_{reduce}"] == {PATH_LABEL[path]: 1}
    assert_matches_reference(got, lambda u, w, go: with_grads(reference, g, op, reduce, u, w, go),
                             ufeat, efeat, grad_out, msg=f"{op} {reduce} {shapes} {path}")


@pytest.mark.parametrize("idtype", tst.IDTYPES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_rows_without_in_edges_get_zero_and_long_rows_span_chunks(path, idtype, reduce):
    # 100 in-edges into node 0 (several kernel chunks), node 1 receives nothing
    g = TensorGraph(torch.arange(100, dtype=idtype), torch.zeros(100, dtype=idtype), num_src=100, num_dst=2)
    x = torch.arange(100 * 2 * 3, dtype=torch.float64).reshape(100, 2, 3)
    w = torch.ones(100, 2, 1, dtype=torch.float64)
    w[:, 1] = 2.0
    out = run(path, g, "u_mul_e", reduce, x, w)
    expected = x.sum(0) * torch.tensor([[1.0], [2.0]], dtype=torch.float64) / (100 if reduce == "mean" else 1)
    assert torch.equal(out[1], torch.zeros(2, 3, dtype=torch.float64))
    torch.testing.assert_close(out[0], expected)
    edges = run(path, g, "copy_e", reduce, None, x)
    assert torch.equal(edges[1], torch.zeros(2, 3, dtype=torch.float64))
    torch.testing.assert_close(edges[0], x.sum(0) / (100 if reduce == "mean" else 1))


def test_a_graph_without_edges(path):
    g = TensorGraph(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64), num_nodes=3)
    x, w = torch.ones(3, 2, 4, requires_grad=True), torch.ones(0, 2, 1, requires_grad=True)
    out = run(path, g, "u_mul_e", "mean", x, w)
    assert torch.equal(out, torch.zeros(3, 2, 4))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(3, 2, 4)) and w.grad.shape == (0, 2, 1)


@pytest.mark.skipif(not jit_runtime.enabled(), reason="the compiled loops need numba (absent in the core lane)")
@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_loop_equals_the_torch_path(monkeypatch, dtype):
    gen = torch.Generator().manual_seed(5)
    g = TensorGraph(torch.randint(0, 40, (300,), generator=gen), torch.randint(0, 30, (300,), generator=gen),
                    num_src=40, num_dst=35)
    x = torch.randn(40, 3, 4, 2, generator=gen).to(dtype)
    w = torch.rand(300, 4, 1, generator=gen).to(dtype)
    grad_out = torch.randn(35, 3, 4, 2, generator=gen).to(dtype)
    results = []
    for threshold in (0, 10**9):  # every call compiled, then none
        monkeypatch.setattr(jit_runtime, "MIN_WORK", threshold)
        results.append(with_grads(lambda *a: run("native", *a), g, "u_mul_e", "sum", x, w, grad_out)
                       + with_grads(lambda *a: run("native", *a), g, "copy_e", "mean", None, w, grad_out[:, 0, :, :1]))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)  # triton (the interpreter): over 2 s on 2 cores
@pytest.mark.parametrize("op", quick_first(["copy_e", "u_mul_e"]))  # u_mul_e: about 10 s on 2 cores natively
def test_fp64_gradcheck_and_gradgradcheck(path, op):
    gen = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, 5, (12,), generator=gen), torch.randint(0, 4, (12,), generator=gen)
    g = TensorGraph(src, dst, num_src=5, num_dst=6)  # nodes 4, 5 receive nothing
    w = torch.randn(12, 2, 1, generator=gen, dtype=torch.float64, requires_grad=True)
    if op == "copy_e":
        def f(w):
            return run(path, g, "copy_e", "sum", None, w) + run(path, g, "copy_e", "mean", None, w)
        args = (w,)
    else:
        x = torch.randn(5, 2, 3, generator=gen, dtype=torch.float64, requires_grad=True)

        def f(x, w):
            return run(path, g, "u_mul_e", "sum", x, w) + run(path, g, "u_mul_e", "mean", x, w)
        args = (x, w)
    assert torch.autograd.gradcheck(f, args)
    assert path == "triton" or torch.autograd.gradgradcheck(f, args)  # the interpreter: gradcheck only


# ------------------------------------------------------------------------------------------ shapes, input
def test_head_split_follows_dgls_padding():
    assert head_split((4, 8), (4, 1)) == HeadSplit(1, 4, 8, (4, 8))     # GAT
    assert head_split((4, 8), (4,)) is None                             # reads as [E, 1, 4]: 4 != 8
    assert head_split((3, 4), (4,)) == HeadSplit(3, 4, 1, (3, 4))       # [E, 1, 4]: one per position
    assert head_split((2, 3, 4), (3, 1)) == HeadSplit(2, 3, 4, (2, 3, 4))
    assert head_split((2, 3, 4), (2, 1, 4)) is None                     # two blocks
    assert head_split((4,), (2, 1)) is None                             # the node features broadcast
    assert head_split((4,), (1, 4)) == HeadSplit(1, 4, 1, (1, 4))       # padded to one rank, nothing broadcasts
    assert head_split((2, 8), (1, 1)) == HeadSplit(1, 1, 16, (2, 8))    # one weight per edge


@pytest.mark.parametrize("call, message", [
    (lambda g: aggregate_headwise(g, "u_add_e", "sum", torch.ones(3, 2, 2), torch.ones(3, 2, 1)),
     r"expected op 'u_mul_e' or 'copy_e' \(got 'u_add_e'\)"),
    (lambda g: aggregate_headwise(g, "u_mul_e", "max", torch.ones(3, 2, 2), torch.ones(3, 2, 1)),
     r"expected reduce 'sum' or 'mean' \(got 'max'\).*extrema"),
    (lambda g: aggregate_headwise(g, "u_mul_e", "sum", torch.ones(3, 2, 2), torch.ones(4, 2, 1)),
     r"expected efeat with 3 rows, one per edge"),
    (lambda g: aggregate_headwise(g, "u_mul_e", "sum", torch.ones(2, 2, 2), torch.ones(3, 2, 1)),
     r"expected ufeat with 3 rows, one per source node"),
    (lambda g: aggregate_headwise(g, "u_mul_e", "sum", torch.ones(3, 2, 2), torch.ones(3, 2, 1).double()),
     r"expected efeat of ufeat's dtype torch.float32 \(got torch.float64\)"),
    (lambda g: aggregate_headwise(g, "u_mul_e", "sum", torch.ones(3, 4), torch.ones(3, 2, 1)),
     r"broadcasts against the node features' without enlarging them.*\[3, 4\].*\[3, 2, 1\].*Fix"),
    (lambda g: aggregate_headwise(g, "copy_e", "sum", torch.ones(3, 2), torch.ones(3, 2)),
     r"expected ufeat=None for op='copy_e'"),
    (lambda g: aggregate_headwise(g, "copy_e", "sum", None, torch.ones(3, 2, dtype=torch.int64)),
     r"expected efeat to be a float32.*int64.*Fix: efeat.float\(\)"),
    (lambda g: aggregate_headwise("graph", "copy_e", "sum", None, torch.ones(3, 2)),
     r"expected views to be a dgl_accel.core.aggregation.views.GraphViews \(got str\)"),
])
def test_bad_input_says_what_and_how_to_fix(call, message):
    g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]), num_nodes=3)
    with pytest.raises(ValueError, match=message):
        call(g)
