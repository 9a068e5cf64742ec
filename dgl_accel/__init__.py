"""dgl-accel: Triton-kernel accelerated message passing and sampling for DGL.

Path selection: ``DGL_ACCEL_BACKEND=auto|triton|native`` or :func:`set_backend`.
"""
import os as _os

_os.environ.setdefault("DGLBACKEND", "pytorch")  # DGL otherwise warns and writes ~/.dgl/config.json

from .core.backend import (  # noqa: E402
    BACKENDS, choose_path, get_backend, reset_stats, set_backend, stats, triton_available, use_backend,
)

from .exec_paths import execution_paths  # noqa: E402
from .patching import disable, enable, enabled, is_enabled  # noqa: E402

__version__ = "0.1.0"


def explain(graph, feat_dim: int, dtype=None):
    """Why dgl-accel picks its neighbour-group size for this graph and feature width."""
    import torch

    from .grouping import explain as _explain

    return _explain(graph, feat_dim, torch.float32 if dtype is None else dtype)


# DGL_ACCEL_BACKEND=triton on a CPU-only machine: turn the Triton interpreter on before triton loads.
try:
    from .core.backend import prepare_for as _prepare_for

    _prepare_for(get_backend())
except ValueError:
    pass  # a bad DGL_ACCEL_BACKEND value is reported, with its fix, by the first op that reads it
__all__ = ["execution_paths", "enable", "disable", "enabled", "is_enabled", "explain", "BACKENDS", "choose_path", "get_backend", "set_backend", "use_backend", "stats",
           "reset_stats", "triton_available", "__version__"]
