"""The fused dense op of the drop-in layers (``DenseFunction``: x @ W + b, ReLU): forward and every
gradient match plain torch autograd (FlashAttention rule against float64), with oneDNN on and off,
with the weight gradient split into row chunks, and with its backward restricted to given rows."""
import pytest
import torch

from dgl_accel.core import dense, machine
from dgl_accel.core.dense import DenseFunction
from dgl_accel.testing.plans import FixedRowsPlan
from dgl_accel.testing.tolerances import assert_matches_reference


def _reference(x, w, b, relu, upstream):
    """(out, dx, dw, db) of act(x @ w + b) by torch autograd, in the inputs' dtype."""
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    b = None if b is None else b.detach().requires_grad_()
    out = x @ w if b is None else torch.addmm(b, x, w)
    out = torch.relu(out) if relu else out
    grads = torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], upstream)
    return (out.detach(),) + tuple(grads)


def _ours(x, w, b, relu, upstream, plan=None):
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    b = None if b is None else b.detach().requires_grad_()
    out = DenseFunction.apply(x, w, b, relu, plan, 0)
    grads = torch.autograd.grad(out, [t for t in (x, w, b) if t is not None], upstream)
    return (out.detach(),) + tuple(grads)


@pytest.fixture(params=[True, False], ids=["onednn", "torch"])
def onednn(request, monkeypatch):
    monkeypatch.setenv("DGL_ACCEL_ONEDNN", "1" if request.param else "0")
    if request.param and not dense.onednn_enabled():
        pytest.skip("oneDNN's fused linear is not available in this torch build")
    monkeypatch.setattr(dense, "ONEDNN_MIN_ENTRIES", 0)  # the small test inputs take oneDNN too
    return request.param


@pytest.mark.parametrize("rows, fin, fout", [(1, 3, 2), (37, 19, 5), (16389, 16, 64)])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_and_gradients_match_torch(onednn, rows, fin, fout, relu, bias):
    gen = torch.Generator().manual_seed(rows + fin)
    x, w = torch.randn(rows, fin, generator=gen), torch.randn(fin, fout, generator=gen)
    b = torch.randn(fout, generator=gen) if bias else None
    upstream = torch.randn(rows, fout, generator=gen)
    assert_matches_reference(_ours(x, w, b, relu, upstream), _reference, x, w, b, relu, upstream)


@pytest.mark.parametrize("relu", [True, False])
def test_backward_restricted_to_rows_equals_full_where_the_gradient_lives_there(onednn, relu):
    """With the upstream gradient zero outside ``rows`` (what execution paths guarantee), the
    restricted backward gives the full gradients exactly where they can be nonzero, and zeros."""
    gen = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(300, 12, generator=gen), torch.randn(12, 70, generator=gen), torch.randn(70, generator=gen)
    rows = torch.randperm(300, generator=gen)[:90].sort().values
    upstream = torch.zeros(300, 70)
    upstream[rows] = torch.randn(90, 70, generator=gen)
    full = _reference(x, w, b, relu, upstream)
    ours = _ours(x, w, b, relu, upstream, plan=FixedRowsPlan(rows))
    for got, want in zip(ours, full):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    outside = torch.ones(300, dtype=torch.bool)
    outside[rows] = False
    assert torch.all(ours[1][outside] == 0)


def test_double_backward_goes_through_torch(onednn):
    """create_graph=True: the gradients are themselves differentiable (torch ops recorded)."""
    x = torch.randn(20, 4, requires_grad=True)
    w = torch.randn(4, 3, requires_grad=True)
    out = DenseFunction.apply(x, w, None, False, None, 0)
    (gx,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
    (gw,) = torch.autograd.grad(gx.sum(), w)
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (gxr,) = torch.autograd.grad((xr @ wr).pow(2).sum(), xr, create_graph=True)
    (gwr,) = torch.autograd.grad(gxr.sum(), wr)
    torch.testing.assert_close(gw.double(), gwr, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("vendor, setting, expected", [
    ("GenuineIntel", "", False), ("AuthenticAMD", "", True), ("", "", True),
    ("GenuineIntel", "1", True), ("AuthenticAMD", "0", False)])
def test_onednn_by_default_only_where_mkl_has_no_fast_path(monkeypatch, vendor, setting, expected):
    """MKL takes its AVX-512 kernels on Intel CPUs only: there the products stay on addmm unless
    DGL_ACCEL_ONEDNN=1 asks for oneDNN; elsewhere oneDNN unless DGL_ACCEL_ONEDNN=0."""
    if not dense._onednn_works():
        pytest.skip("oneDNN's fused linear is not available in this torch build")
    monkeypatch.setattr(machine, "_vendor", vendor)
    monkeypatch.setenv("DGL_ACCEL_ONEDNN", setting)
    assert dense.onednn_enabled() is expected


def test_weight_gradient_in_linear_form_equals_x_transposed_times_g():
    """weight_grads computes x^T g as (g^T x)^T (nn.Linear's form): the same [in, out] values."""
    gen = torch.Generator().manual_seed(5)
    x, g = torch.randn(500, 37, dtype=torch.float64, generator=gen), torch.randn(500, 9, dtype=torch.float64,
                                                                                  generator=gen)
    grad_w, grad_b = dense.weight_grads(x, g, True)
    assert grad_w.shape == (37, 9)
    torch.testing.assert_close(grad_w, x.t() @ g, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad_b, g.sum(0))
