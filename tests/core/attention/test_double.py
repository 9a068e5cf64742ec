"""Double backward of the fused attention ops (``core/attention/double.py``): under
``create_graph=True`` their backward differentiates a composition of torch ops, so gradient
penalties work.  For GAT (el/er, the attention vectors inside, the whole layer; with dropout),
GATv2 and the dot product, returning the attention or not, on the native path and the Triton path
(interpreted): ``gradgradcheck`` in fp64, and the first-order gradients taken with
``create_graph=True`` equal the fused backward's."""
import pytest
import torch

import dgl_accel
from dgl_accel.core.attention.dot import dot_attention
from dgl_accel.core.attention.gat import gat_attention, gat_layer
from dgl_accel.core.attention.gatv2 import gatv2_attention
from dgl_accel.testing import attention_variants as av
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first


def _graph():
    return av.star(14, extra=3)  # a row of 11 in-edges, three of one, rows without


def _inputs(g, op: str):
    n, m, heads, dim = g.num_src, g.num_dst, 2, 3
    r = lambda *shape, seed: tst.randn(shape, torch.float64, seed).requires_grad_()  # noqa: E731
    if op == "gat":
        return r(n, heads, dim, seed=1), r(n, heads, seed=2), r(m, heads, seed=3)
    if op == "gat_vectors":
        return r(n, heads, dim, seed=1), r(heads, dim, seed=2), r(heads, dim, seed=3)
    if op == "gat_layer":
        return r(n, 4, seed=1), r(heads * dim, 4, seed=2), r(heads, dim, seed=3), r(heads, dim, seed=4), \
            r(heads * dim, seed=5)
    if op == "gatv2":
        return r(n, heads, dim, seed=1), r(m, heads, dim, seed=2), r(heads, dim, seed=3)
    return r(m, heads, dim, seed=1), r(n, heads, dim, seed=2), r(n, heads, 4, seed=3)  # dot: q, k, val


def _op(g, op: str, attention: bool):
    kw = {"return_attention": attention}
    calls = {
        "gat": lambda f, a, b: gat_attention(g, f, a, b, 0.2, dropout=0.3, seed=11, **kw),
        "gat_vectors": lambda f, a, b: gat_attention(g, f, attn=(a, b), dropout=0.3, seed=11, **kw),
        "gat_layer": lambda *t: gat_layer(g, *t, dropout=0.3, seed=11, **kw),
        "gatv2": lambda *t: gatv2_attention(g, *t, 0.2, **kw),
        "dot": lambda *t: dot_attention(g, *t, 0.7, **kw),
    }
    return calls[op]


OPS = ["gat", "gat_vectors", "gat_layer", "gatv2", "dot"]


@pytest.mark.parametrize("backend", quick_first(["native", "triton"]))
@pytest.mark.parametrize("op", OPS)
def test_gradgradcheck(op, backend):
    g = _graph()
    with dgl_accel.use_backend(backend):
        fn = _op(g, op, attention=op in ("gat", "dot"))
        assert torch.autograd.gradgradcheck(lambda *t: fn(*t), _inputs(g, op), fast_mode=True)


@pytest.mark.parametrize("backend", quick_first(["native", "triton"]))
@pytest.mark.parametrize("op", OPS)
def test_gradients_with_create_graph_equal_the_fused_backward(op, backend):
    g = _graph()
    inputs = _inputs(g, op)
    with dgl_accel.use_backend(backend):
        out = _op(g, op, attention=False)(*inputs)
        grad_out = tst.randn(tuple(out.shape), torch.float64, 9)
        fused = torch.autograd.grad(out, inputs, grad_out, retain_graph=True)
        composed = torch.autograd.grad(out, inputs, grad_out, create_graph=True)
    # every gradient but the layer bias's (grad_out summed: no input in it) is itself differentiable
    assert all(c.requires_grad for c in (composed[:-1] if op == "gat_layer" else composed))
    for a, b in zip(fused, composed):
        torch.testing.assert_close(a, b.detach(), rtol=1e-10, atol=1e-12)


def test_a_gradient_penalty_trains():
    """What a user writes: the loss plus the squared norm of its gradient, then backward."""
    g = _graph()
    fs, fd, attn = _inputs(g, "gatv2")
    out = gatv2_attention(g, fs, fd, attn)
    (grad_fs,) = torch.autograd.grad(out.square().sum(), fs, create_graph=True)
    (out.sum() + grad_fs.square().sum()).backward()
    assert attn.grad is not None and torch.isfinite(attn.grad).all() and attn.grad.abs().sum() > 0
