"""Shared launcher plumbing: fetch a kernel in the right Triton mode for the tensors' device.

Kernel modules are imported here, on first use, never at module level elsewhere in the core:
importing one imports triton, which fixes the process's Triton mode (compiled or interpreted,
see ``kernels/loader.py``); loading it lazily lets ``DGL_ACCEL_BACKEND=triton`` on a CPU-only
machine switch the interpreter on first, and keeps ``import dgl_accel`` free of triton.

Launch recording (``record_launches``): the GPU report (``dgl_accel.gpu_report``) counts which
registered specialisations ran.  Off by default, where it costs one ``is None`` test per kernel
lookup; on, each ``kernel[grid](...)`` call first hands ``(module, name, kernel, args, kwargs)`` to
the recorder.
"""
from __future__ import annotations

import importlib

import torch

from ..kernels.loader import kernel as load_kernel  # the loader itself imports no triton

_PACKAGE = __name__.rsplit(".", 2)[0] + ".kernels"  # dgl_accel.kernels
_recorder: list = [None]  # callable(module, name, kernel, args, kwargs) while recording, else None


def kernel_module(module: str):
    """``dgl_accel.kernels.<module>`` (for its block-size constants and helpers)."""
    return importlib.import_module(f"{_PACKAGE}.{module}")


def triton_kernel(module: str, name: str, device: torch.device):
    """The ``@triton.jit`` function ``name`` of ``dgl_accel.kernels.<module>``; CPU tensors need the
    interpreter (``DGL_ACCEL_BACKEND=triton`` on CPU), CUDA tensors run compiled kernels."""
    fn = load_kernel(module, name, need_interpreter=device.type != "cuda")
    return fn if _recorder[0] is None else RecordedKernel(fn, module, name, _recorder[0])


def record_launches(recorder) -> object:
    """Send every later launch to ``recorder(module, name, kernel, args, kwargs)`` (None: stop);
    returns the previous recorder so callers can restore it."""
    previous, _recorder[0] = _recorder[0], recorder
    return previous


class RecordedKernel:
    """A kernel whose ``[grid](...)`` launches are reported to a recorder before they run."""

    __slots__ = ("fn", "module", "name", "recorder")

    def __init__(self, fn, module: str, name: str, recorder):
        self.fn, self.module, self.name, self.recorder = fn, module, name, recorder

    def __getitem__(self, grid):
        launch = self.fn[grid]

        def run(*args, **kwargs):
            self.recorder(self.module, self.name, self.fn, args, kwargs)
            return launch(*args, **kwargs)

        return run
