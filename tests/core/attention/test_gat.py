"""The fused GAT aggregation of the core (``dgl_accel.core.attention.gat``) on plain tensors, without
DGL, against the pure-torch references (``core/attention/reference.py``), forward and backward, on the
native CPU path and on the kernels of ``kernels/gat.py`` under the Triton interpreter; multi-head,
empty rows, rows longer than a kernel chunk, int32/int64 ids, fp32/fp64/fp16/bf16 (the flash-attention
rule), fp64 gradcheck, the score halves inside (``attn=``), the fused op against the unfused
composition of core ops (edge softmax and aggregation), the saved tensors, and bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention.edge_softmax import edge_softmax
from dgl_accel.core.attention.gat import gat_attention
from dgl_accel.core.attention.reference import ref_edge_softmax, ref_gat
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import QUICK_NATIVE, quick_first
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

from .test_edge_softmax import DTYPES, PATH_LABEL, PATHS, QUICK_NATIVE_PATHS, SMALL, star


def gat_inputs(num_src, num_dst, heads, dim, dtype, seed, requires_grad=False):
    feat = tst.randn((num_src, heads, dim), dtype, seed)
    el, er = tst.randn((num_src, heads), dtype, seed + 1), tst.randn((num_dst, heads), dtype, seed + 2)
    return tuple(t.requires_grad_(requires_grad) for t in (feat, el, er))


def ref_gat_attention(in_csr, feat, el, er, slope, src, dst):
    return ref_edge_softmax(in_csr, torch.nn.functional.leaky_relu(el[src.long()] + er[dst.long()], slope))


# ------------------------------------------------------------------------------------------ fused GAT
@given(e=SMALL, heads=st.integers(1, 3), dim=st.integers(1, 20), dtype=st.sampled_from(DTYPES), seed=tst.SEEDS,
       slope=st.sampled_from([0.2, 0.0, 1.5]), el_shape=st.booleans())
@pytest.mark.interpreter
def test_gat_matches_unfused_reference(e, heads, dim, dtype, seed, slope, el_shape):
    g = tst.tensor_graph(e)
    feat, el, er = gat_inputs(e.num_src, e.num_dst, heads, dim, dtype, seed)
    if el_shape:  # dgl.nn.GATConv's [N, H, 1]
        el, er = el[:, :, None], er[:, :, None]
    in_csr = g.csr("in")
    for name in PATHS:
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            out, attn = gat_attention(g, feat, el, er, slope, return_attention=True)
        assert dgl_accel.stats()["gat_attention"] == {PATH_LABEL[name]: 1}
        assert out.shape == (e.num_dst, heads, dim) and out.dtype == dtype
        assert attn.shape == (e.src.numel(), heads) and attn.dtype == dtype
        assert not out.isnan().any() and not attn.isnan().any()
        assert_matches_reference(out, lambda f, a, b: ref_gat(in_csr, f, a, b, slope), feat, el, er,
                                 msg=f"{name} out {dtype}")
        assert_matches_reference(attn, lambda a, b: ref_gat_attention(in_csr, feat, a.reshape(-1, heads),
                                                                      b.reshape(-1, heads), slope, e.src, e.dst),
                                 el, er, msg=f"{name} attention {dtype}")


# the native path alone is quick; with the interpreter: over 2 s on 2 cores (the slow case)
@pytest.mark.parametrize("paths", QUICK_NATIVE_PATHS)
@settings(max_examples=15)
@given(e=SMALL, heads=st.integers(1, 3), dim=st.integers(1, 20), dtype=st.sampled_from((torch.float32, torch.float64)),
       seed=tst.SEEDS, with_attention=st.booleans())
def test_gat_backward_matches_reference(paths, e, heads, dim, dtype, seed, with_attention):
    g = tst.tensor_graph(e)
    in_csr = g.csr("in")
    inputs = gat_inputs(e.num_src, e.num_dst, heads, dim, dtype, seed)
    grad_out = tst.randn((e.num_dst, heads, dim), dtype, seed + 3)
    grad_attn = tst.randn((e.src.numel(), heads), dtype, seed + 4)
    leaves = [t.clone().requires_grad_() for t in inputs]
    outs = [ref_gat(in_csr, *leaves), ref_gat_attention(in_csr, leaves[0], leaves[1], leaves[2], 0.2, e.src, e.dst)]
    n = 2 if with_attention else 1
    expected = torch.autograd.grad(outs[:n], leaves, [grad_out, grad_attn][:n])
    for name in paths:
        leaves = [t.clone().requires_grad_() for t in inputs]
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            outs = gat_attention(g, *leaves, return_attention=with_attention)
            got = torch.autograd.grad(outs, leaves, (grad_out, grad_attn) if with_attention else grad_out)
        assert dgl_accel.stats()["gat_attention_backward"] == {PATH_LABEL[name]: 1}
        for k, (a, b) in enumerate(zip(got, expected)):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert_close(a, b, msg=f"{name} grad[{k}] {dtype}")


@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)  # triton (the interpreter): its cases together over 2 s on 2 cores
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gat_half_precision_forward_and_gradients(path, dtype):
    g = star(100, extra=4)
    in_csr = g.csr("in")
    feat, el, er = gat_inputs(g.num_src, g.num_dst, 2, 70, dtype, 11)  # 70 > 64: two feature blocks
    grad_out = tst.randn((g.num_dst, 2, 70), dtype, 12)

    def run(fn, f, a, b, go):
        leaves = [t.clone().requires_grad_() for t in (f, a, b)]
        out = fn(*leaves)
        return (out.detach(),) + torch.autograd.grad(out, leaves, go)

    got = run(lambda *t: gat_attention(g, *t), feat, el, er, grad_out)
    assert all(t.dtype == dtype for t in got)
    assert_matches_reference(got, lambda *t: run(lambda *u: ref_gat(in_csr, *u), *t), feat, el, er, grad_out,
                             msg=f"{path} {dtype}")


@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)  # triton (the interpreter): its cases together over 2 s on 2 cores
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_gat_gradcheck_fp64(path, idtype):
    # Directed, a self loop, a multi-edge, a destination without in-edges (3), a source without out-edges (5).
    g = TensorGraph(torch.tensor([0, 0, 1, 2, 4, 4, 4, 1], dtype=idtype),
                    torch.tensor([1, 2, 2, 0, 2, 2, 4, 4], dtype=idtype), num_nodes=6)
    inputs = gat_inputs(6, 6, 2, 3, torch.float64, 7, requires_grad=True)
    fast = path == "triton"  # the interpreter: one random direction instead of every input
    assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3), inputs, fast_mode=fast)
    assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3, return_attention=True)[1], inputs,
                                    fast_mode=fast)
    assert set(dgl_accel.stats()["gat_attention"]) == {PATH_LABEL[path]}


@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)  # triton (the interpreter): its cases together over 2 s on 2 cores
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("block", quick_first([True, False]))  # the star's fp64 gradcheck: over 20 s natively
def test_gat_attention_vectors_equal_the_el_er_route(path, dtype, block):
    # attn=(attn_l, attn_r): el, er computed inside, their gradient added into grad_feat in place;
    # on a block the destinations are the first sources (er from feat[:num_dst]).
    g = TensorGraph(torch.tensor([0, 4, 3, 1, 2, 4, 0]), torch.tensor([0, 1, 2, 2, 1, 0, 2]), num_src=5,
                    num_dst=3) if block else star(60, extra=3)
    feat = tst.randn((g.num_src, 3, 4), dtype, 31)
    attn_l, attn_r = tst.randn((1, 3, 4), dtype, 32), tst.randn((1, 3, 4), dtype, 33)
    grad_out = tst.randn((g.num_dst, 3, 4), dtype, 34)

    def run(fused):
        f, a, b = (t.clone().requires_grad_() for t in (feat, attn_l, attn_r))
        if fused:
            out = gat_attention(g, f, attn=(a, b), dropout=0.3, seed=5)
        else:
            out = gat_attention(g, f, (f * a).sum(-1), (f[:g.num_dst] * b).sum(-1), dropout=0.3, seed=5)
        return (out.detach(),) + torch.autograd.grad(out, (f, a, b), grad_out)

    for x, y in zip(run(True), run(False)):
        assert x.dtype == dtype
        assert_close(x, y, dtype=torch.float32 if dtype == torch.float32 else dtype)
    if dtype == torch.float64:
        leaves = [t.clone().requires_grad_() for t in (feat, attn_l, attn_r)]
        assert torch.autograd.gradcheck(lambda f, a, b: gat_attention(g, f, attn=(a, b), dropout=0.3, seed=5),
                                        leaves, fast_mode=path == "triton")


@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)  # triton (the interpreter): over 2 s on 2 cores
def test_gat_equals_unfused_core_composition(path):
    # The fused op against edge_softmax + u_mul_e aggregation (core ops, same path), long rows included.
    g = star(120, extra=5)
    src, dst = g.edges_by_id()
    feat, el, er = gat_inputs(g.num_src, g.num_dst, 3, 5, torch.float32, 21, requires_grad=True)
    fused = gat_attention(g, feat, el, er)
    a = edge_softmax(g.csr("in"), torch.nn.functional.leaky_relu(el[src.long()] + er[dst.long()], 0.2))
    weights = a[:, :, None].expand(-1, -1, 5).reshape(a.shape[0], 15)
    unfused = aggregate(g, "u_mul_e", "sum", feat.reshape(g.num_src, 15), weights).reshape(fused.shape)
    assert_close(fused, unfused)
    go = torch.randn_like(fused)
    for x, y in zip(torch.autograd.grad(fused, (feat, el, er), go), torch.autograd.grad(unfused, (feat, el, er), go)):
        assert_close(x, y)


def test_gat_empty_rows_and_graphs(path):
    g = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 1]), num_src=3, num_dst=3)  # dst 0, 2: no in-edges
    feat, el, er = gat_inputs(3, 3, 2, 4, torch.float32, 5, requires_grad=True)
    out = gat_attention(g, feat, el, er)
    assert torch.all(out[[0, 2]] == 0) and not out.isnan().any()
    grads = torch.autograd.grad(out.sum(), (feat, el, er))
    assert all(not t.isnan().any() for t in grads) and torch.all(grads[0][2] == 0)
    empty = TensorGraph(torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.int32), num_src=2, num_dst=0)
    f, a, b = gat_inputs(2, 0, 1, 3, torch.float32, 6, requires_grad=True)
    out = gat_attention(empty, f, a, b)
    assert out.shape == (0, 1, 3)
    assert torch.all(torch.autograd.grad(out.sum(), f)[0] == 0)


def test_gat_saves_per_node_normalisers_not_per_edge_tensors(path):
    # FlashAttention's bargain: backward keeps the inputs and lse [num_dst, H] (not even the output:
    # the softmax backward's row sums are recomputed), nothing with a row per edge (E x H or
    # E x H x D) unless the attention itself was asked for, with or without dropout.
    g = star(40, extra=2)
    feat, el, er = gat_inputs(g.num_src, g.num_dst, 2, 3, torch.float32, 9, requires_grad=True)
    out = gat_attention(g, feat, el, er)
    saved = out.grad_fn.saved_tensors
    assert [tuple(t.shape) for t in saved] == [(42, 2, 3), (42, 2), (42, 2), (42, 2)]
    dropped = gat_attention(g, feat, el, er, dropout=0.5)
    assert [tuple(t.shape) for t in dropped.grad_fn.saved_tensors] == [(42, 2, 3), (42, 2), (42, 2), (42, 2)]
    assert saved[-1].dtype == torch.float32 and g.num_edges == 40


# ------------------------------------------------------------------------------------------ bad input
def _g():
    return TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)


@pytest.mark.parametrize("call, message", [
    (lambda: gat_attention(_g(), torch.ones(3, 4), torch.ones(3, 1), torch.ones(3, 1)),
     r"expected feat of shape \[num_src, H, D\]"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), torch.ones(3, 1), torch.ones(3, 2)),
     r"expected el of shape \[3, 2\] or \[3, 2, 1\]"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), torch.ones(3, 2), torch.ones(4, 2)),
     r"expected er of shape \[3, 2\]"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), torch.ones(3, 2).double(), torch.ones(3, 2)),
     "expected el of feat's dtype"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), torch.ones(3, 2), torch.ones(3, 2), negative_slope="x"),
     "expected negative_slope to be a real number"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), torch.ones(3, 2), None, attn=(torch.ones(2, 4),) * 2),
     "expected either el and er or attn"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), attn=torch.ones(2, 4)), r"expected attn to be a pair"),
    (lambda: gat_attention(_g(), torch.ones(3, 2, 4), attn=(torch.ones(2, 4), torch.ones(2, 3))),
     r"expected attn_r of shape \[2, 4\] or \[1, 2, 4\]"),
])
def test_bad_input_is_rejected_before_any_kernel(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "Fix:" in str(info.value)
    assert dgl_accel.stats() == {}
