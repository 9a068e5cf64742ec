"""Which path runs an op: compiled Triton kernels, the Triton interpreter, or the native CPU path.

One switch, ``DGL_ACCEL_BACKEND=auto|triton|native`` (or :func:`set_backend` / :func:`use_backend`):

* ``auto``   CUDA tensors run compiled Triton kernels, CPU tensors run the native path
             (vectorised torch / DGL / scipy).
* ``triton`` always the Triton kernels; on CPU tensors they run under the Triton interpreter
             (``TRITON_INTERPRET=1`` semantics), which is how CI executes every kernel.
* ``native`` always the native path (torch / DGL primitives), also for CUDA tensors.
"""
from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Iterator

import torch

from ..kernels.loader import prefer_interpreter  # imports no triton: safe before the mode is chosen

BACKENDS = ("auto", "triton", "native")
ENV_VAR = "DGL_ACCEL_BACKEND"

_lock = threading.Lock()
# whether dynamo is tracing the current call (torch.compiler.is_compiling; torch 2.2 has only dynamo's own)
tracing = getattr(getattr(torch, "compiler", None), "is_compiling", None) or torch._dynamo.is_compiling
_override: str | None = None  # set_backend()/use_backend(); None means "read the env var"
_stats: collections.Counter = collections.Counter()


def _validate(name, source: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise ValueError(
            f"expected {source} to be one of {', '.join(BACKENDS)} (got {name!r}). "
            f"Fix: set {ENV_VAR}=auto (default), triton or native, "
            f"or call dgl_accel.set_backend('auto')."
        )
    return name.strip().lower()


def get_backend() -> str:
    """The backend in force: the last :func:`set_backend`, else ``$DGL_ACCEL_BACKEND``, else auto."""
    if _override is not None:
        return _override
    return _validate(os.environ.get(ENV_VAR, "auto") or "auto", ENV_VAR)


def set_backend(name: str | None) -> None:
    """Force a path for every later op; ``None`` goes back to reading ``$DGL_ACCEL_BACKEND``."""
    global _override
    _override = None if name is None else _validate(name, "the backend")
    prepare_for(get_backend())


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    """``with dgl_accel.use_backend("native"): ...`` restores the previous choice on exit."""
    global _override
    new = _validate(name, "the backend")
    prepare_for(new)
    with _lock:
        previous, _override = _override, new
    try:
        yield new
    finally:
        _override = previous


def triton_available() -> bool:
    try:
        # optional, and importing it fixes the process's Triton mode: only on demand
        import triton  # noqa: F401
    except Exception:  # ImportError, or a broken install that fails at import
        return False
    return True


def common_device(*tensors: torch.Tensor) -> torch.device:
    """The one device all given tensors live on; a clear error if they disagree."""
    devices = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    if len(devices) > 1:
        names = ", ".join(sorted(str(d) for d in devices))
        raise ValueError(
            f"expected all tensors on one device (got {names}). "
            f"Fix: move graph and features to the same device, e.g. g = g.to(feat.device)."
        )
    return devices.pop() if devices else torch.device("cpu")


def choose_path(*tensors: torch.Tensor) -> str:
    """``"triton"`` or ``"native"`` for an op on these tensors, under the backend in force."""
    device = common_device(*tensors)
    backend = get_backend()
    if backend == "native":
        return "native"
    if backend == "triton":
        if not triton_available():
            raise ValueError(
                f"expected an importable triton for {ENV_VAR}=triton (got an ImportError). "
                f"Fix: pip install --no-deps 'triton>=3.0' or use {ENV_VAR}=native."
            )
        return "triton"
    return "triton" if device.type == "cuda" and triton_available() else "native"


def interpreted(device: torch.device) -> bool:
    """Triton kernels run interpreted on non-CUDA tensors, and everywhere in an interpreted process."""
    return device.type != "cuda" or os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on")


def prepare_for(name: str) -> None:
    """Forcing ``triton`` on a machine without CUDA means interpreted kernels: switch the
    interpreter on now, before anything imports triton (see kernels/loader.py for why)."""
    if name == "triton" and not torch.cuda.is_available():
        prefer_interpreter()


def path_label(path: str, device: torch.device) -> str:
    """Human-readable name of what ran: triton-compiled, triton-interpreter or native-cpu/cuda."""
    if path == "triton":
        return "triton-interpreter" if interpreted(device) else "triton-compiled"
    return f"native-{device.type}"


def record(op: str, path: str, device: torch.device) -> None:
    """Count one call of ``op`` on ``path`` (see :func:`stats`)."""
    with _lock:
        _stats[(op, path_label(path, device))] += 1


def record_fallthrough(op: str, reason: str) -> None:
    """Count one call of ``op`` that we handed to DGL unchanged, with the reason.  Not while dynamo
    traces (it cannot enter the lock, and a traced count would tell the trace, not the calls)."""
    if tracing():
        return
    with _lock:
        _stats[(op, f"fallthrough: {reason}")] += 1


def stats() -> dict:
    """Calls per (op, path) since the last :func:`reset_stats`, e.g. ``{"scale": {"native-cpu": 3}}``.

    Calls handed to DGL are labelled ``"fallthrough: <reason>"``; while ``dgl_accel.enable()`` is on
    that is every aggregation DGL runs itself, e.g. ``{"copy_u_udf": {"fallthrough: udf reduce": 1}}``
    for SAGEConv's LSTM reducer (``dgl_accel.patching``)."""
    out: dict = {}
    with _lock:
        for (op, label), n in sorted(_stats.items()):
            out.setdefault(op, {})[label] = n
    return out


def reset_stats() -> None:
    with _lock:
        _stats.clear()
