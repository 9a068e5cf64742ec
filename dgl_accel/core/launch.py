"""Shared launcher plumbing: fetch a kernel in the right Triton mode for the tensors' device."""
from __future__ import annotations

import torch


def triton_kernel(module: str, name: str, device: torch.device):
    """The ``@triton.jit`` function ``name`` of ``dgl_accel.kernels.<module>``; CPU tensors need the
    interpreter (``DGL_ACCEL_BACKEND=triton`` on CPU), CUDA tensors run compiled kernels."""
    from ..kernels.loader import kernel

    return kernel(module, name, need_interpreter=device.type != "cuda")
