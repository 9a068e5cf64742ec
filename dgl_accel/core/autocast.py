"""``torch.autocast`` for the core's fused ops: each follows the rule autocast applies to the ops it replaces.

The dense product (:func:`dgl_accel.core.dense.dense`, ``nn.Linear``'s work) and the fused attention
ops (GAT's layer and attention, GATv2, dot product: what ``scaled_dot_product_attention`` is to torch)
are ops that autocast runs in its lower precision.  Under an active autocast on their device, their
float inputs (fp32, fp16, bf16) are cast to the autocast dtype and they run with autocast off inside,
so the forward and the backward see one dtype; autograd casts each gradient back to its input's
dtype.  A call with an fp64 input runs in the dtypes it was given (autocast never lowers fp64).
Aggregations (``gspmm``) are not on autocast's list: they run in the dtype they get (low precision
accumulated in fp32), as DGL's and PyG's do.

A tensor that feeds several lowered products (SAGE's ``fc_neigh`` and ``fc_self`` on one feature
tensor; the relations of a ``HeteroGraphConv`` sharing a node type's features) is cast once:
:func:`cast_for_products` returns the cast, shared within :func:`shared_casts`, with a gradient path
per use that widens as autocast's own cast would, so the input's gradient sums in its own dtype.

Works on torch 2.2 (``torch.is_autocast_cpu_enabled``) and on torch >= 2.4 (``torch.get_autocast_dtype``).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

import torch

_CASTABLE = (torch.float32, torch.float16, torch.bfloat16)


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast runs its lower-precision ops in on ``device_type`` ("cpu", "cuda") now, or None
    when autocast is off there.

    >>> autocast_dtype("cpu") is None
    True
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     autocast_dtype("cpu")
    torch.bfloat16
    """
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: one API for every device type
        try:
            on = torch.is_autocast_enabled(device_type)
        except (TypeError, RuntimeError):  # a device type autocast does not know
            return None
        return torch.get_autocast_dtype(device_type) if on else None
    if device_type == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    if device_type == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    return None


def _cast(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.dtype in _CASTABLE and value.dtype != dtype else value
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _floats(values):
    for value in values:
        if isinstance(value, (tuple, list)):
            yield from _floats(value)
        elif isinstance(value, torch.Tensor) and value.is_floating_point():
            yield value


def lower_precision(op):
    """Decorate a core op whose work autocast would run in lower precision (a product, an attention):
    under autocast on its inputs' device, its float tensor arguments (also inside tuples and lists, one
    level) are cast to the autocast dtype and the op runs with autocast off; with an fp64 input, or with
    autocast off, it runs as is.

    >>> @lower_precision
    ... def product(a, b):
    ...     return a @ b
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     product(torch.ones(2, 3), torch.ones(3, 1)).dtype
    torch.bfloat16
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     product(torch.ones(2, 3, dtype=torch.float64), torch.ones(3, 1, dtype=torch.float64)).dtype
    torch.float64
    """
    @functools.wraps(op)
    def run(*args, **kwargs):
        floats = list(_floats((*args, *kwargs.values())))
        dtype = autocast_dtype(floats[0].device.type) if floats else None
        if dtype is None or any(t.dtype == torch.float64 for t in floats):
            return op(*args, **kwargs)
        device_type = floats[0].device.type
        args = tuple(_cast(a, dtype) for a in args)
        kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
        with torch.autocast(device_type, enabled=False):
            return op(*args, **kwargs)

    return run


_SHARED = contextvars.ContextVar("dgl_accel_shared_casts", default=None)


@contextlib.contextmanager
def shared_casts():
    """Within it, :func:`cast_for_products` casts each tensor (and version) once: a container's
    forward whose modules read the same features (``HeteroGraphConv``'s relations)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


class _SharedCast(torch.autograd.Function):
    """One use of a shared cast: forward the cast (``low``), backward widen the gradient to ``x``'s
    dtype, as each of autocast's own casts does: uses' gradients add up in ``x``'s dtype."""

    @staticmethod
    def forward(ctx, x, low):
        ctx.dtype = x.dtype
        return low.view_as(low)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.dtype), None


def cast_for_products(x: torch.Tensor) -> torch.Tensor:
    """``x`` as the autocast-lowered products will read it: cast to the autocast dtype of its device
    when autocast is on there and ``x`` is fp32 (else ``x`` itself); within :func:`shared_casts` each
    tensor is cast once.  Only for tensors whose every use below is such a product (``nn.Linear``):
    the numbers are then autocast's own, forward and backward.

    >>> x = torch.ones(2, 3, requires_grad=True)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16), shared_casts():
    ...     a, b = cast_for_products(x), cast_for_products(x)
    >>> a.dtype, a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    (torch.bfloat16, True)
    >>> (a.float().sum() + b.float().sum()).backward(); x.grad.dtype, x.grad[0, 0].item()
    (torch.float32, 2.0)
    """
    if x.dtype != torch.float32:
        return x
    dtype = autocast_dtype(x.device.type)
    if dtype is None:
        return x
    cache = _SHARED.get()
    key = (id(x), x._version, dtype)
    hit = None if cache is None else cache.get(key)
    if hit is not None and hit[0] is x:
        low = hit[1]
    else:
        low = x.detach().to(dtype)
        if cache is not None:
            cache[key] = (x, low)  # x kept: its id stays unique while the entry lives
    return _SharedCast.apply(x, low) if x.requires_grad and torch.is_grad_enabled() else low


def widened_output(t: torch.Tensor) -> torch.Tensor:
    """An attention drop-in's output in fp32 where autocast made it half: what the peers give there
    (PyG's GAT layers, and DGL's where it runs: fp32 scores times half features promote), and what
    DGL's examples reduce (``.mean(1)`` over the heads of a half tensor takes 16 ms on torch 2.2's CPU
    at 13,752 x 1 x 16, 0.14 ms in fp32).  Unchanged outside autocast."""
    if t.dtype in (torch.float16, torch.bfloat16) and autocast_dtype(t.device.type) is not None:
        return t.float()
    return t


__all__ = ["autocast_dtype", "lower_precision", "shared_casts", "cast_for_products", "widened_output"]
