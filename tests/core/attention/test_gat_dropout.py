"""Attention dropout inside the fused GAT op (``dgl_accel.core.attention.dropout``): the counter-based
keep mask of the pure-torch reference reproduced bit for bit by the numba loops and the Triton
kernels (under the interpreter), on edge ids past 2^32 too; the fused output and all gradients with
dropout against the unfused torch composition with the same mask, on the three paths (vectorised
torch, numba loops, Triton); fp64 gradcheck with a fixed seed; the keep fraction is 1 - p; one seed
gives one output and ``torch.manual_seed`` reproduces a drawn one; bad probabilities and seeds."""
import contextlib

import numpy as np
import pytest
import torch

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention import gat_paths
from dgl_accel.core.attention.dropout import AttentionDropout, edge_bits, fmix32, fmix32_tensor, make_dropout
from dgl_accel.core.attention.gat import gat_attention
from dgl_accel.core.attention.reference import ref_edge_softmax, ref_gat
from dgl_accel.core.csr import Structure
from dgl_accel.core.jit import gat as loops
from dgl_accel.core.jit import runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit, loop_threads
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

needs_numba = pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
# Edge ids: small, around 2^31 and 2^32 (the high word enters the hash), up to 2^40.
EIDS = torch.cat([torch.arange(0, 300), torch.arange(2**31 - 50, 2**31 + 50), torch.arange(2**32 - 50, 2**32 + 50),
                  torch.randint(0, 2**40, (300,), generator=torch.Generator().manual_seed(0))])


ANY_PATHS = ["native", "jit", pytest.param("triton", marks=pytest.mark.interpreter)]
# For a test heavy on the jit (numba compiles) or triton (the interpreter) path: the native case quick.
QUICK_ANY_PATH = quick_first(ANY_PATHS)


@pytest.fixture(params=ANY_PATHS)
def any_path(request):
    """The vectorised torch path, the numba loops (every size) and the Triton kernels (interpreter)."""
    if request.param == "jit" and not runtime.enabled():
        pytest.skip("numba not installed")
    with dgl_accel.use_backend("triton" if request.param == "triton" else "native"), \
            (forced_jit(request.param == "jit") if request.param != "triton" else contextlib.nullcontext()):
        dgl_accel.reset_stats()
        yield request.param


def graph(seed: int = 3, num_nodes: int = 30, num_edges: int = 200) -> TensorGraph:
    """Random edges (multi-edges, self-loops), a hub destination, a destination without in-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(1, num_nodes - 1, (num_edges,), generator=gen)
    dst[: num_edges // 4] = 1  # the hub: rows longer than a kernel chunk
    return TensorGraph(src, dst, num_nodes=num_nodes)


def inputs(g, heads, dim, dtype, seed, requires_grad=False):
    feat = tst.randn((g.num_src, heads, dim), dtype, seed)
    el, er = tst.randn((g.num_src, heads), dtype, seed + 1), tst.randn((g.num_dst, heads), dtype, seed + 2)
    return tuple(t.requires_grad_(requires_grad) for t in (feat, el, er))


# ------------------------------------------------------------------------------------------ the mask
def test_fmix32_tensor_equals_the_integer_definition():
    x = torch.cat([torch.arange(1000), torch.randint(0, 2**32, (1000,), generator=torch.Generator().manual_seed(1)),
                   torch.tensor([2**32 - 1, 2**31, 2**31 - 1])])
    assert fmix32_tensor(x).tolist() == [fmix32(int(v)) for v in x]


@needs_numba
@pytest.mark.parametrize("p", [0.1, 0.5, 0.93])
def test_numba_mask_is_the_reference_bit_for_bit(p):
    drop = AttentionDropout(p, 2**63 + 12345, 3)
    keys, thr, scale, keep, in_order = drop.loop_args()
    assert keep is None and not in_order  # a seeded mask is the hash, not a drawn array
    want = drop.mask(EIDS)
    for h, key in enumerate(keys):
        got = [loops.drop_weight(np.uint64(key), int(e), np.uint64(thr), scale) != 0 for e in EIDS]
        assert got == want[:, h].tolist()
    assert [int(b) for b in edge_bits(EIDS[:5], keys[0])] == [fmix32(fmix32((e + keys[0]) & 0xFFFFFFFF))
                                                              for e in range(5)]


def matching(eids: torch.Tensor) -> Structure:
    """An in-CSR where destination i's one in-edge is from source i with edge id eids[i]: with
    D = 1 and feat = 1 the fused forward's output is the dropout weight of (eids[i], h) itself."""
    n = eids.numel()
    return Structure(torch.arange(n + 1), torch.arange(n), eids, n, n, torch.device("cpu"))


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
# every id of EIDS, one destination each: over 2 s on 2 cores under the interpreter (the slow case); every
# 40th (ids from each of the four ranges) is the quick one
@pytest.mark.parametrize("eids", quick_first([EIDS[::40].contiguous(), EIDS]), ids=["every-40th", "all"])
def test_kernel_and_loop_forward_masks_are_the_reference(dtype, eids):
    drop = AttentionDropout(0.4, 987654321987, 3)
    rows = matching(eids)
    feat = torch.ones(eids.numel(), 3, 1, dtype=dtype)
    el = tst.randn((eids.numel(), 3), dtype, 4)
    er = tst.randn((eids.numel(), 3), dtype, 5)
    want = drop.mask(eids).to(dtype) * drop.scale
    out, lse = gat_paths.forward_triton(rows, feat, el, er, (0.2, drop))  # the Triton kernel, interpreted
    assert torch.equal(out[:, :, 0], want)
    if runtime.enabled():  # the numba loops (no attention asked: it is indexed by edge id)
        out, _, _ = gat_paths.forward_compiled(rows, feat, el, er, (0.2, drop), False)
        assert torch.equal(out[:, :, 0], want)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_fraction_is_one_minus_p(p):
    drop = make_dropout(p, 11, 4)
    keep = drop.mask(torch.arange(50_000))
    n = keep.numel()
    assert abs(keep.double().mean().item() - (1 - p)) < 5 * (p * (1 - p) / n) ** 0.5
    assert abs(keep[:, 0].double().mean().item() - (1 - p)) < 5 * (p * (1 - p) / (n / 4)) ** 0.5
    # heads and neighbouring ids are not correlated: agreement of two heads as for independent masks
    agree = (keep[:, 0] == keep[:, 1]).double().mean().item()
    assert abs(agree - (p * p + (1 - p) ** 2)) < 0.02


