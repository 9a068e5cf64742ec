"""The fused dot-product attention of the core (``dgl_accel.core.attention.dot``) on plain tensors,
without DGL, against the pure-torch reference (edge softmax of scaled dot products, then the weighted
sum), forward, attention and backward, on three paths: the vectorised torch code, the compiled numba
loops (work threshold lowered) and the kernels of ``kernels/dot.py`` under the Triton
interpreter; multi-head, key and value sizes apart, empty rows and graphs, rows longer than a kernel
chunk, int32/int64 ids, fp32/fp64/fp16/bf16 (the flash-attention rule), fp64 gradcheck, what backward
saves, and bad input."""
import math
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention.dot import dot_attention, ref_dot_attention
from dgl_accel.testing import attention_variants as av
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.attention_variants import (
    DTYPES,
    LABEL,
    PATHS,
    SMALL,
    assert_rejected_before_any_kernel,
    assert_saves,
    backward_on_paths,
    bad_input_graph,
    half_gradients_match_reference,
    half_precision_matches_reference,
    on_path,
    path_fixture,
    star,
    unit_normal,
)
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

from .test_edge_softmax_jit import needs_numba

path = path_fixture()
UNIT_SEEDS = (10, 29)  # before the fix: fp16 failed the rule with seed 10, bf16 with 29
# The torch path quick; the compiled loops (numba compiles each signature: up to 18 s on 2 cores) and the
# kernels (the interpreter: up to 9 s) slow: for the ``path`` fixture (indirect) and, as the paths to loop
# over, for a test that runs on each in turn.
QUICK_PATH = quick_first(["native", "compiled", pytest.param("triton", marks=pytest.mark.interpreter)])
QUICK_PATHS = quick_first([pytest.param(("native",), id="native"),
                                  pytest.param(PATHS, marks=pytest.mark.interpreter, id="every-path")])


def dot_inputs(num_src, num_dst, heads, dk, dv, dtype, seed, spread=1.0, requires_grad=False):
    q = (tst.randn((num_dst, heads, dk), torch.float32, seed) * spread).to(dtype)
    k = tst.randn((num_src, heads, dk), dtype, seed + 1)
    val = tst.randn((num_src, heads, dv), dtype, seed + 2)
    return tuple(t.requires_grad_(requires_grad) for t in (q, k, val))


# ------------------------------------------------------------------------------------------ forward
@pytest.mark.parametrize("paths", QUICK_PATHS)
@given(e=SMALL, heads=st.integers(1, 3), dk=st.integers(1, 20), dv=st.integers(1, 20),
       dtype=st.sampled_from(DTYPES), seed=tst.SEEDS, scale=st.sampled_from([None, 0.7, -2.0]))
def test_dot_matches_unfused_reference(paths, e, heads, dk, dv, dtype, seed, scale):
    g = tst.tensor_graph(e)
    q, k, val = dot_inputs(e.num_src, e.num_dst, heads, dk, dv, dtype, seed)
    in_csr = g.csr("in")
    for name in paths:
        dgl_accel.reset_stats()
        with on_path(name):
            out, attn = dot_attention(g, q, k, val, scale, return_attention=True)
        assert dgl_accel.stats()["dot_attention"] == {LABEL[name]: 1}
        assert out.shape == (e.num_dst, heads, dv) and out.dtype == dtype
        assert attn.shape == (e.src.numel(), heads) and attn.dtype == dtype
        assert not out.isnan().any() and not attn.isnan().any()
        assert_matches_reference((out, attn), lambda *t: ref_dot_attention(in_csr, *t, scale), q, k, val,
                                 msg=f"{name} {dtype}")


def test_dot_default_scale_is_dotgatconvs_one_over_sqrt_dim(path):
    g = star(40)
    q, k, val = dot_inputs(g.num_src, g.num_dst, 2, 9, 4, torch.float64, 3)
    assert_close(dot_attention(g, q, k, val), dot_attention(g, q, k, val, 1 / math.sqrt(9)))
    assert_close(dot_attention(g, q, k, val), ref_dot_attention(g.csr("in"), q / 3.0, k, val, 1.0)[0])


