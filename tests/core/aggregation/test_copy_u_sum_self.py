"""The copy_u sum with the destination's own row (``dgl_accel.core.aggregation.copy_u_sum_self``) on
plain tensors, without DGL: ``(s x[v] + sum_{u->v} x[u]) / d[v] + b`` against the composed ops
(bit for bit on the native path: the same kernel, DGL's order of operations) and against the pure
torch reference, forward and backward, a learned ``s``, blocks, the Triton fallback, double
backward, and the errors on bad input.  (tests/nn/test_sageconv.py and tests/nn/test_ginconv.py run the
drop-ins that use it against DGL.)"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.copy_u_sum_self import copy_u_sum_self, copy_u_sum_self_reference
from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.reference import ref_gspmm
from dgl_accel.testing.tolerances import assert_close


def composed(g, x, scale, divisor, bias):
    return copy_u_sum_self_reference(g.num_dst, lambda t: aggregate(g, "copy_u", "sum", t), x, scale, divisor, bias)


def torch_reference(e, x, scale, divisor, bias):
    out = ref_gspmm((e.src.long(), e.dst.long(), e.num_dst), "copy_u", "sum", x, None) + scale * x[: e.num_dst]
    out = out if divisor is None else out / divisor.unsqueeze(-1)
    return out if bias is None else out + bias


@st.composite
def cases(draw):
    e = draw(st.one_of(tst.edge_lists(max_nodes=40, max_edges=120), tst.block_edge_lists(max_dst=16, max_edges=120)))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    x = draw(tst.features(e.num_src, dim=st.integers(1, 9), dtypes=(dtype,)))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    divisor = None
    if draw(st.booleans()):
        divisor = torch.bincount(e.dst.long(), minlength=e.num_dst).to(dtype) + 1  # SAGE gcn: in-degree + 1
    bias = torch.randn(x.shape[1], generator=gen, dtype=dtype) if draw(st.booleans()) else None
    kind = draw(st.sampled_from(["one", "number", "learned"]))
    scale = {"one": 1.0, "number": 1.0 + draw(st.floats(-0.9, 0.9)),
             "learned": torch.tensor([1.0 + draw(st.floats(-0.9, 0.9))], dtype=torch.float32)}[kind]
    return e, x, scale, divisor, bias


def leaves(x, scale, bias):
    x = x.detach().clone().requires_grad_()
    scale = scale.detach().clone().requires_grad_() if isinstance(scale, torch.Tensor) else scale
    bias = None if bias is None else bias.detach().clone().requires_grad_()
    return x, scale, bias


def grads_of(out, x, scale, bias, grad_out):
    wrt = [t for t in (x, scale, bias) if isinstance(t, torch.Tensor)]
    return torch.autograd.grad(out, wrt, grad_out, allow_unused=True)


@given(case=cases())
def test_native_path_equals_the_composed_ops_bit_for_bit(case):
    """The fused path changes where the results are written, not one rounding: forward and every
    gradient equal the composed ops' exactly (the same sum kernel, the same order)."""
    e, x, scale, divisor, bias = case
    g = tst.tensor_graph(e)
    grad_out = torch.randn(e.num_dst, x.shape[1], dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    dgl_accel.reset_stats()
    with dgl_accel.use_backend("native"):
        a = leaves(x, scale, bias)
        out = copy_u_sum_self(g, a[0], self_scale=a[1], divisor=divisor, bias=a[2])
        got = grads_of(out, *a, grad_out)
        b = leaves(x, scale, bias)
        ref = composed(g, b[0], b[1], divisor, b[2])
        expected = grads_of(ref, *b, grad_out)
    assert dgl_accel.stats()["copy_u_sum_self"] == {"native-cpu": 1}
    assert out.shape == (e.num_dst, x.shape[1]) and out.dtype == x.dtype
    assert torch.equal(out, ref)
    for k, (p, q) in enumerate(zip(got, expected)):
        assert p.dtype == q.dtype and torch.equal(p, q), f"gradient {k}"


@pytest.mark.interpreter
@given(case=cases())
def test_matches_the_torch_reference_on_both_backends(case):
    e, x, scale, divisor, bias = case
    g = tst.tensor_graph(e)
    grad_out = torch.randn(e.num_dst, x.shape[1], dtype=x.dtype, generator=torch.Generator().manual_seed(2))
    b = leaves(x, scale, bias)
    expected = grads_of(torch_reference(e, b[0], b[1], divisor, b[2]), *b, grad_out)
    for name in ("native", "triton"):
        a = leaves(x, scale, bias)
        with dgl_accel.use_backend(name):
            out = copy_u_sum_self(g, a[0], self_scale=a[1], divisor=divisor, bias=a[2])
            got = grads_of(out, *a, grad_out)
        assert_close(out.detach(), torch_reference(e, x, scale, divisor, bias).detach(), msg=name)
        for k, (p, q) in enumerate(zip(got, expected)):
            assert_close(p, q, msg=f"{name} gradient {k}")


@settings(max_examples=10)
@given(e=st.one_of(tst.edge_lists(min_nodes=1, max_nodes=8, max_edges=20), tst.block_edge_lists(max_dst=5,
                                                                                               max_edges=20)))
def test_double_backward(e):
    """A recorded backward (create_graph=True) is differentiable again in x, s and the bias."""
    g = tst.tensor_graph(e)
    if e.num_src == 0:
        return
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(e.num_src, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    scale = torch.tensor([1.3], dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, generator=gen, requires_grad=True)
    divisor = torch.bincount(e.dst.long(), minlength=e.num_dst).double() + 1
    with dgl_accel.use_backend("native"):
        assert torch.autograd.gradgradcheck(lambda x_, s_, b_: copy_u_sum_self(g, x_, self_scale=s_, divisor=divisor,
                                                                               bias=b_), (x, scale, bias))


def test_backward_keeps_no_copy_of_x_for_a_number_scale():
    """With a number for s, the backward needs neither x nor its own row: x is not saved (the layer
    before may free its output), while a learned s keeps x for its gradient."""
    g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    with dgl_accel.use_backend("native"):
        out = copy_u_sum_self(g, x, self_scale=1.0)
        assert all(t is None or t.data_ptr() != x.data_ptr() for t in out.grad_fn.saved_tensors)
        learned = copy_u_sum_self(g, x, self_scale=torch.tensor([1.5], requires_grad=True))
        assert any(t is not None and t.data_ptr() == x.data_ptr() for t in learned.grad_fn.saved_tensors)


@pytest.mark.parametrize("bad, needle", [
    (dict(x=torch.randn(3)), "2-D float tensor"),
    (dict(x=torch.randn(4, 2)), "a row of x per source"),
    (dict(divisor=torch.ones(3, 1)), "divisor of shape [3]"),
    (dict(bias=torch.ones(3)), "bias of shape [2]"),
    (dict(self_scale=torch.ones(2)), "one-element tensor"),
    (dict(self_scale="1"), "number or a one-element tensor"),
])
def test_bad_input_gets_a_clear_error(bad, needle):
    g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)
    args = dict(x=torch.randn(3, 2), self_scale=1.0, divisor=None, bias=None) | bad
    with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        copy_u_sum_self(g, args.pop("x"), **args)


@pytest.mark.parametrize("scale", [1.0, 1.3, "learned"])
@pytest.mark.parametrize("divisor, bias", [(False, False), (True, True), (False, True)])
def test_bf16_features_round_once_in_the_composed_dtype(scale, divisor, bias):
    """bf16 features (autocast's) on the compiled loops (a graph above their work threshold): fp32
    sums with the own row, divided and biased in fp32, rounded once, in the dtype the composed ops
    give (a learned s of shape [1] or a float bias promotes it to fp32); forward and backward
    within one bf16 rounding of fp32's."""
    from dgl_accel.core.jit import runtime
    gen = torch.Generator().manual_seed(5)
    n, m, f = 400, 4000, 16
    src, dst = torch.randint(0, n, (m,), generator=gen), torch.randint(0, n, (m,), generator=gen)
    g = TensorGraph(src, dst, num_nodes=n)
    x = torch.randn(n, f, generator=gen).to(torch.bfloat16)
    scale = torch.tensor([1.2]) if scale == "learned" else scale
    divisor = torch.bincount(dst, minlength=n).float() + 1 if divisor else None
    bias = torch.randn(f, generator=gen) if bias else None
    grad_out = torch.randn(n, f, generator=gen)
    dgl_accel.reset_stats()
    with dgl_accel.use_backend("native"):
        a = leaves(x, scale, bias)
        out = copy_u_sum_self(g, a[0], self_scale=a[1], divisor=divisor, bias=a[2])
        got = grads_of(out, *a, grad_out.to(out.dtype))
        b = leaves(x, scale, bias)
        ref = composed(g, b[0], b[1], divisor, b[2])
    assert dgl_accel.stats().get("copy_u_sum_self", {}) == ({"native-cpu": 1} if runtime.enabled() else {})
    assert out.dtype == ref.dtype  # the composed ops' promotion
    c = leaves(x.float(), scale, bias)
    exact = (torch.zeros(n, f).index_add_(0, dst, c[0][src]) + c[1] * c[0])
    exact = exact if divisor is None else exact / divisor.to(torch.bfloat16).float().unsqueeze(-1)
    exact = exact if bias is None else exact + c[2]
    want = grads_of(exact, *c, grad_out.to(out.dtype).float())  # the gradient autograd hands in
    assert ((out.detach().float() - exact.detach()).abs() <= 2.0 ** -8 * exact.detach().abs() + 1e-6).all()
    for k, (p, q) in enumerate(zip(got, want)):
        assert torch.allclose(p.float(), q, rtol=2.0 ** -7, atol=1e-5 * q.abs().max()), k
