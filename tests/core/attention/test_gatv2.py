"""The fused GATv2 attention of the core (``dgl_accel.core.attention.gatv2``) on plain tensors, without
DGL, against the pure-torch reference (edge softmax of attn . leaky_relu(fs[u] + fd[v]), then the
weighted sum of fs), forward, attention and backward (fs, fd and the attention vector), on three paths:
the vectorised torch code, the compiled numba loops (work threshold lowered) and the kernels of
``kernels/gatv2.py`` under the Triton interpreter; multi-head, empty rows and graphs, rows
longer than a kernel chunk, int32/int64 ids, fp32/fp64/fp16/bf16 (the flash-attention rule), fp64
gradcheck, what backward saves, and bad input."""
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention.gatv2 import gatv2_attention, ref_gatv2_attention
from dgl_accel.testing import attention_variants as av
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

from .test_edge_softmax_jit import needs_numba

path = av.path_fixture()
UNIT_SEEDS = (11, 22)  # before the fix: bf16 failed the rule with both, fp16 with 22
# The torch path quick; the compiled loops (numba compiles each signature: up to 18 s on 2 cores) and the
# kernels (the interpreter: up to 9 s) slow: for the ``path`` fixture (indirect) and, as the paths to loop
# over, for a test that runs on each in turn.
QUICK_PATH = quick_first(["native", "compiled", pytest.param("triton", marks=pytest.mark.interpreter)])
QUICK_PATHS = quick_first([pytest.param(("native",), id="native"),
                                  pytest.param(av.PATHS, marks=pytest.mark.interpreter, id="every-path")])


def gatv2_inputs(num_src, num_dst, heads, dim, dtype, seed, spread=1.0, requires_grad=False):
    fs = tst.randn((num_src, heads, dim), dtype, seed)
    fd = tst.randn((num_dst, heads, dim), dtype, seed + 1)
    attn = (tst.randn((1, heads, dim), torch.float32, seed + 2) * spread).to(dtype)
    return tuple(t.requires_grad_(requires_grad) for t in (fs, fd, attn))


# ------------------------------------------------------------------------------------------ forward
@pytest.mark.parametrize("paths", QUICK_PATHS)
@given(e=av.SMALL, heads=st.integers(1, 3), dim=st.integers(1, 20), dtype=st.sampled_from(av.DTYPES), seed=tst.SEEDS,
       slope=st.sampled_from([0.2, 0.0, 1.5]), flat_attn=st.booleans())
def test_gatv2_matches_unfused_reference(paths, e, heads, dim, dtype, seed, slope, flat_attn):
    g = tst.tensor_graph(e)
    fs, fd, attn = gatv2_inputs(e.num_src, e.num_dst, heads, dim, dtype, seed)
    if flat_attn:  # [H, D] as well as GATv2Conv's [1, H, D]
        attn = attn[0]
    in_csr = g.csr("in")
    for name in paths:
        dgl_accel.reset_stats()
        with av.on_path(name):
            out, a = gatv2_attention(g, fs, fd, attn, slope, return_attention=True)
        assert dgl_accel.stats()["gatv2_attention"] == {av.LABEL[name]: 1}
        assert out.shape == (e.num_dst, heads, dim) and out.dtype == dtype
        assert a.shape == (e.src.numel(), heads) and a.dtype == dtype
        assert not out.isnan().any() and not a.isnan().any()
        assert_matches_reference((out, a), lambda *t: ref_gatv2_attention(in_csr, *t, slope), fs, fd, attn,
                                 msg=f"{name} {dtype}")


def test_gatv2_long_rows_online_max(path):
    # Row 0 has 197 entries (seven chunks of 32) and spread scores: the running max moves and rescales.
    g = av.star(200)
    fs, fd, attn = gatv2_inputs(g.num_src, g.num_dst, 2, 6, torch.float64, 4, spread=8.0)
    out, a = gatv2_attention(g, fs, fd, attn, return_attention=True)
    ref, ref_a = ref_gatv2_attention(g.csr("in"), fs, fd, attn)
    assert_close(out, ref)
    assert_close(a, ref_a)


