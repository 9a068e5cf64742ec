"""Shared launcher plumbing: fetch a kernel in the right Triton mode for the tensors' device."""
from __future__ import annotations

import torch

from .. import backend


def triton_kernel(module: str, name: str, device: torch.device):
    """The ``@triton.jit`` function ``name`` of ``dgl_accel.kernels.<module>``; CPU tensors need the
    interpreter (``DGL_ACCEL_BACKEND=triton`` on CPU), CUDA tensors run compiled kernels."""
    from ..kernels.loader import kernel

    return kernel(module, name, need_interpreter=device.type != "cuda")


def feature_tile(num_feats: int, cap: int = 128) -> int:
    """Power-of-two feature tile covering ``num_feats`` up to ``cap`` columns per program."""
    return max(16, min(cap, 1 << max(0, int(num_feats - 1).bit_length())))
