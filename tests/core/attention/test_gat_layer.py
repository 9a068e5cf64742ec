"""The fused GAT layer (``dgl_accel.core.attention.gat.gat_layer``: h = x @ weight.T, the attention with
the score halves from attn_l / attn_r, the bias, h internal) against the unfused torch composition
(fc, el/er, edge softmax, weighted sum, bias) on three CPU paths: the vectorised torch code, the
numba loops (forced on) and the Triton kernels under the interpreter; with and without attention
dropout (the same mask), on blocks (h_dst = the first num_dst rows of h), without bias, with x not
requiring grad, with the attention returned; fp64 gradcheck; the compiled backward writes grad_h
into h's own buffer (the memory property of issue 18); bad input."""
import contextlib

import pytest
import torch

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention import gat_paths
from dgl_accel.core.attention.dropout import make_dropout
from dgl_accel.core.attention.gat import gat_layer
from dgl_accel.core.attention.reference import ref_edge_softmax, ref_gat
from dgl_accel.core.jit import runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit, loop_threads
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_matches_reference

HEADS, DIM, IN = 3, 4, 5
PATHS = ("torch", "compiled", pytest.param("triton", marks=pytest.mark.interpreter))


@contextlib.contextmanager
def on_path(name: str):
    """The vectorised torch code, the numba loops (every size) or the interpreted Triton kernels."""
    if name == "compiled" and not runtime.enabled():
        pytest.skip("numba not installed: no compiled loops")
    with dgl_accel.use_backend("triton" if name == "triton" else "native"), forced_jit(name == "compiled"):
        yield


def graph(block: bool, seed: int = 0, edges: int | None = None) -> TensorGraph:
    """Random edges with repeats, self-loops, a hub and a node without in-edges (or a block, 9 -> 6);
    ``edges``: only the first that many."""
    gen = torch.Generator().manual_seed(seed)
    ns, nd = (9, 6) if block else (10, 10)
    src = torch.cat([torch.randint(0, ns, (40,), generator=gen), torch.zeros(12, dtype=torch.int64), torch.arange(3)])
    dst = torch.cat([torch.randint(0, nd - 1, (40,), generator=gen), torch.ones(12, dtype=torch.int64),
                     torch.arange(3)])
    perm = torch.randperm(src.numel(), generator=gen)[:edges]
    return TensorGraph(src[perm], dst[perm], num_src=ns, num_dst=nd)


def inputs(g, dtype, seed, bias=True):
    x = tst.randn((g.num_src, IN), dtype, seed)
    w = tst.randn((HEADS * DIM, IN), dtype, seed + 1) * 0.5
    al, ar = tst.randn((1, HEADS, DIM), dtype, seed + 2), tst.randn((1, HEADS, DIM), dtype, seed + 3)
    b = tst.randn((HEADS * DIM,), dtype, seed + 4) if bias else None
    return x, w, al, ar, b


def ref_layer(g, x, w, al, ar, b, drop_weight):
    """The unfused composition: fc, the halves, edge softmax (times the dropout weights), sum, bias."""
    h = (x @ w.t()).view(x.shape[0], HEADS, DIM)
    el, er = (h * al).sum(-1), (h[: g.num_dst] * ar).sum(-1)
    out = ref_gat(g.csr("in"), h, el, er, 0.2, drop_weight)
    return out if b is None else out + b.view(1, HEADS, DIM)


def outputs_and_grads(fn, g, x, w, al, ar, b, grad_out, x_grad):
    leaves = [t.detach().clone().requires_grad_(t is not x or x_grad) if t is not None else None
              for t in (x, w, al, ar, b)]
    out = fn(g, *leaves)
    wrt = [t for t in leaves if t is not None and t.requires_grad]
    return (out.detach(),) + torch.autograd.grad(out, wrt, grad_out.to(out.dtype))


CASES = [  # (dropout, block, bias, x requires grad)
    (0.0, False, True, True), (0.3, False, True, True), (0.0, True, False, True), (0.3, True, True, False),
    (0.0, False, False, False),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dropout,block,bias,x_grad", CASES)
def test_layer_equals_the_unfused_composition(path, dropout, block, bias, x_grad):
    g = graph(block)
    x, w, al, ar, b = inputs(g, torch.float32, 11, bias)
    grad_out = tst.randn((g.num_dst, HEADS, DIM), torch.float32, 17)
    drop = make_dropout(dropout, 5, HEADS)
    weight = None if drop is None else drop.weights(torch.arange(g.num_edges), torch.float64)
    with on_path(path):
        ours = outputs_and_grads(lambda g, *t: gat_layer(g, *t, dropout=dropout, seed=5), g, x, w, al, ar, b,
                                 grad_out, x_grad)
    assert len(ours) == 1 + 3 + bias + x_grad

    def reference(x, w, al, ar, b, grad_out):
        return outputs_and_grads(lambda g, *t: ref_layer(g, *t, weight), g, x, w, al, ar, b, grad_out, x_grad)

    assert_matches_reference(ours, reference, x, w, al, ar, b, grad_out)


@pytest.mark.parametrize("path", PATHS)
def test_returned_attention_and_its_gradient(path):
    g = graph(False, seed=3)
    x, w, al, ar, b = inputs(g, torch.float64, 21)
    ga = tst.randn((g.num_edges, HEADS), torch.float64, 22)
    drop = make_dropout(0.4, 9, HEADS)
    leaves = [t.clone().requires_grad_() for t in (x, w, al, ar, b)]
    with on_path(path):
        out, att = gat_layer(g, *leaves, dropout=0.4, seed=9, return_attention=True)
        ours = (att.detach(),) + torch.autograd.grad((out.sum() + (att * ga).sum()), leaves)
    ref_leaves = [t.clone().requires_grad_() for t in (x, w, al, ar, b)]
    h = (ref_leaves[0] @ ref_leaves[1].t()).view(-1, HEADS, DIM)
    src, dst = (t.long() for t in g.edges_by_id())
    s = torch.nn.functional.leaky_relu((h * ref_leaves[2]).sum(-1)[src] + (h * ref_leaves[3]).sum(-1)[dst], 0.2)
    ref_att = ref_edge_softmax(g.csr("in"), s) * drop.weights(torch.arange(g.num_edges), torch.float64)
    ref_out = ref_layer(g, *ref_leaves, drop.weights(torch.arange(g.num_edges), torch.float64))
    ref = (ref_att.detach(),) + torch.autograd.grad(ref_out.sum() + (ref_att * ga).sum(), ref_leaves)
    for a, r in zip(ours, ref):
        torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-10)


