"""Per-dtype tolerances and the comparison helpers kernel tests use.

Two rules:
  * `assert_close`: |actual - expected| <= atol + rtol * |expected| with the table below;
    for comparing against a reference computed in higher precision (or the same algorithm).
  * `assert_matches_reference` (the FlashAttention test rule): a low-precision kernel may be
    at most 2x as wrong, versus an fp64 reference, as plain torch is in the same dtype. This
    scales with the problem (hub rows, cancellation) instead of needing a hand-tuned atol.
"""
from typing import NamedTuple

import torch


class Tolerance(NamedTuple):
    rtol: float
    atol: float


TOLERANCES = {
    # eps 2.2e-16. Kernels reorder sums (atomics, split rows), so bitwise equality is not
    # expected; 1e-9/1e-10 is still ~1e6 x the reordering error of a few-thousand-term sum.
    torch.float64: Tolerance(rtol=1e-9, atol=1e-10),
    # eps 1.2e-7. Measured: reordering a 1100-term N(0,1) sum moves it by ~1.3e-5 absolute
    # (|sum| ~ 100), and hub rows in power_law_graphs have >1024 terms; atol 1e-4 covers
    # cancellation to ~0 in such rows, rtol 1e-5 is ~100 ulp.
    torch.float32: Tolerance(rtol=1e-5, atol=1e-4),
    # 10-bit mantissa: one rounding of the output is up to 4.9e-4 relative. rtol 2e-3 allows
    # ~2 ulp (output rounding plus one rounded intermediate such as a normalised message);
    # atol 1e-3 is 1 ulp at magnitude 1, the scale of strategy features.
    torch.float16: Tolerance(rtol=2e-3, atol=1e-3),
    # 7-bit mantissa: one rounding is up to 3.9e-3 relative; same 2-ulp reasoning -> 1.6e-2
    # (also torch.testing's bf16 rtol); atol 1e-2 ~ 1 ulp at magnitude 1.
    torch.bfloat16: Tolerance(rtol=1.6e-2, atol=1e-2),
}


def tolerance(dtype):
    """(rtol, atol) for a floating dtype; integer/bool dtypes get (0, 0), i.e. exact.

    >>> tolerance(torch.float16)
    Tolerance(rtol=0.002, atol=0.001)
    >>> tolerance(torch.int64)
    Tolerance(rtol=0.0, atol=0.0)
    """
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:
        raise KeyError(f"no tolerance registered for {dtype}")
    return Tolerance(0.0, 0.0)


def _describe(actual, expected):
    return f"dtype={actual.dtype}, shape={tuple(actual.shape)}"


def _abs_err(a, b):
    """|a - b| in float64; equal entries (incl. equal infs) give 0, mismatched NaNs give inf."""
    a, b = a.double(), b.double()
    diff = (a - b).abs()
    diff = torch.where(a == b, torch.zeros_like(diff), diff)
    both_nan = a.isnan() & b.isnan()
    diff = torch.where(both_nan, torch.zeros_like(diff), diff)
    return torch.where(diff.isnan(), torch.full_like(diff, float("inf")), diff)


def _check_shape(actual, expected, msg):
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(f"{msg}shape mismatch: actual {tuple(actual.shape)} "
                             f"vs expected {tuple(expected.shape)} (dtype={actual.dtype})")


def assert_close(actual, expected, dtype=None, msg=""):
    """Assert |actual - expected| <= atol + rtol * |expected| with `tolerance(dtype)`.

    dtype defaults to actual.dtype (the precision the kernel claims). Comparison happens in
    float64, so `expected` may be an fp64 reference. Integer tensors must match exactly.

    >>> assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-6], dtype=torch.float64))
    >>> assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1]), msg="out")
    Traceback (most recent call last):
    ...
    AssertionError: out: 1/2 entries outside rtol=1e-05, atol=0.0001 for torch.float32; max abs err 1.000e-01, ...
    """
    msg = f"{msg}: " if msg else ""
    _check_shape(actual, expected, msg)
    dtype = dtype or actual.dtype
    if actual.numel() == 0:
        return
    if not (actual.dtype.is_floating_point or expected.dtype.is_floating_point):
        if not torch.equal(actual, expected.to(actual.dtype)):
            bad = (actual != expected).sum().item()
            raise AssertionError(f"{msg}{bad} integer entries differ "
                                 f"({_describe(actual, expected)})")
        return
    rtol, atol = tolerance(dtype)
    err = _abs_err(actual, expected)
    allowed = atol + rtol * expected.double().abs()
    bad = err > allowed
    if bad.any():
        i = int((err - allowed).argmax())
        raise AssertionError(
            f"{msg}{int(bad.sum())}/{err.numel()} entries outside rtol={rtol}, atol={atol} "
            f"for {dtype}; max abs err {err.max().item():.3e}, worst at flat index {i}: "
            f"actual {actual.reshape(-1)[i].item()} vs expected {expected.reshape(-1)[i].item()} "
            f"({_describe(actual, expected)})")


def _cast(x, dtype):
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.is_floating_point() else x
    if isinstance(x, (tuple, list)):
        return type(x)(_cast(v, dtype) for v in x)
    return x  # graphs, strings, ints: passed through unchanged


def assert_matches_reference(actual, reference_fn, *inputs, atol=None, msg=""):
    """FlashAttention-style check of a low-precision result.

    ref64 = reference_fn(*inputs cast to float64); ref_same = reference_fn(*inputs) in the
    input dtype (plain torch). Requires
        max|actual - ref64| <= 2 * max|ref_same - ref64| + atol
    with atol defaulting to `tolerance(actual.dtype).atol`. Only floating tensors (also inside
    tuples/lists) are cast; integer tensors, graphs and other arguments pass through.
    reference_fn may return a tensor or a tuple/list of tensors (`actual` then matches it).

    >>> from dgl_accel.testing.reference import ref_scale
    >>> x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float16)
    >>> assert_matches_reference(x * 3, ref_scale, x, 3.0)  # as wrong as fp16 torch itself: passes
    """
    ref64, ref_same = reference_fn(*_cast(inputs, torch.float64)), reference_fn(*inputs)
    if isinstance(actual, (tuple, list)):
        for k, (a, r64, rs) in enumerate(zip(actual, ref64, ref_same, strict=True)):
            _match_one(a, r64, rs, atol, f"{msg}[output {k}]")
        return
    _match_one(actual, ref64, ref_same, atol, msg)


def _match_one(actual, ref64, ref_same, atol, msg):
    msg = f"{msg}: " if msg else ""
    _check_shape(actual, ref64, msg)
    if actual.numel() == 0:
        return
    if atol is None:
        atol = tolerance(actual.dtype).atol
    err = _abs_err(actual, ref64).max().item()
    err_same = _abs_err(ref_same, ref64).max().item()
    bound = 2 * err_same + atol
    if not err <= bound:
        raise AssertionError(
            f"{msg}max|actual - ref64| = {err:.3e} exceeds 2 * max|ref_same - ref64| + atol "
            f"= 2 * {err_same:.3e} + {atol:.1e} = {bound:.3e} ({_describe(actual, ref64)}, "
            f"reference dtype {ref_same.dtype})")


__all__ = ["Tolerance", "TOLERANCES", "tolerance", "assert_close", "assert_matches_reference"]