# ------------------------------------------------------------------------------------------ the fused op
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_attention", [False, True])
def test_fused_output_and_gradients_equal_the_unfused_composition(any_path, dtype, with_attention):
    g = graph()
    in_csr = g.csr("in")
    src, dst = (t.long() for t in g.edges_by_id())
    drop = AttentionDropout(0.45, 2024, 2)
    weight = drop.weights(torch.arange(g.num_edges), torch.float64)
    feat, el, er = inputs(g, 2, 5, dtype, 31)
    grad_out = tst.randn((g.num_dst, 2, 5), dtype, 32)
    grad_attn = tst.randn((g.num_edges, 2), dtype, 33)

    def unfused(f, a, b):
        score = torch.nn.functional.leaky_relu(a[src] + b[dst], 0.2)
        return ref_gat(in_csr, f, a, b, 0.2, weight), ref_edge_softmax(in_csr, score) * weight.to(f.dtype)

    leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
    outs = gat_attention(g, *leaves, dropout=0.45, seed=2024, return_attention=with_attention)
    outs = outs if with_attention else (outs,)
    assert dgl_accel.stats()["gat_attention"] == {"triton-interpreter" if any_path == "triton" else "native-cpu": 1}
    grads = torch.autograd.grad(outs, leaves, (grad_out, grad_attn)[:len(outs)])
    ref_leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
    ref_outs = unfused(*ref_leaves)[:len(outs)]
    ref_grads = torch.autograd.grad(ref_outs, ref_leaves, (grad_out, grad_attn)[:len(outs)])
    for name, x, y in zip(("out", "attention"), outs, ref_outs):
        assert x.dtype == dtype
        assert_close(x, y.detach(), msg=f"{any_path} {name}")
    for name, x, y in zip(("grad_feat", "grad_el", "grad_er"), grads, ref_grads):
        assert_close(x, y, msg=f"{any_path} {name}")
    # and against fp64 under the FlashAttention rule
    if dtype == torch.float32:
        assert_matches_reference(outs[0].detach(), lambda f, a, b: unfused(f, a, b)[0], feat, el, er)


@pytest.mark.parametrize("any_path", QUICK_ANY_PATH, indirect=True)  # jit, triton: together over 2 s on 2 cores
def test_gradcheck_fp64_with_dropout(any_path):
    g = graph(num_nodes=12, num_edges=40)
    leaves = inputs(g, 2, 3, torch.float64, 41, requires_grad=True)
    fast = any_path == "triton"
    assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3, dropout=0.5, seed=7), leaves, fast_mode=fast)
    assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3, dropout=0.5, seed=7,
                                                             return_attention=True)[1], leaves, fast_mode=fast)