def test_bias_of_shape_1_h_d_and_a_second_backward_through_a_retained_graph():
    g = graph(False, seed=8)
    x, w, al, ar, b = (t.requires_grad_() for t in inputs(g, torch.float64, 71))
    b3 = b.detach().view(1, HEADS, DIM).clone().requires_grad_()
    with on_path("compiled" if runtime.enabled() else "torch"):
        out = gat_layer(g, x, w, al, ar, b3)
        first = torch.autograd.grad(out.sum(), (x, w, al, ar, b3), retain_graph=True)
        second = torch.autograd.grad(out.sum(), (x, w, al, ar, b3))  # h was consumed: recomputed from x, w
    assert first[4].shape == (1, HEADS, DIM)
    for a, c in zip(first, second):
        torch.testing.assert_close(a, c)


# compiled (numba compiles its loops: up to 18 s on 2 cores) and triton (the interpreter: 2 to 3 s) slow
@pytest.mark.parametrize("path", quick_first(PATHS))
@pytest.mark.parametrize("block", [False, True])
def test_gradcheck_fp64(path, block):
    g = graph(block, seed=4)
    leaves = [t.requires_grad_() for t in inputs(g, torch.float64, 31)]
    with on_path(path):
        assert torch.autograd.gradcheck(lambda *t: gat_layer(g, *t, dropout=0.25, seed=3), leaves,
                                        fast_mode=path == "triton")


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed: no compiled loops")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("one_thread,edges", [(False, 55), (True, 15), (True, 55)])
def test_compiled_backward_writes_grad_h_into_hs_own_buffer(monkeypatch, dtype, one_thread, edges):
    # The memory property (issue 18): at the backward's peak only the output and h/grad_h exist, so
    # the two passes hand back h's memory as grad_h, never a second N x H x D buffer.  On one thread
    # the one pass (no E x H scratch) is taken where its new grad_h is no larger than that scratch
    # (DIM <= 2 E / N: 55 edges on 10 nodes), else the two passes (15 edges).
    seen = []
    original = gat_paths.backward_compiled_halves

    def spy(in_csr, out_csr, feat, *args, **kw):
        ptr = feat.data_ptr()
        grads = original(in_csr, out_csr, feat, *args, **kw)
        seen.append((ptr, grads[0].data_ptr(), grads[0].untyped_storage().data_ptr()))
        return grads

    monkeypatch.setattr(gat_paths, "backward_compiled_halves", spy)
    g = graph(False, seed=6, edges=edges)
    leaves = [t.requires_grad_() for t in inputs(g, dtype, 41)]
    with on_path("compiled"), loop_threads(one_thread):
        out = gat_layer(g, *leaves)
        h_ptr = out.grad_fn.h.data_ptr()  # the op's private projection
        out.backward(torch.ones_like(out))
    assert len(seen) == 1
    feat_ptr, grad_ptr, storage_ptr = seen[0]
    into_h = not (one_thread and DIM * 10 <= 2 * edges)
    assert feat_ptr == h_ptr and (grad_ptr == h_ptr and storage_ptr == h_ptr) == into_h
    assert all(t.grad is not None for t in leaves)


def test_other_paths_leave_h_alone_and_compiled_path_is_taken(monkeypatch):
    calls = []
    original = gat_paths.backward_compiled_halves
    monkeypatch.setattr(gat_paths, "backward_compiled_halves", lambda *a, **k: calls.append(1) or original(*a, **k))
    g = graph(False, seed=7)
    leaves = [t.requires_grad_() for t in inputs(g, torch.float32, 51)]
    with on_path("torch"):
        gat_layer(g, *leaves).sum().backward()
    assert calls == []
    if runtime.enabled():
        with on_path("compiled"):
            gat_layer(g, *leaves).sum().backward()
        assert calls == [1]


@pytest.mark.parametrize("change,message", [
    (lambda a: {**a, "x": a["x"][:3]}, "expected x of shape"),
    (lambda a: {**a, "weight": a["weight"][:, :2]}, "expected weight of shape"),
    (lambda a: {**a, "attn_r": a["attn_r"][:, :2]}, "expected attn_l and attn_r of one shape"),
    (lambda a: {**a, "bias": a["bias"][:5]}, "expected bias of"),
    (lambda a: {**a, "weight": a["weight"].double()}, "expected weight in x's dtype"),
    (lambda a: {**a, "negative_slope": -1.0}, "negative_slope"),
    (lambda a: {**a, "dropout": 1.5}, "dropout"),
])
def test_bad_input_is_rejected(change, message):
    g = graph(False)
    x, w, al, ar, b = inputs(g, torch.float32, 61)
    args = change(dict(x=x, weight=w, attn_l=al, attn_r=ar, bias=b, negative_slope=0.2, dropout=0.0))
    with pytest.raises(ValueError, match=message):
        gat_layer(g, **args)
