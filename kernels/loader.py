"""Import kernel modules in the process's Triton mode: compiled (CUDA) or interpreted (any device).

Triton's mode is process-wide and fixed early: ``@triton.jit`` reads ``TRITON_INTERPRET`` when a
function is decorated (ours and triton.language's own @jit helpers such as ``tl.zeros``), and
running the interpreter rewrites ``triton.language`` builtins in place, after which the same
process cannot compile for a GPU.  So we never mix modes in one process: the first launch picks
the mode (interpreted when it needs CPU tensors and nothing chose otherwise), and a later request
for the other mode gets a clear error.  The AOT check (``check.py``) runs in a process of its own.
"""
from __future__ import annotations

import importlib
import os
import sys
import threading

_lock = threading.Lock()


def _env_interpret():
    value = os.environ.get("TRITON_INTERPRET")
    return None if value is None else value.strip().lower() in ("1", "true", "on", "yes")


def prefer_interpreter() -> None:
    """Turn the interpreter on for this process if Triton has not been imported yet and nobody set
    ``TRITON_INTERPRET``; a no-op otherwise.  Called where CPU tensors will need the kernels."""
    with _lock:
        if _env_interpret() is None and "triton" not in sys.modules:
            os.environ["TRITON_INTERPRET"] = "1"


def _round_bf16_like_gpus() -> None:
    """The Triton 3.x interpreter converts fp32/fp64 -> bf16 by truncating the mantissa, while
    GPUs (LLVM fptrunc) round to nearest even; bf16 results would then be up to 1 ulp worse on
    CPU than on the GPU they stand in for.  Route those casts through torch's RTNE conversion."""
    # lazy: this module must not import triton before the mode is chosen (see prefer_interpreter)
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder, "_dgl_accel_rtne_bf16", False):
        return
    original = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if dst_type.scalar == tl.bfloat16 and src.dtype.scalar in (tl.float32, tl.float64):
            rounded = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16)
            return interpreter.TensorHandle(rounded.view(torch.int16).numpy().view(np.uint16), tl.bfloat16)
        return original(self, src, dst_type)

    builder.cast_impl = cast_impl
    builder._dgl_accel_rtne_bf16 = True


def process_interprets() -> bool:
    """Whether this process's ``@triton.jit`` functions are interpreted (decided at first import)."""
    from triton.runtime.interpreter import InterpretedFunction  # lazy: see _round_bf16_like_gpus

    from . import vector_scale  # any of our kernel modules shows the mode they were built in

    return isinstance(vector_scale._scale_kernel, InterpretedFunction)


_interpreted = [0]  # kernels fetched for the interpreter in this process (interpreted_fetches)


def interpreted_fetches() -> int:
    """How many kernels this process has fetched to run under the interpreter (one per launch):
    the test suites check that every test that ran one is marked ``interpreter``."""
    return _interpreted[0]


def kernel(module: str, name: str, need_interpreter: bool):
    """``dgl_accel.kernels.<module>.<name>``; ``need_interpreter`` says the tensors live off-GPU,
    where only the interpreter can run the kernel."""
    if need_interpreter:
        prefer_interpreter()
        _interpreted[0] += 1
    fn = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    if need_interpreter and not process_interprets():
        raise ValueError(
            "expected the Triton interpreter for kernels on CPU tensors (got a process whose triton "
            "was imported in compiled mode). Fix: start Python with DGL_ACCEL_BACKEND=triton or "
            "TRITON_INTERPRET=1 in the environment, move the tensors to CUDA, or use "
            "dgl_accel.set_backend('native')."
        )
    if need_interpreter or process_interprets():
        _round_bf16_like_gpus()
    return fn