# ------------------------------------------------------------------------------------------ backward
@pytest.mark.parametrize("paths", QUICK_PATHS)
@settings(max_examples=12)
@given(e=av.SMALL, heads=st.integers(1, 3), dim=st.integers(1, 20), dtype=st.sampled_from((torch.float32, torch.float64)),
       seed=tst.SEEDS, with_attention=st.booleans(), slope=st.sampled_from([0.2, 1.5]))
def test_gatv2_backward_matches_reference(paths, e, heads, dim, dtype, seed, with_attention, slope):
    g = tst.tensor_graph(e)
    in_csr = g.csr("in")
    inputs = gatv2_inputs(e.num_src, e.num_dst, heads, dim, dtype, seed)
    grad_out = tst.randn((e.num_dst, heads, dim), dtype, seed + 3)
    grad_attn = tst.randn((e.src.numel(), heads), dtype, seed + 4)
    with mock.patch.object(av, "PATHS", paths):  # the paths backward_on_paths runs on
        av.backward_on_paths(lambda *t, **kw: gatv2_attention(g, *t, slope, **kw),
                             lambda *t: ref_gatv2_attention(in_csr, *t, slope), inputs, grad_out, grad_attn,
                             with_attention, "gatv2_attention_backward")


@pytest.mark.parametrize("path", QUICK_PATH, indirect=True)  # compiled, triton: slow (QUICK_PATH)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gatv2_half_precision_forward_and_gradients(path, dtype):
    g = av.star(100, extra=4)
    in_csr = g.csr("in")
    fs, fd, attn = gatv2_inputs(g.num_src, g.num_dst, 2, 70, dtype, 11, spread=0.2)  # 70 > 64: two feature blocks
    grad_out = tst.randn((g.num_dst, 2, 70), dtype, 12)
    av.half_precision_matches_reference(lambda *t: gatv2_attention(g, *t), lambda *t: ref_gatv2_attention(in_csr, *t),
                                     (fs, fd, attn), grad_out, f"{path} {dtype}")


@pytest.mark.parametrize("seed", UNIT_SEEDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gatv2_half_gradients_with_unit_attn_vector(path, dtype, seed):
    # attn ~ N(0, 1) (not GATv2Conv's init): peaked softmaxes, where the backward's row term
    # c[v] = sum_e p_e <grad_out[v], fs[u]> taken from the output rounded to fp16/bf16 broke the rule
    # (UNIT_SEEDS failed it on the native and compiled paths: bf16 grad fs 3.5e-2 against a bound of
    # 3.2e-2 with seed 11); it is summed in fp32 from the recomputed p_e.
    g = av.star(24, extra=3)
    in_csr = g.csr("in")
    fs, fd, attn, grad_out, grad_attn = av.unit_normal(seed, dtype, (g.num_src, 1, 24), (g.num_dst, 1, 24), (1, 24),
                                                       (g.num_dst, 1, 24), (g.num_edges, 1))
    av.half_gradients_match_reference(lambda *t: gatv2_attention(g, *t, return_attention=True),
                                      lambda *t: ref_gatv2_attention(in_csr, *t), (fs, fd, attn),
                                      (grad_out, grad_attn), f"{path} {dtype} seed {seed}")


@pytest.mark.parametrize("path", QUICK_PATH, indirect=True)  # compiled, triton: slow (QUICK_PATH)
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_gatv2_gradcheck_fp64(path, idtype):
    # Directed, a self loop, a multi-edge, a destination without in-edges (3), a source without out-edges (5).
    g = TensorGraph(torch.tensor([0, 0, 1, 2, 4, 4, 4, 1], dtype=idtype),
                    torch.tensor([1, 2, 2, 0, 2, 2, 4, 4], dtype=idtype), num_nodes=6)
    assert g.csr("in").eids.dtype == idtype
    inputs = gatv2_inputs(6, 6, 2, 3, torch.float64, 7, requires_grad=True)
    fast = path == "triton"  # the interpreter: one random direction instead of every input
    assert torch.autograd.gradcheck(lambda *t: gatv2_attention(g, *t, 0.3), inputs, fast_mode=fast)
    assert torch.autograd.gradcheck(lambda *t: gatv2_attention(g, *t, 0.3, return_attention=True), inputs,
                                    fast_mode=fast)
    assert torch.autograd.gradcheck(lambda *t: gatv2_attention(g, *t, 0.3, return_attention=True)[1], inputs,
                                    fast_mode=fast)
    assert set(dgl_accel.stats()["gatv2_attention"]) == {av.LABEL[path]}


def test_gatv2_empty_rows_and_graphs(path):
    g = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 1]), num_src=3, num_dst=3)  # dst 0, 2: no in-edges
    fs, fd, attn = gatv2_inputs(3, 3, 2, 4, torch.float32, 5, requires_grad=True)
    out, a = gatv2_attention(g, fs, fd, attn, return_attention=True)
    assert torch.all(out[[0, 2]] == 0) and not out.isnan().any()
    grads = torch.autograd.grad(out.sum() + a.sum(), (fs, fd, attn))
    assert all(not t.isnan().any() for t in grads)
    assert torch.all(grads[0][2] == 0) and torch.all(grads[1][[0, 2]] == 0)
    empty = TensorGraph(torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.int32), num_src=2, num_dst=3)
    fs, fd, attn = gatv2_inputs(2, 3, 1, 3, torch.float32, 6, requires_grad=True)
    out = gatv2_attention(empty, fs, fd, attn)
    assert out.shape == (3, 1, 3) and torch.all(out == 0)
    assert all(torch.all(t == 0) for t in torch.autograd.grad(out.sum(), (fs, fd, attn)))