def test_dot_long_rows_online_max(path):
    # Row 0 has 197 entries (seven chunks of 32) and spread scores: the running max moves and rescales.
    g = star(200)
    q, k, val = dot_inputs(g.num_src, g.num_dst, 2, 6, 3, torch.float64, 4, spread=8.0)
    out, attn = dot_attention(g, q, k, val, return_attention=True)
    ref, ref_a = ref_dot_attention(g.csr("in"), q, k, val)
    assert_close(out, ref)
    assert_close(attn, ref_a)


# ------------------------------------------------------------------------------------------ backward
@pytest.mark.parametrize("paths", QUICK_PATHS)
@settings(max_examples=12)
@given(e=SMALL, heads=st.integers(1, 3), dk=st.integers(1, 20), dv=st.integers(1, 20),
       dtype=st.sampled_from((torch.float32, torch.float64)), seed=tst.SEEDS, with_attention=st.booleans())
def test_dot_backward_matches_reference(paths, e, heads, dk, dv, dtype, seed, with_attention):
    g = tst.tensor_graph(e)
    in_csr = g.csr("in")
    inputs = dot_inputs(e.num_src, e.num_dst, heads, dk, dv, dtype, seed)
    grad_out = tst.randn((e.num_dst, heads, dv), dtype, seed + 3)
    grad_attn = tst.randn((e.src.numel(), heads), dtype, seed + 4)
    with mock.patch.object(av, "PATHS", paths):  # the paths backward_on_paths runs on
        backward_on_paths(lambda *t, **kw: dot_attention(g, *t, **kw), lambda *t: ref_dot_attention(in_csr, *t), inputs,
                          grad_out, grad_attn, with_attention, "dot_attention_backward")


@pytest.mark.parametrize("path", QUICK_PATH, indirect=True)  # compiled, triton: slow (QUICK_PATH)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dot_half_precision_forward_and_gradients(path, dtype):
    g = star(100, extra=4)
    in_csr = g.csr("in")
    q, k, val = dot_inputs(g.num_src, g.num_dst, 2, 70, 66, dtype, 11, spread=0.2)  # > 64: two feature blocks
    grad_out = tst.randn((g.num_dst, 2, 66), dtype, 12)
    half_precision_matches_reference(lambda *t: dot_attention(g, *t), lambda *t: ref_dot_attention(in_csr, *t),
                                     (q, k, val), grad_out, f"{path} {dtype}")


@pytest.mark.parametrize("seed", UNIT_SEEDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dot_half_gradients_with_unit_queries(path, dtype, seed):
    # q, k ~ N(0, 1) and scale 1: peaked softmaxes, where the backward's row term
    # c[v] = sum_e p_e <grad_out[v], val[u]> taken from the output rounded to fp16/bf16 broke the rule
    # (UNIT_SEEDS failed it on the native and compiled paths: bf16 grad q 2.2e-2 with seed 29); it is
    # summed in fp32 from the recomputed p_e.
    g = star(24, extra=3)
    in_csr = g.csr("in")
    q, k, val, grad_out, grad_attn = unit_normal(seed, dtype, (g.num_dst, 1, 24), (g.num_src, 1, 24),
                                                 (g.num_src, 1, 20), (g.num_dst, 1, 20), (g.num_edges, 1))
    half_gradients_match_reference(lambda *t: dot_attention(g, *t, 1.0, return_attention=True),
                                   lambda *t: ref_dot_attention(in_csr, *t, 1.0), (q, k, val), (grad_out, grad_attn),
                                   f"{path} {dtype} seed {seed}")


@pytest.mark.parametrize("path", QUICK_PATH, indirect=True)  # compiled, triton: slow (QUICK_PATH)
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_dot_gradcheck_fp64(path, idtype):
    # Directed, a self loop, a multi-edge, a destination without in-edges (3), a source without out-edges (5).
    g = TensorGraph(torch.tensor([0, 0, 1, 2, 4, 4, 4, 1], dtype=idtype),
                    torch.tensor([1, 2, 2, 0, 2, 2, 4, 4], dtype=idtype), num_nodes=6)
    assert g.csr("in").eids.dtype == idtype
    inputs = dot_inputs(6, 6, 2, 3, 2, torch.float64, 7, requires_grad=True)
    fast = path == "triton"  # the interpreter: one random direction instead of every input
    assert torch.autograd.gradcheck(lambda *t: dot_attention(g, *t, 0.8), inputs, fast_mode=fast)
    assert torch.autograd.gradcheck(lambda *t: dot_attention(g, *t, return_attention=True), inputs, fast_mode=fast)
    assert torch.autograd.gradcheck(lambda *t: dot_attention(g, *t, return_attention=True)[1], inputs,
                                    fast_mode=fast)
    assert set(dgl_accel.stats()["dot_attention"]) == {LABEL[path]}


def test_dot_empty_rows_and_graphs(path):
    g = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 1]), num_src=3, num_dst=3)  # dst 0, 2: no in-edges
    q, k, val = dot_inputs(3, 3, 2, 4, 5, torch.float32, 5, requires_grad=True)
    out, attn = dot_attention(g, q, k, val, return_attention=True)
    assert torch.all(out[[0, 2]] == 0) and not out.isnan().any()
    grads = torch.autograd.grad(out.sum() + attn.sum(), (q, k, val))
    assert all(not t.isnan().any() for t in grads)
    assert torch.all(grads[0][[0, 2]] == 0) and torch.all(grads[1][2] == 0) and torch.all(grads[2][2] == 0)
    empty = TensorGraph(torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.int32), num_src=2, num_dst=3)
    q, k, val = dot_inputs(2, 3, 1, 3, 2, torch.float32, 6, requires_grad=True)
    out = dot_attention(empty, q, k, val)
    assert out.shape == (3, 1, 2) and torch.all(out == 0)
    assert all(torch.all(t == 0) for t in torch.autograd.grad(out.sum(), (q, k, val)))


