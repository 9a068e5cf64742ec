"""The fused GAT's all-heads kernels (``kernels/gat_heads.py``: one program per row covering
every head) under the Triton interpreter: taken for the shapes their tiles cover, and equal to the
pure-torch reference (``core/attention/reference.py``) forward and backward, with and without
attention dropout, in fp32 / fp64 / fp16 / bf16 (the flash-attention rule), on a hub of more than
1,024 in-edges and rows without in-edges, with int32 and int64 ids.  (The double backward
differentiates a torch composition, not these kernels: ``test_double.py``.)"""
import pytest
import torch

import dgl_accel
from dgl_accel.core.attention.dropout import AttentionDropout
from dgl_accel.core.attention.gat import gat_attention
from dgl_accel.core.attention.reference import ref_gat
from dgl_accel.core.launch import kernel_module, record_launches
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_matches_reference

from .test_edge_softmax import star
from .test_gat import gat_inputs

# (heads, dim, dtype, dropout): every tile shape, every dtype, dropout on and off
CASES = [(2, 8, torch.float16, False), (3, 20, torch.bfloat16, True), (4, 32, torch.float32, False),
         (6, 5, torch.float64, True), (8, 8, torch.bfloat16, False), (8, 16, torch.float32, True)]


@pytest.fixture
def launched():
    names = []
    previous = record_launches(lambda module, name, *_: names.append(name))
    yield names
    record_launches(previous)


def test_tiles_cover_every_head_and_feature_or_leave_the_row_to_the_per_head_kernels():
    mod = kernel_module("gat_heads")
    for heads in range(1, 12):
        for dim in range(1, 80):
            tile = mod.tiles(heads, dim)
            if tile is None:
                assert heads == 1 or all(bh < heads or bd < dim for bh, bd in mod.SHAPES)
            else:
                assert tile in mod.SHAPES and tile[0] >= heads and tile[1] >= dim and heads > 1
    assert mod.tiles(8, 8) == (8, 8) and mod.tiles(4, 32) == (4, 32) and mod.tiles(2, 70) is None


def _run(g, feat, el, er, grad_out, fn):
    leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
    out = fn(*leaves)
    return (out.detach(),) + torch.autograd.grad(out, leaves, grad_out)


def _check(g, heads, dim, dtype, dropout, launched):
    in_csr = g.csr("in")
    weight = AttentionDropout(0.4, 77, heads).weights(torch.arange(g.num_edges), torch.float64) if dropout else None
    feat, el, er = gat_inputs(g.num_src, g.num_dst, heads, dim, dtype, heads * 7 + dim)
    grad_out = tst.randn((g.num_dst, heads, dim), dtype, 5)
    kw = {"dropout": 0.4, "seed": 77} if dropout else {}
    launched.clear()
    with dgl_accel.use_backend("triton"):
        got = _run(g, feat, el, er, grad_out, lambda *t: gat_attention(g, *t, 0.2, **kw))
    assert sorted(set(launched)) == sorted(kernel_module("gat_heads").KERNELS), launched
    assert all(t.dtype == dtype for t in got)
    assert_matches_reference(got, lambda *t: _run(g, *t[:3], t[3], lambda *u: ref_gat(in_csr, *u, 0.2, weight)),
                             feat, el, er, grad_out, msg=f"{heads} x {dim} {dtype} dropout={dropout}")


@pytest.mark.interpreter
@pytest.mark.parametrize("heads,dim,dtype,dropout", quick_first(CASES))
def test_all_heads_kernels_match_the_reference(heads, dim, dtype, dropout, launched):
    g = star(120, idtype=torch.int32 if heads % 2 else torch.int64, extra=4)  # rows of 1 to 116 in-edges, an empty one
    _check(g, heads, dim, dtype, dropout, launched)


@pytest.mark.interpreter
# a hub of 1,096 in-edges (more than 1,024): over 2 s on 2 cores under the interpreter, the slow cases; the quick
# case runs the same kernels on a hub of 36 (three chunks of 16)
# bf16 on the big hub only: the dtype and the 1,024 boundary are separate concerns, and fp32 on a
# hub of 1,100 proved nothing the other three do not, at 30-50 s of the interpreter
@pytest.mark.parametrize("degree,dtype", quick_first([(40, torch.float32), (40, torch.bfloat16), (1100, torch.bfloat16)]))
def test_all_heads_kernels_on_a_hub_above_1024_in_edges(degree, dtype, launched):
    _check(star(degree, extra=4), 8, 8, dtype, True, launched)


@pytest.mark.interpreter
@pytest.mark.parametrize("degree", quick_first([6, 60]))  # 60: over 2 s on 2 cores under the interpreter
def test_all_heads_and_per_head_kernels_agree(degree, launched):
    """The two kernel families on one input (8 heads x 8): equal to fp32 rounding, and the per-head
    family really ran the second time."""
    g = star(degree, extra=4)
    feat, el, er = gat_inputs(g.num_src, g.num_dst, 8, 8, torch.float32, 3)
    grad_out = tst.randn((g.num_dst, 8, 8), torch.float32, 4)
    mod = kernel_module("gat_heads")
    with dgl_accel.use_backend("triton"):
        fused = _run(g, feat, el, er, grad_out, lambda *t: gat_attention(g, *t, 0.2, dropout=0.3, seed=5))
        tiles, mod.tiles = mod.tiles, lambda heads, dim: None
        try:
            launched.clear()
            per_head = _run(g, feat, el, er, grad_out, lambda *t: gat_attention(g, *t, 0.2, dropout=0.3, seed=5))
        finally:
            mod.tiles = tiles
    assert "_gat_fwd_kernel" in launched and not any("heads" in n for n in launched)
    for a, b in zip(fused, per_head):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.interpreter
@pytest.mark.parametrize("degree", quick_first([6, 40]))  # 40: over 2 s on 2 cores under the interpreter
def test_gradcheck_fp64_all_heads(degree):
    g = star(degree, extra=3)
    leaves = gat_inputs(g.num_src, g.num_dst, 3, 4, torch.float64, 9, requires_grad=True)
    with dgl_accel.use_backend("triton"):
        assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3, dropout=0.5, seed=7), leaves,
                                        fast_mode=True)

