"""``scale(x, alpha) = alpha * x``: the toy op, wired like every real op.

Naming chain: ``_scale_kernel`` (kernels/vector_scale.py) -> :func:`scale_forward` (launcher)
-> :class:`ScaleFunction` (autograd) -> :func:`scale` (public, dispatches triton/native).
"""
from __future__ import annotations

import torch

from . import backend
from .launch import triton_kernel

_BLOCK = 1024
_SUPPORTED = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check(x, alpha) -> None:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected x to be a torch.Tensor (got {type(x).__name__}). Fix: torch.as_tensor(x).")
    if x.dtype not in _SUPPORTED:
        raise ValueError(f"expected x of dtype float32, float16, bfloat16 or float64 (got {x.dtype}). Fix: x.float().")
    if isinstance(alpha, torch.Tensor) or not isinstance(alpha, (int, float)):
        raise ValueError(f"expected alpha to be a Python number (got {type(alpha).__name__}). Fix: float(alpha).")


def scale_forward(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Launch ``_scale_kernel`` (compiled on CUDA, interpreted on CPU) and return a new tensor."""
    x = x.contiguous()  # the kernel walks memory linearly
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        kernel = triton_kernel("vector_scale", "_scale_kernel", x.device)
        kernel[(-(-n // _BLOCK),)](x, out, float(alpha), n, BLOCK=_BLOCK)
    return out


def scale_native(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha if x.dtype in (torch.float32, torch.float64) else (x.float() * alpha).to(x.dtype)


class ScaleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha, path):
        ctx.alpha, ctx.path = alpha, path
        return scale_forward(x, alpha) if path == "triton" else scale_native(x, alpha)

    @staticmethod
    def backward(ctx, grad):
        # d(alpha x)/dx = alpha: the same op on the gradient, on the same path; under
        # create_graph=True through the Function again, so it is differentiable to any order.
        if torch.is_grad_enabled():
            return ScaleFunction.apply(grad, ctx.alpha, ctx.path), None, None
        g = scale_forward(grad, ctx.alpha) if ctx.path == "triton" else scale_native(grad, ctx.alpha)
        return g, None, None


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """``alpha * x`` for float32/float16/bfloat16 tensors on the path chosen by the backend."""
    _check(x, alpha)
    path = backend.choose_path(x)
    backend.record("scale", path, x.device)
    return ScaleFunction.apply(x, alpha, path)
