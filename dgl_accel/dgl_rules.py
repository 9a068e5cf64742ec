"""DGL's own rules for ``dgl.ops.gspmm`` (dgl 2.1.0), checked before a routed call runs dgl-accel.

Under ``dgl_accel.enable()`` a call DGL rejects must be rejected too, with DGL's exception type
(code written while enabled must keep working when it is turned off), and a call DGL accepts must
give DGL's result shape.  The rules below restate what DGL checks, in its order
(``dgl/_sparse_ops.py::_gspmm``, ``infer_broadcast_shape``, ``src/array/check.h``,
``src/array/kernel.cc``): operand dtypes equal, feature shapes broadcastable, one row per source
node / edge, floating-point features (no float16 on CPU).  :class:`DGLRuleError` is a ``DGLError``
(what DGL raises for each of them) and a ``ValueError`` (what dgl-accel raises for bad input).
"""
from __future__ import annotations

from .core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import torch
from dgl import DGLError

__all__ = ["DGLRuleError", "gspmm_out_shape"]

_KERNEL_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


class DGLRuleError(DGLError, ValueError):
    """Input DGL's gspmm rejects; raised under ``dgl_accel.enable()`` where DGL would raise."""


def _broadcast(op: str, lhs: tuple, rhs: tuple) -> tuple:
    """DGL's ``infer_broadcast_shape``: numpy broadcasting of the feature shapes of a binary op."""
    if op == "copy_lhs":
        return lhs
    if op == "copy_rhs":
        return rhs
    width = max(len(lhs), len(rhs))
    a, b = (1,) * (width - len(lhs)) + lhs, (1,) * (width - len(rhs)) + rhs
    if any(x != y and x != 1 and y != 1 for x, y in zip(a, b)):
        raise DGLRuleError(
            f"expected node and edge feature shapes that broadcast, as DGL requires (got node features "
            f"[*, {', '.join(map(str, lhs))}] and edge features [E, {', '.join(map(str, rhs))}]). Fix: give the "
            f"edge weights shape [E, 1] (one weight per edge), [E, *feature shape] or, with heads, [E, H, 1] "
            f"for [N, H, F] features.")
    return tuple(max(x, y) for x, y in zip(a, b))


def gspmm_out_shape(g, op: str, lhs, rhs) -> tuple:
    """The shape DGL's ``gspmm(g, op, reduce, lhs, rhs)`` returns on a one-edge-type graph, or a
    :class:`DGLRuleError` where DGL raises.  Tensors on other devices are not judged here.

    >>> import dgl, torch
    >>> g = dgl.graph(([0, 1], [1, 2]))
    >>> gspmm_out_shape(g, "mul", torch.ones(3, 4), torch.ones(2, 1, 1))  # [E, 1, 1] weights: [N, 1, F]
    (3, 1, 4)
    """
    use_lhs, use_rhs = op != "copy_rhs", op != "copy_lhs"
    # DGL rewrites div as mul by 1.0 / rhs before any check: integer weights become floating point
    rhs_dtype = torch.result_type(rhs, 1.0) if op == "div" else rhs.dtype if use_rhs else None
    if use_lhs and use_rhs and lhs.dtype != rhs_dtype:
        raise DGLRuleError(
            f"expected node and edge features of one dtype, as DGL requires (got node features {lhs.dtype}, "
            f"edge features {rhs_dtype}). Fix: convert one of them, e.g. w = w.to(x.dtype).")
    lhs_shape = tuple(lhs.shape[1:]) if use_lhs else ()
    rhs_shape = tuple(rhs.shape[1:]) if use_rhs else ()
    # dgl.ops.spmm.reshape_lhs_rhs then _gspmm: a 1-D operand is a feature of size 1
    padded_lhs = lhs_shape if not use_lhs or lhs.dim() > 1 else (1,)
    padded_rhs = rhs_shape if not use_rhs or rhs.dim() > 1 else (1,)
    feat = _broadcast(op, padded_lhs, padded_rhs)
    if use_lhs and use_rhs and lhs.dim() == 1 and rhs.dim() == 1:
        feat = ()  # DGL squeezes the size-1 feature back when both operands were 1-D
    elif op == "copy_lhs" and lhs.dim() == 1 or op == "copy_rhs" and rhs.dim() == 1:
        feat = ()
    for name, t, rows, what in (("node", lhs if use_lhs else None, g.num_src_nodes(), "source node"),
                                ("edge", rhs if use_rhs else None, g.num_edges(), "edge")):
        if t is not None and t.shape[0] != rows:
            raise DGLRuleError(
                f"expected {name} features with {rows} rows, one per {what}, as DGL requires (got {t.shape[0]}). "
                f"Fix: pass a tensor with one row per {what} of this graph"
                f"{' (for a block: block.srcdata features)' if name == 'node' else ''}.")
    data = lhs if use_lhs else rhs
    on_cpu = data.device.type == "cpu"
    if data.dtype not in _KERNEL_DTYPES or (data.dtype == torch.float16 and on_cpu):
        allowed = "bfloat16, float32 or float64" if on_cpu else "float16, bfloat16, float32 or float64"
        raise DGLRuleError(
            f"expected {allowed} features on {data.device.type}, as DGL's kernels require (got {data.dtype}). "
            f"Fix: convert them, e.g. x = x.float().")
    return (g.num_dst_nodes(),) + feat