def test_dot_saves_per_node_normalisers_not_per_edge_tensors(path):
    g = star(40, extra=2)
    q, k, val = dot_inputs(g.num_src, g.num_dst, 2, 3, 5, torch.float32, 9, requires_grad=True)
    out = dot_attention(g, q, k, val)
    assert_saves(out, [(42, 2, 3), (42, 2, 3), (42, 2, 5), (42, 2)])  # q, k, val, lse: not the output
    assert g.num_edges == 40


# ------------------------------------------------------------------------------------------ bad input
def _g():
    return bad_input_graph()


def _x(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype)


@pytest.mark.parametrize("call, message", [
    (lambda: dot_attention(_g(), _x(3, 4), _x(3, 1, 4), _x(3, 1, 4)), r"expected q of shape \[num_dst, H, D\]"),
    (lambda: dot_attention(_g(), _x(3, 1, 4), _x(4, 1, 4), _x(3, 1, 4)), r"expected k of shape \[num_src, H, D\]"),
    (lambda: dot_attention(_g(), _x(3, 2, 4), _x(3, 2, 3), _x(3, 2, 4)), "expected k with q's heads and key dim"),
    (lambda: dot_attention(_g(), _x(3, 2, 4), _x(3, 2, 4), _x(3, 1, 4)), "expected val with q's 2 heads"),
    (lambda: dot_attention(_g(), _x(3, 2, 4), _x(3, 2, 4, dtype=torch.float64), _x(3, 2, 4)),
     "expected k of q's dtype"),
    (lambda: dot_attention(_g(), _x(3, 2, 4, dtype=torch.int64), _x(3, 2, 4), _x(3, 2, 4)),
     "expected q to be a float32"),
    (lambda: dot_attention(_g(), _x(3, 2, 4), _x(3, 2, 4), _x(3, 2, 4), scale="x"), "expected scale to be None"),
    (lambda: dot_attention(_g(), _x(3, 2, 4), _x(3, 2, 4), _x(3, 2, 4), scale=float("nan")),
     "expected scale to be None"),
])
def test_bad_input_is_rejected_before_any_kernel(call, message):
    assert_rejected_before_any_kernel(call, message)


@needs_numba
def test_parallel_and_serial_twins_agree(monkeypatch):
    g = av.star(300)
    inputs = dot_inputs(g.num_src, g.num_dst, 3, 8, 5, torch.float32, 7)
    gouts = (tst.randn((g.num_dst, 3, 5), torch.float32, 8), tst.randn((g.num_edges, 3), torch.float32, 9))
    av.twins_agree(lambda *t: dot_attention(g, *t, return_attention=True), inputs, gouts, monkeypatch)
