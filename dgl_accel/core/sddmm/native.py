"""The native path of ``gsddmm``: compiled loops (``core/jit/sddmm.py`` for the op, the aggregation's
``rows_spmm`` over the CSR's edge ids for the backward's scatter) for fp32/fp64 CPU tensors where
numba runs and the work is worth it; otherwise vectorised torch: ``index_select`` gathers of both
operands by target, the op with torch broadcasting (fp32 math for fp16/bf16), ``index_add``
scatters.  While autograd records (the double backward), always the torch ops, which it can
differentiate."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..aggregation.scales import acc_dtype
from ..jit import runtime as jit_runtime
from ..jit.aggregation import rows_spmm
from ..jit.sddmm import sddmm_grad_rows, sddmm_rows
from .checks import broadcast, broadcast_feat_shape

HALF = (torch.float16, torch.bfloat16)
COMPILED = (torch.float32, torch.float64)


def _compiled(work: int, *tensors) -> bool:
    """Whether the compiled loops run: CPU fp32/fp64, enough work, numba present, nothing recorded."""
    return (not torch.is_grad_enabled() and jit_runtime.worth(work)
            and all(t.device.type == "cpu" and t.dtype in COMPILED for t in tensors))


def gather(views, x: torch.Tensor, target: str) -> torch.Tensor:
    """``x``'s row for every edge (edge-id order): ``x`` itself for target ``e``."""
    if target == "e":
        return x
    src, dst = views.edges_by_id()
    return x.index_select(0, (src if target == "u" else dst).long())


def _flat(x: torch.Tensor) -> np.ndarray:
    return x.detach().contiguous().reshape(x.shape[0], math.prod(x.shape[1:])).numpy()


def _compiled_sddmm(views, op, lhs, rhs, lhs_target, rhs_target, feat_shape) -> torch.Tensor:
    one = lhs if lhs is not None else rhs
    lhs, rhs = (lhs if lhs is not None else one), (rhs if rhs is not None else one)
    loff, roff, out_len, red, bcast = _offsets(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]), feat_shape)
    out = torch.empty((views.num_edges,) + tuple(feat_shape), dtype=one.dtype)
    src, dst = views.edges_by_id()
    sddmm_rows(src.numpy(), dst.numpy(), _flat(lhs), _flat(rhs), loff, roff,
               out.reshape(views.num_edges, out_len).numpy(), op, lhs_target, rhs_target, red, bcast)
    return out


def _offsets(op: str, lshape: tuple, rshape: tuple, feat_shape: tuple):
    """(loff, roff, out_len, red, broadcasting) as numpy for the compiled loops."""
    copy = op in ("copy_lhs", "copy_rhs")
    bc = broadcast(op, *((feat_shape, feat_shape) if copy else (lshape, rshape)), torch.device("cpu"))
    if bc.loff is None:
        offs = np.arange(bc.out_len, dtype=np.int64) * bc.red_len
        return offs, offs, bc.out_len, bc.red_len, False
    return bc.loff.numpy(), bc.roff.numpy(), bc.out_len, bc.red_len, True


def compiled_operand_grad(views, op: str, side: int, grad: torch.Tensor, lhs, rhs, targets: tuple, shapes: tuple):
    """The gradient of the operand ``side`` (0: lhs, 1: rhs; ``shapes`` both operands' shapes) in one
    compiled pass: d op, the sum over the broadcast and onto its rows fused, no per-edge tensor; or
    None where the compiled loops do not run (then the caller composes it from torch ops)."""
    x, y = (lhs, rhs) if side == 0 else (rhs, lhs)
    x_target, y_target = targets if side == 0 else targets[::-1]
    used = [t for t, use in ((y, op in ("mul", "dot", "div")), (x, op == "div" and side == 1)) if use]
    red = shapes[0][-1] if op == "dot" else 1
    if not _compiled(grad.numel() * red, grad, *used):
        return None
    x_shape = shapes[side]
    feat_shape = tuple(grad.shape[1:])
    lshape, rshape = (feat_shape if shape is None else tuple(shape[1:]) for shape in shapes)  # None: copy ops
    loff, roff, _, red, bcast = _offsets(op, lshape, rshape, feat_shape)
    dtype = used[0].dtype if used else grad.dtype
    g = _flat(grad.to(dtype))
    if x_target == "e":
        indptr, eids = views.cached("sddmm.edge_rows", lambda: (np.arange(views.num_edges + 1, dtype=np.int64),
                                                                np.arange(views.num_edges, dtype=np.int64)))
    else:
        rows = views.csr("out" if x_target == "u" else "in")
        indptr, eids = rows.indptr.numpy(), rows.eids.numpy()
    out = torch.empty(x_shape, dtype=dtype)
    src, dst = views.edges_by_id()
    sddmm_grad_rows(indptr, eids, src.numpy(), dst.numpy(), g, _flat(x) if x is not None else g,
                    _flat(y) if y is not None else g, *((loff, roff) if side == 0 else (roff, loff)),
                    out.reshape(x_shape[0], math.prod(x_shape[1:])).numpy(), op, side, y_target, red, bcast)
    return out


def native_sddmm(views, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> torch.Tensor:
    """Per-edge ``op`` of the normalised operands (one rank; None where unused), [E, *feat_shape]."""
    used = [t for t in (lhs, rhs) if t is not None]
    if op in ("copy_lhs", "copy_rhs"):
        feat_shape = tuple(used[0].shape[1:])
    else:
        feat_shape = broadcast_feat_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    red = lhs.shape[-1] if op == "dot" else 1
    if _compiled(views.num_edges * math.prod(feat_shape) * red, *used):
        return _compiled_sddmm(views, op, lhs, rhs, lhs_target, rhs_target, feat_shape)
    if op == "copy_lhs" or op == "copy_rhs":
        x = gather(views, lhs, lhs_target) if op == "copy_lhs" else gather(views, rhs, rhs_target)
        return x.clone() if x is lhs or x is rhs else x  # a new tensor, as DGL's
    dtype = lhs.dtype
    x, y = gather(views, lhs, lhs_target), gather(views, rhs, rhs_target)
    if dtype in HALF:
        x, y = x.float(), y.float()
    if op == "dot":
        out = (x * y).sum(-1, keepdim=True)
    else:
        out = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](x, y)
    return out.to(dtype)


def native_scatter(views, values: torch.Tensor, target: str) -> torch.Tensor:
    """Sum per-edge ``values`` [E, *] onto the rows of ``target`` (``u``: sources, ``v``: destinations)."""
    num_rows = views.num_src if target == "u" else views.num_dst
    if _compiled(values.numel(), values):  # one pass per row over the CSR, in parallel
        rows = views.csr("out" if target == "u" else "in")
        out = torch.empty((num_rows,) + tuple(values.shape[1:]), dtype=values.dtype)
        rows_spmm(rows.indptr.numpy(), rows.eids.numpy(), _flat(values), None, None,
                  out.reshape(num_rows, math.prod(values.shape[1:])).numpy())
        return out
    src, dst = views.edges_by_id()
    acc = acc_dtype(values.dtype)
    out = values.new_zeros((num_rows,) + tuple(values.shape[1:]), dtype=acc)
    out = out.index_add(0, (src if target == "u" else dst).long(), values.to(acc))
    return out.to(values.dtype)