@pytest.mark.parametrize("any_path", QUICK_ANY_PATH, indirect=True)  # triton (the interpreter): over 2 s on 2 cores
def test_same_seed_same_output_and_manual_seed_reproduces(any_path):
    g = graph()
    feat, el, er = inputs(g, 2, 4, torch.float32, 51)
    one = gat_attention(g, feat, el, er, dropout=0.5, seed=5)
    assert torch.equal(one, gat_attention(g, feat, el, er, dropout=0.5, seed=5))
    assert not torch.equal(one, gat_attention(g, feat, el, er, dropout=0.5, seed=6))
    torch.manual_seed(3)
    drawn = gat_attention(g, feat, el, er, dropout=0.5)
    other = gat_attention(g, feat, el, er, dropout=0.5)
    torch.manual_seed(3)
    assert torch.equal(drawn, gat_attention(g, feat, el, er, dropout=0.5))
    assert not torch.equal(drawn, other)
    assert torch.equal(gat_attention(g, feat, el, er, dropout=0.0), gat_attention(g, feat, el, er))


def _draws_dgls_mask_and_uses_it_throughout(any_path: str, heads: int, attention: bool):
    g = graph()
    feat, el, er = inputs(g, heads, 4, torch.float32, 71)
    torch.manual_seed(11)
    dgls = torch.empty(g.num_edges, heads, 1).bernoulli_(0.4)[..., 0]
    after = torch.rand(3)  # the stream after DGL's draw
    torch.manual_seed(11)
    leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
    out = gat_attention(g, *leaves, dropout=0.6, return_attention=attention)
    assert torch.equal(torch.rand(3), after) == (any_path != "triton")
    if any_path == "triton":
        return
    if attention:
        out, att = out
        _, plain = gat_attention(g, feat, el, er, return_attention=True)
        assert_close(att, plain * dgls / 0.4)  # DGL's mask and scale, edge by edge
    weight = (dgls / 0.4).double()
    ref_leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
    ref = ref_gat(g.csr("in"), *ref_leaves, 0.2, weight)
    assert_close(out, ref.detach())
    grad_out = tst.randn(tuple(out.shape), torch.float32, 72)
    for x, y in zip(torch.autograd.grad(out, leaves, grad_out), torch.autograd.grad(ref, ref_leaves, grad_out)):
        assert_close(x, y)  # the backward reads the same drawn mask


@pytest.mark.parametrize("heads", [1, 3])
def test_native_paths_without_a_seed_draw_dgls_mask_and_use_it_throughout(any_path, heads):
    # DGL's attn_drop is nn.Dropout on the [E, H, 1] attention: bernoulli_(1 - p) on a tensor of the
    # attention's dtype.  From one torch seed the native paths draw that mask at that point of the
    # stream (so a model gives DGL's numbers); the Triton path keeps the seeded hash.
    _draws_dgls_mask_and_uses_it_throughout(any_path, heads, attention=True)


@needs_numba
@pytest.mark.parametrize("attention", [True, False], ids=["attention", "no-attention"])
@pytest.mark.parametrize("one_thread", [True, False], ids=["one-thread", "threads"])
def test_loops_read_the_drawn_mask_in_either_order(attention, one_thread):
    # On one thread without the attention returned, the loops read the mask permuted to the in-CSR's
    # order (forward and the one-pass backward); else by edge id (two passes on several threads).
    with dgl_accel.use_backend("native"), forced_jit(True), loop_threads(one_thread):
        _draws_dgls_mask_and_uses_it_throughout("jit", 3, attention)


def test_returned_attention_is_after_dropout_as_dgls_gatconv(any_path):
    g = graph()
    feat, el, er = inputs(g, 3, 2, torch.float64, 61)
    _, a = gat_attention(g, feat, el, er, return_attention=True)
    _, dropped = gat_attention(g, feat, el, er, return_attention=True, dropout=0.25, seed=9)
    keep = AttentionDropout(0.25, 9, 3).mask(torch.arange(g.num_edges))
    assert torch.equal(dropped != 0, keep)
    assert_close(dropped, a * keep / 0.75)


@pytest.mark.parametrize("kw, message", [
    (dict(dropout=1.0), r"expected dropout to be a probability in \[0, 1\) \(got 1.0\)"),
    (dict(dropout=-0.1), r"expected dropout to be a probability in \[0, 1\)"),
    (dict(dropout="0.5"), r"expected dropout to be a probability"),
    (dict(dropout=True), r"expected dropout to be a probability"),
    (dict(dropout=0.5, seed=-1), r"expected seed to be an int in \[0, 2\^64\)"),
    (dict(dropout=0.5, seed=2**64), r"expected seed to be an int in \[0, 2\^64\)"),
    (dict(dropout=0.5, seed=1.5), r"expected seed to be an int"),
])
def test_bad_dropout_or_seed_is_rejected_before_any_kernel(kw, message):
    g = graph()
    feat, el, er = inputs(g, 1, 2, torch.float32, 71)
    with pytest.raises(ValueError, match=message) as info:
        gat_attention(g, feat, el, er, **kw)
    assert "Fix:" in str(info.value)
    assert dgl_accel.stats() == {}
