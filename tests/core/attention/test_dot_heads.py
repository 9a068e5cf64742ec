"""The fused dot-product attention's all-heads implementations: the compiled CPU loops
(``core/jit/dot_heads.py``: the backward heads-minor, every head of a row in one vector), taken exactly where
``covers`` says, equal to the unfused reference and to the per-head loops, parallel and serial twins
alike; and the kernels (``kernels/dot_heads.py``: one program per row covering every head) under the
Triton interpreter: taken exactly for the shapes their tiles
cover (``tiles``), and equal to the unfused reference (``ref_dot_attention``): output, attention and
the gradients of q, k and val under gradients of both outputs, in fp32 / fp64 / fp16 / bf16 (the
flash-attention rule), every tile shape, key and value widths apart, a hub of more than 1,024
in-edges, rows without in-edges, int32 and int64 ids; equal to the per-head kernels on one input;
fp64 gradcheck.  (The double backward differentiates a torch composition, not these kernels:
``test_double.py``.)"""
import pytest
import torch

import dgl_accel
from dgl_accel.core.attention.dot import dot_attention, ref_dot_attention
from dgl_accel.core.jit import dot_heads
from dgl_accel.core.launch import kernel_module
from dgl_accel.testing import attention_variants as av
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first

from .test_dot import dot_inputs
from .test_edge_softmax_jit import needs_numba

MODULE = "dot_heads"
# (heads, key dim, value dim, dtype): every tile shape (4 x 16, 4 x 32, 8 x 8, 8 x 16), every dtype
CASES = [(2, 3, 16, torch.float16), (3, 20, 9, torch.bfloat16), (4, 32, 32, torch.float32),
         (6, 5, 7, torch.float64), (8, 8, 8, torch.bfloat16), (7, 16, 11, torch.float32)]


def _check(g, heads, dk, dv, dtype, seed=3):
    inputs = dot_inputs(g.num_src, g.num_dst, heads, dk, dv, dtype, seed)
    gouts = (tst.randn((g.num_dst, heads, dv), dtype, seed + 5), tst.randn((g.num_edges, heads), dtype, seed + 6))
    in_csr = g.csr("in")
    av.all_heads_match_reference(lambda *t: dot_attention(g, *t, 0.6, return_attention=True),
                                 lambda *t: ref_dot_attention(in_csr, *t, 0.6), inputs, gouts,
                                 kernel_module(MODULE).KERNELS, f"{heads} heads, {dk}/{dv} features, {dtype}")


@pytest.mark.interpreter
def test_the_all_heads_kernels_run_exactly_where_the_tiles_cover_the_row():
    g = av.star(10)
    for heads, dk, dv, fused in ((1, 8, 8, False), (2, 8, 40, False), (9, 4, 4, False), (4, 30, 2, True),
                                 (8, 3, 16, True)):
        q, k, val = dot_inputs(g.num_src, g.num_dst, heads, dk, dv, torch.float32, 1)
        with dgl_accel.use_backend("triton"), av.recorded_launches() as names:
            dot_attention(g, q, k, val)
        assert ("_dot_heads_fwd_kernel" in names) == fused and ("_dot_fwd_kernel" in names) != fused, names
        assert fused == (kernel_module(MODULE).tiles(heads, max(dk, dv)) is not None)


@pytest.mark.interpreter
@pytest.mark.parametrize("heads,dk,dv,dtype", quick_first(CASES))
def test_all_heads_kernels_match_the_reference(heads, dk, dv, dtype):
    # rows of 1 to 116 in-edges (several chunks) and one without
    _check(av.star(120, idtype=torch.int32 if heads % 2 else torch.int64, extra=4), heads, dk, dv, dtype)


@pytest.mark.interpreter
# a hub of 1,096 in-edges (more than 1,024): over 2 s on 2 cores under the interpreter, the slow cases; the quick
# case runs the same kernels on a hub of 36 (three chunks of 16)
# bf16 on the big hub only: the dtype and the 1,024 boundary are separate concerns, and fp32 on a
# hub of 1,100 proved nothing the other three do not, at 30-50 s of the interpreter
@pytest.mark.parametrize("degree,dtype", quick_first([(40, torch.float32), (40, torch.bfloat16), (1100, torch.bfloat16)]))
def test_all_heads_kernels_on_a_hub_above_1024_in_edges(degree, dtype):
    _check(av.star(degree, extra=4), 8, 8, 8, dtype)


@pytest.mark.interpreter
@pytest.mark.parametrize("degree", quick_first([6, 60]))  # 60: over 2 s on 2 cores under the interpreter
def test_all_heads_and_per_head_kernels_agree(degree):
    """The two kernel families on one input (4 heads, keys of 12, values of 10): equal to fp32
    rounding, and the per-head family really ran the second time."""
    g = av.star(degree)
    inputs = dot_inputs(g.num_src, g.num_dst, 4, 12, 10, torch.float32, 8)
    gouts = (tst.randn((g.num_dst, 4, 10), torch.float32, 1), tst.randn((g.num_edges, 4), torch.float32, 2))
    av.all_heads_agree_with_per_head(lambda *t: dot_attention(g, *t, return_attention=True), inputs, gouts, MODULE,
                                     "_dot_bwd_src_kernel")


