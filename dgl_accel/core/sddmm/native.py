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
from ..jit.sddmm import sddmm_rows
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
    copy = op in ("copy_lhs", "copy_rhs")
    shapes = (feat_shape, feat_shape) if copy else (tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    bc = broadcast(op, *shapes, torch.device("cpu"))
    if bc.loff is None:
        loff = roff = np.arange(bc.out_len, dtype=np.int64) * bc.red_len
    else:
        loff, roff = bc.loff.numpy(), bc.roff.numpy()
    out = torch.empty((views.num_edges,) + tuple(feat_shape), dtype=one.dtype)
    src, dst = views.edges_by_id()
    sddmm_rows(src.numpy(), dst.numpy(), _flat(lhs), _flat(rhs), loff, roff,
               out.reshape(views.num_edges, bc.out_len).numpy(), op, lhs_target, rhs_target, bc.red_len,
               bc.loff is not None)
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
