"""Shared launcher plumbing: fetch a kernel in the right Triton mode for the tensors' device.

Kernel modules are imported here, on first use, never at module level elsewhere in the core:
importing one imports triton, which fixes the process's Triton mode (compiled or interpreted,
see ``kernels/loader.py``); loading it lazily lets ``DGL_ACCEL_BACKEND=triton`` on a CPU-only
machine switch the interpreter on first, and keeps ``import dgl_accel`` free of triton.
"""
from __future__ import annotations

import importlib

import torch

from ..kernels.loader import kernel as load_kernel  # the loader itself imports no triton

_PACKAGE = __name__.rsplit(".", 2)[0] + ".kernels"  # dgl_accel.kernels


def kernel_module(module: str):
    """``dgl_accel.kernels.<module>`` (for its block-size constants and helpers)."""
    return importlib.import_module(f"{_PACKAGE}.{module}")


def triton_kernel(module: str, name: str, device: torch.device):
    """The ``@triton.jit`` function ``name`` of ``dgl_accel.kernels.<module>``; CPU tensors need the
    interpreter (``DGL_ACCEL_BACKEND=triton`` on CPU), CUDA tensors run compiled kernels."""
    return load_kernel(module, name, need_interpreter=device.type != "cuda")
