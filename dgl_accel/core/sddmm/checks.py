"""Argument checks of ``gsddmm`` and DGL's shape rules, before any kernel runs.

DGL's rules (``dgl.ops.gsddmm`` and ``dgl._sparse_ops._gsddmm``): for a binary op, operands of
different rank get size-1 dimensions inserted after the first (``[N, 3, 1]`` with ``[E, 5, 3, 4]``
reads as ``[N, 1, 3, 1]``); a 1-D operand gets a trailing size-1 dimension; the feature shapes
broadcast as numpy's do (``dot`` needs equal last dimensions and reduces them to 1); the result
loses its last dimension when every operand used was 1-D.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..aggregation.checks import FLOAT_DTYPES, describe

OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
TARGETS = ("u", "v", "e")
_TARGET_NAMES = {"u": "source nodes", "v": "destination nodes", "e": "edges"}


class Operands(NamedTuple):
    """The operands in DGL's normalised form: ``lhs``/``rhs`` (None where the op does not read it)
    of one rank, the result's feature shape and whether the caller's result drops its last dim."""

    lhs: torch.Tensor | None
    rhs: torch.Tensor | None
    feat_shape: tuple
    squeeze: bool


def uses(op: str) -> tuple[bool, bool]:
    """(reads lhs, reads rhs) for ``op``."""
    return op != "copy_rhs", op != "copy_lhs"


def broadcast_feat_shape(op: str, lshape: tuple, rshape: tuple) -> tuple:
    """The result's feature shape from two feature shapes of one rank (DGL's ``infer_broadcast_shape``);
    ValueError where DGL raises."""
    if op == "dot" and lshape[-1] != rshape[-1]:
        raise ValueError(f"expected lhs and rhs of one last dimension for op 'dot' (got feature shapes "
                         f"{list(lshape)} and {list(rshape)}). Fix: dot reduces the last dimension; make it equal.")
    for a, b in zip(lshape, rshape):
        if a != b and a != 1 and b != 1:
            raise ValueError(f"expected feature shapes that broadcast (numpy's rule) (got {list(lshape)} and "
                             f"{list(rshape)}). Fix: give the dimension that differs size 1 in one operand.")
    out = tuple(max(a, b) for a, b in zip(lshape, rshape))
    return out[:-1] + (1,) if op == "dot" else out


def _check_operand(name: str, x, target: str, rows: int, device: torch.device) -> None:
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"expected {name} to be a float32, float16, bfloat16 or float64 tensor (got {describe(x)}). "
                         f"Fix: {name}.float().")
    if x.dim() < 1 or x.shape[0] != rows:
        raise ValueError(f"expected {name} of shape [{rows}, ...], one row per {_TARGET_NAMES[target][:-1]} "
                         f"({name}_target={target!r}) (got {list(x.shape)}). Fix: pass {_TARGET_NAMES[target]} "
                         f"data, or set {name}_target to where this data lives.")
    if x.device != device:
        raise ValueError(f"expected {name} on the graph's device {device} (got {x.device}). "
                         f"Fix: {name}.to({str(device)!r}).")


def target_rows(views, target: str) -> int:
    return {"u": views.num_src, "v": views.num_dst, "e": views.num_edges}[target]


def check_gsddmm(views, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> Operands:
    """Check the arguments and return the operands normalised by DGL's rules (see the module doc)."""
    if op not in OPS:
        raise ValueError(f"expected op to be one of {', '.join(OPS)} (got {op!r}). "
                         f"Fix: e.g. op='add' for u_add_v, op='dot' for u_dot_v.")
    for name, t in (("lhs_target", lhs_target), ("rhs_target", rhs_target)):
        if t not in TARGETS:
            raise ValueError(f"expected {name} to be 'u' (source), 'v' (destination) or 'e' (edge) (got {t!r}). "
                             f"Fix: {name}='u'.")
    use_l, use_r = uses(op)
    if use_l:
        _check_operand("lhs", lhs, lhs_target, target_rows(views, lhs_target), views.device)
    if use_r:
        _check_operand("rhs", rhs, rhs_target, target_rows(views, rhs_target), views.device)
    if use_l and use_r and lhs.dtype != rhs.dtype:
        raise ValueError(f"expected lhs and rhs of one dtype (got {lhs.dtype} and {rhs.dtype}). "
                         f"Fix: rhs.to(lhs.dtype).")
    if use_l and use_r and lhs.dim() != rhs.dim():  # DGL inserts size-1 dims after the first
        rank = max(lhs.dim(), rhs.dim())
        lhs = lhs.reshape((lhs.shape[0],) + (1,) * (rank - lhs.dim()) + tuple(lhs.shape[1:]))
        rhs = rhs.reshape((rhs.shape[0],) + (1,) * (rank - rhs.dim()) + tuple(rhs.shape[1:]))
    squeeze = (not use_l or lhs.dim() == 1) and (not use_r or rhs.dim() == 1)
    lhs = lhs.unsqueeze(-1) if use_l and lhs.dim() == 1 else lhs
    rhs = rhs.unsqueeze(-1) if use_r and rhs.dim() == 1 else rhs
    if not use_r:
        feat_shape = tuple(lhs.shape[1:])
    elif not use_l:
        feat_shape = tuple(rhs.shape[1:])
    else:
        feat_shape = broadcast_feat_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    return Operands(lhs if use_l else None, rhs if use_r else None, feat_shape, squeeze)


class Broadcast(NamedTuple):
    """How the kernels read both operands for one output feature ``f`` (flattened): at element
    offsets ``loff[f]``/``roff[f]`` of the operands' rows (None: ``f * red_len`` for both)."""

    out_len: int   # output features per edge (flattened; for dot: without the reduced last dim)
    red_len: int   # dot: length of the reduced last dim; 1 otherwise
    loff: torch.Tensor | None
    roff: torch.Tensor | None


_broadcasts: dict = {}  # (op, lhs shape, rhs shape, device) -> Broadcast: a few entries per model


def _offsets(shape: tuple, out: tuple, scale: int) -> torch.Tensor:
    return (torch.arange(math.prod(shape), dtype=torch.int64).reshape(shape).expand(out).reshape(-1) * scale)


def broadcast(op: str, lshape: tuple, rshape: tuple, device: torch.device) -> Broadcast:
    """The offset tables of a binary op on feature shapes of one rank (cached per shapes and device)."""
    key = (op, lshape, rshape, str(device))
    if key not in _broadcasts:
        if op == "dot":
            red, lshape, rshape = lshape[-1], lshape[:-1], rshape[:-1]
        else:
            red = 1
        out = tuple(max(a, b) for a, b in zip(lshape, rshape))
        offs = None, None
        if not (lshape == rshape == out):
            offs = tuple(_offsets(s, out, red).to(torch.int32).to(device) for s in (lshape, rshape))
        _broadcasts[key] = Broadcast(math.prod(out), red, *offs)
    return _broadcasts[key]