def test_gatv2_saves_per_node_normalisers_not_per_edge_tensors(path):
    g = av.star(40, extra=2)
    fs, fd, attn = gatv2_inputs(g.num_src, g.num_dst, 2, 3, torch.float32, 9, requires_grad=True)
    out = gatv2_attention(g, fs, fd, attn)
    av.assert_saves(out, [(42, 2, 3), (42, 2, 3), (2, 3), (42, 2)])  # fs, fd, attn, lse: not the output
    assert g.num_edges == 40


# ------------------------------------------------------------------------------------------ bad input
def _g():
    return av.bad_input_graph()


def _x(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype)


@pytest.mark.parametrize("call, message", [
    (lambda: gatv2_attention(_g(), _x(3, 4), _x(3, 1, 4), _x(1, 4)), r"expected fs of shape \[num_src, H, D\]"),
    (lambda: gatv2_attention(_g(), _x(3, 1, 4), _x(4, 1, 4), _x(1, 4)), r"expected fd of shape \[num_dst, H, D\]"),
    (lambda: gatv2_attention(_g(), _x(3, 2, 4), _x(3, 2, 3), _x(2, 4)), r"expected fd with fs's \[H, D\]"),
    (lambda: gatv2_attention(_g(), _x(3, 2, 4), _x(3, 2, 4), _x(2, 3)), r"expected attn of shape \[2, 4\]"),
    (lambda: gatv2_attention(_g(), _x(3, 2, 4), _x(3, 2, 4), _x(2, 4, dtype=torch.float64)),
     "expected attn of fs's dtype"),
    (lambda: gatv2_attention(_g(), _x(3, 2, 4, dtype=torch.int64), _x(3, 2, 4), _x(2, 4)),
     "expected fs to be a float32"),
    (lambda: gatv2_attention(_g(), _x(3, 2, 4), _x(3, 2, 4), _x(2, 4), negative_slope=-1),
     "expected negative_slope to be a real number"),
])
def test_bad_input_is_rejected_before_any_kernel(call, message):
    av.assert_rejected_before_any_kernel(call, message)


@needs_numba
def test_parallel_and_serial_twins_agree(monkeypatch):
    g = av.star(300)
    inputs = gatv2_inputs(g.num_src, g.num_dst, 3, 8, torch.float32, 7)
    gouts = (tst.randn((g.num_dst, 3, 8), torch.float32, 8), tst.randn((g.num_edges, 3), torch.float32, 9))
    av.twins_agree(lambda *t: gatv2_attention(g, *t, return_attention=True), inputs, gouts, monkeypatch)
