"""Toy kernel ``out = alpha * x``: the smallest op that walks the full verification path
(interpreter test, AOT compile table, native CPU path) and the template for real kernels."""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def _scale_kernel(x_ptr, out_ptr, alpha: tl.float64, n, BLOCK: tl.constexpr):
    # alpha is annotated fp64: unannotated, a compiled kernel takes a Python float as fp32 and an fp64
    # x would be scaled by a rounded alpha (2e-7 off on the first GPU run).
    pid = tl.program_id(0)
    # int64 offsets: pid * BLOCK overflows int32 past 2^31 elements.
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # fp16/bf16 scale in fp32 (alpha rounded to fp32, as torch does); fp64 keeps alpha whole.  No cast
    # of alpha in the fp64 branch: the interpreter passes a Python float, and casting one rounds it
    # through fp32 first (triton 3.6).
    if x.dtype == tl.float64:
        y = x * alpha
    else:
        y = x.to(tl.float32) * tl.cast(alpha, tl.float32)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


SPECIALISATIONS = [
    Specialisation("vector_scale", "_scale_kernel",
                   {"x_ptr": f"*{t}", "out_ptr": f"*{t}", "alpha": "fp64", "n": "i64", "BLOCK": "constexpr"},
                   {"BLOCK": 1024})
    for t in ("fp32", "fp16", "bf16", "fp64")
]