@pytest.mark.interpreter
@pytest.mark.parametrize("degree", quick_first([6, 40]))  # 40: over 2 s on 2 cores under the interpreter
def test_gradcheck_fp64_all_heads(degree):
    g = av.star(degree)
    leaves = dot_inputs(g.num_src, g.num_dst, 3, 4, 5, torch.float64, 9, requires_grad=True)
    with dgl_accel.use_backend("triton"), av.recorded_launches() as names:
        assert torch.autograd.gradcheck(lambda *t: dot_attention(g, *t, 0.8, return_attention=True), leaves,
                                        fast_mode=True)
    assert set(kernel_module(MODULE).KERNELS) <= set(names)


# ---------------------------------------------------------- the compiled all-heads loops (core/jit/dot_heads.py)
# (heads, key dim, value dim, dtype): UniMP's 8 x 8, keys and values apart, odd widths, fp64
LOOP_CASES = [(8, 8, 8, torch.float32), (8, 3, 7, torch.float32), (9, 13, 2, torch.float64)]


def _loop_inputs(g, heads, dk, dv, dtype):
    inputs = dot_inputs(g.num_src, g.num_dst, heads, dk, dv, dtype, 11)
    gouts = (tst.randn((g.num_dst, heads, dv), dtype, 12), tst.randn((g.num_edges, heads), dtype, 13))
    return inputs, gouts


def _grads(op, inputs, gouts):
    leaves = [t.clone().requires_grad_() for t in inputs]
    outs = op(*leaves)
    return [o.detach() for o in outs] + list(torch.autograd.grad(outs, leaves, gouts))


@needs_numba
def test_the_all_heads_loops_run_exactly_where_they_cover_the_shape(monkeypatch):
    g = av.star(30)
    calls = []
    inner = dot_heads.backward
    monkeypatch.setattr(dot_heads, "backward", lambda *a: calls.append("backward") or inner(*a))
    # many narrow heads only (UniMP's 8 x 8): not one head, four, nor wide rows
    for heads, dk, dv, covered in ((1, 8, 8, False), (4, 16, 16, False), (8, 8, 8, True), (16, 2, 5, True),
                                   (8, 40, 8, False)):
        calls.clear()
        inputs, gouts = _loop_inputs(g, heads, dk, dv, torch.float32)
        with av.on_path("compiled"):
            _grads(lambda *t: dot_attention(g, *t), inputs, gouts[:1])
        assert dot_heads.covers(heads, dk, dv) == covered
        assert calls == (["backward"] if covered else []), (heads, dk, dv, calls)


@needs_numba
@pytest.mark.parametrize("heads,dk,dv,dtype", quick_first(LOOP_CASES))
def test_all_heads_loops_match_the_reference(heads, dk, dv, dtype):
    # rows of 1 to 116 in-edges and one without; the gradient of the returned attention too
    g = av.star(120, extra=4)
    inputs, gouts = _loop_inputs(g, heads, dk, dv, dtype)
    in_csr = g.csr("in")
    assert dot_heads.covers(heads, dk, dv)
    with av.on_path("compiled"):
        av.half_gradients_match_reference(lambda *t: dot_attention(g, *t, 0.6, return_attention=True),
                                          lambda *t: ref_dot_attention(in_csr, *t, 0.6), inputs, gouts,
                                          f"{heads} heads, {dk}/{dv} features, {dtype}")


@needs_numba
def test_all_heads_and_per_head_loops_agree(monkeypatch):
    """One input through both loop sets: the same sums in the same order, so equal to fp32's last bit."""
    g = av.star(200)
    inputs, gouts = _loop_inputs(g, 8, 8, 8, torch.float32)
    op = lambda *t: dot_attention(g, *t, return_attention=True)  # noqa: E731
    with av.on_path("compiled"):
        all_heads = _grads(op, inputs, gouts)
        monkeypatch.setattr(dot_heads, "covers", lambda *shape: False)
        per_head = _grads(op, inputs, gouts)
    for i, (a, b) in enumerate(zip(all_heads, per_head)):
        torch.testing.assert_close(a, b, rtol=4e-7, atol=1e-8, msg=f"output {i}")


@needs_numba
def test_all_heads_loops_parallel_and_serial_twins_agree(monkeypatch):
    g = av.star(300)
    inputs, gouts = _loop_inputs(g, 8, 8, 8, torch.float32)
    av.twins_agree(lambda *t: dot_attention(g, *t, return_attention=True), inputs, gouts, monkeypatch)
