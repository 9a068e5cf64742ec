"""Toy kernel through the three checks: interpreter vs reference, native path, autograd.
(The AOT compile of the same kernel is in test_kernel_check.py.)"""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.vector_scale import scale
from dgl_accel.testing.reference import ref_scale
from dgl_accel.testing.tensors import features
from dgl_accel.testing.tolerances import assert_matches_reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@given(x=st.integers(0, 3000).flatmap(lambda n: features(n, dim=st.integers(1, 3), dtypes=DTYPES)),
       alpha=st.floats(-4, 4, allow_nan=False, width=32))
@pytest.mark.interpreter
def test_scale_matches_reference_on_both_paths(x, alpha):
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out = scale(x, alpha)
        assert out.dtype == x.dtype and out.shape == x.shape
        assert_matches_reference(out, lambda t: ref_scale(t, alpha), x, msg=name)


def test_scale_does_not_touch_its_input(path):
    x = torch.arange(10.0)[::2]
    before = x.clone()
    out = scale(x, -2.0)
    assert torch.equal(x, before) and torch.equal(out, before * -2.0)
    assert dgl_accel.stats()["scale"] == {("native-cpu" if path == "native" else "triton-interpreter"): 1}


def test_scale_backward(path):
    x = torch.randn(100, dtype=torch.float64, requires_grad=True)
    with dgl_accel.use_backend("native"):  # gradcheck in fp64 on the native path
        assert torch.autograd.gradcheck(lambda t: scale(t, 1.5), (x,))
    y = torch.randn(257, requires_grad=True)
    (g,) = torch.autograd.grad(scale(y, 1.5).sum(), y)
    assert torch.allclose(g, torch.full_like(y, 1.5))


@pytest.mark.parametrize("bad, match", [
    (lambda: scale([1.0, 2.0], 2.0), r"expected x to be a torch.Tensor \(got list\)"),
    (lambda: scale(torch.ones(3, dtype=torch.int64), 2.0), r"expected x of dtype .* \(got torch.int64\)"),
    (lambda: scale(torch.ones(3), torch.tensor(2.0)), r"expected alpha to be a Python number \(got Tensor\)"),
])
def test_scale_bad_input(bad, match, path):
    with pytest.raises(ValueError, match=match):
        bad()


def test_float_scalar_arguments_carry_their_registered_type():
    # A compiled kernel types a bare Python float argument as fp32; the interpreter keeps it float64,
    # so only the GPU shows the difference (the first GPU run: fp64 scale 2e-7 off, every PPR estimate
    # off its CPU twin).  A scalar registered as anything but fp32 must say so in the signature.
    import importlib
    import inspect

    from dgl_accel.kernels.registry import specialisations

    checked = 0
    for spec in specialisations():
        kernel = getattr(importlib.import_module(f"dgl_accel.kernels.{spec.module}"), spec.kernel)
        params = inspect.signature(getattr(kernel, "fn", kernel)).parameters
        for name, ty in spec.signature.items():
            if ty[:2] in ("fp", "bf"):  # a float scalar (pointers start with '*')
                ann = params[name].annotation
                assert (str(ann) if ann is not inspect.Parameter.empty else "fp32") == ty, (spec.kernel, name)
                checked += 1
    assert checked >= 3 * 2  # scale's alpha, extrema's fill, the PPR push's alpha and keep (per variant)
