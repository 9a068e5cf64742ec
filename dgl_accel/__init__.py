"""dgl-accel: Triton-kernel accelerated message passing and sampling for DGL.

Path selection: ``DGL_ACCEL_BACKEND=auto|triton|native`` or :func:`set_backend`.

``import dgl_accel`` needs only torch: the DGL-free core (``dgl_accel.core``) works on machines
where DGL cannot be installed.  The DGL-facing names below (``enable``, ``execution_paths``,
``swap``, ...) and subpackages load on first use.
"""
import importlib as _importlib
import os as _os

import torch as _torch

_os.environ.setdefault("DGLBACKEND", "pytorch")  # DGL otherwise warns and writes ~/.dgl/config.json

from .core.aggregation.locality import use_locality  # noqa: E402
from .core.backend import (  # noqa: E402
    BACKENDS,
    choose_path,
    get_backend,
    prepare_for,
    reset_stats,
    set_backend,
    stats,
    triton_available,
    use_backend,
)
from .policies.attention import choose_attention as _choose_attention  # noqa: E402  (DGL-free)
from .policies.attention import use_attention_path  # noqa: E402

__version__ = "0.1.0"

# name -> module that defines it; loaded on first access (PEP 562) because each needs DGL.
_LAZY = {
    "enable": "patching", "disable": "patching", "enabled": "patching", "is_enabled": "patching",
    "execution_paths": "patching", "swap": "nn.swap", "unswap": "nn.swap",
}
_SUBPACKAGES = ("core", "kernels", "graph", "policies", "functional", "patching", "nn", "sampling", "grouping",
                "data", "distributed", "testing", "pyg")


def __getattr__(name):
    if name in _LAZY:
        return getattr(_importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _SUBPACKAGES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dgl_accel' has no attribute {name!r}")


def __dir__():
    """The lazy names too (PEP 562), so ``dir()`` and tab completion show them before first use."""
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))


def explain(graph, feat_dim: int, dtype=None, *, heads=None, op: str = "gat"):
    """Why dgl-accel picks its neighbour-group size for this graph and feature width, and whether the
    aggregation runs as a locality split (forward and backward views; :func:`use_locality`); with ``heads``,
    which path a drop-in attention layer (``op``: "gat", "gatv2" or "dot") with ``heads`` heads of
    ``feat_dim`` features takes on this graph's device (:mod:`dgl_accel.policies.attention`)."""
    dtype = _torch.float32 if dtype is None else dtype
    if heads is not None:
        return _choose_attention(op, int(heads), int(feat_dim), _torch.empty(0, dtype=dtype, device=graph.device))
    from .grouping import explain as explain_group_size  # needs DGL: loaded on first use

    return explain_group_size(graph, feat_dim, dtype)


# DGL_ACCEL_BACKEND=triton on a CPU-only machine: turn the Triton interpreter on before triton loads.
try:
    prepare_for(get_backend())
except ValueError:
    pass  # a bad DGL_ACCEL_BACKEND value is reported, with its fix, by the first op that reads it

__all__ = ["execution_paths", "enable", "disable", "enabled", "is_enabled", "explain", "swap", "unswap",
           "BACKENDS", "choose_path", "get_backend", "set_backend", "use_backend", "stats", "reset_stats",
           "triton_available", "use_attention_path", "use_locality", "__version__"]
