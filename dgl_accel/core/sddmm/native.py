"""The native path of ``gsddmm`` in vectorised torch: ``index_select`` gathers of both operands by
target, the op with torch broadcasting (fp32 math for fp16/bf16), and the backward's scatter of
per-edge gradients onto nodes with ``index_add``.  Every function is differentiable (the double
backward of both paths runs here)."""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype

HALF = (torch.float16, torch.bfloat16)


def gather(views, x: torch.Tensor, target: str) -> torch.Tensor:
    """``x``'s row for every edge (edge-id order): ``x`` itself for target ``e``."""
    if target == "e":
        return x
    src, dst = views.edges_by_id()
    return x.index_select(0, (src if target == "u" else dst).long())


def native_sddmm(views, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> torch.Tensor:
    """Per-edge ``op`` of the normalised operands (one rank; None where unused), [E, *feat_shape]."""
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
    src, dst = views.edges_by_id()
    rows = views.num_src if target == "u" else views.num_dst
    acc = acc_dtype(values.dtype)
    out = values.new_zeros((rows,) + tuple(values.shape[1:]), dtype=acc)
    out = out.index_add(0, (src if target == "u" else dst).long(), values.to(acc))
    return out.to(values.dtype)
