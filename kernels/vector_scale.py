"""Toy kernel ``out = alpha * x``: the smallest op that walks the full verification path
(interpreter test, AOT compile table, native CPU path) and the template for real kernels."""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def _scale_kernel(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    # int64 offsets: pid * BLOCK overflows int32 past 2^31 elements.
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # fp16/bf16 scale in fp32; fp32/fp64 keep their own precision.
    x = x.to(tl.float64) if x.dtype == tl.float64 else x.to(tl.float32)
    tl.store(out_ptr + offs, (x * alpha).to(out_ptr.dtype.element_ty), mask=mask)


SPECIALISATIONS = [
    Specialisation("vector_scale", "_scale_kernel",
                   {"x_ptr": f"*{t}", "out_ptr": f"*{t}", "alpha": "fp32", "n": "i64", "BLOCK": "constexpr"},
                   {"BLOCK": 1024})
    for t in ("fp32", "fp16", "bf16", "fp64")
]
