"""The native path of the aggregation op: the graph's own CPU kernels (the host library's, when
its views carry one, else compiled loops or torch), plus what we fuse around them: cached degree
scales, fp32 accumulation for half types, the scaled input in a reused per-thread buffer."""
from __future__ import annotations

import torch

from .. import scratch
from ..jit import runtime as jit_runtime
from ..jit.aggregation import scale_rows_bf16
from .scales import acc_dtype
from .views import torch_sddmm


def scaled_rows(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x * scale[:, None]`` written into a buffer reused across calls of this thread: the scaled
    input lives only until the kernel has read it, and a fresh N x F allocation per aggregation
    (forward and backward, every layer) showed up in epoch times.  Never returned to callers."""
    if x.device.type != "cpu" or (torch.is_grad_enabled() and (x.requires_grad or scale.requires_grad)):
        return x * scale[:, None]  # (double backward records this product)
    out = scratch.tensor("gspmm.scaled", x.shape, x.dtype)
    if x.dtype != scale.dtype:  # bf16 rows, fp32 scale: widen, scale, round once (a mixed-dtype mul is 3x slower)
        return scale_bf16(x.contiguous(), scale, out)
    return torch.mul(x, scale[:, None], out=out)


def scale_bf16(x: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` = bf16 rows ``x`` times the fp32 ``scale[:, None]``, rounded once (``out`` may be
    ``x``): one compiled pass over the bits where the loops run, else widen, scale and round."""
    if (jit_runtime.worth(x.numel()) and scale.dtype == torch.float32 and x.is_contiguous()
            and out.is_contiguous()):
        scale_rows_bf16(jit_runtime.bf16_bits(x), scale.contiguous().numpy(), jit_runtime.bf16_bits(out))
        return out
    return out.copy_(x.to(scale.dtype).mul_(scale[:, None]))


def native_spmm(views, direction: str, ufeat, efeat, src_scale, dst_scale, keep_acc: bool = False) -> torch.Tensor:
    """out = dst_scale * (A (src_scale * x)) with A the in-adjacency (``"in"``) or its transpose
    (``"out"``), weighted by ``efeat`` ([E, 1] or [E, F], edge-id order) when given.  Features of a
    dtype the views' kernel sums itself (``views.native_dtypes``: DGL's reads bf16) go to it as they
    are when unweighted, and bf16 with or without weights to the compiled loops of plain-tensor
    views (``views.native_accepts``); other half types are widened to fp32 around the kernel.
    ``keep_acc``: the result in the accumulation dtype (fp32 for half types), not rounded back."""
    native = ufeat.device.type == "cpu" and views.native_accepts(ufeat.dtype, efeat is not None)
    acc = ufeat.dtype if native else acc_dtype(ufeat.dtype)
    x = ufeat.to(acc)
    x = scaled_rows(x, src_scale) if src_scale is not None else x.contiguous()
    w = None if efeat is None else efeat.to(acc_dtype(acc)).contiguous()  # bf16 rows: fp32 weights
    out = views.native_spmm(direction, x, w)
    if dst_scale is not None:
        if out.dtype == dst_scale.dtype:
            out.mul_(dst_scale[:, None])
        elif out.dtype == torch.bfloat16 and out.device.type == "cpu":  # bf16 sums, fp32 scale: round once
            out = scale_bf16(out, dst_scale, out)
        else:
            out = out.to(dst_scale.dtype).mul_(dst_scale[:, None])
    return out.to(acc_dtype(ufeat.dtype) if keep_acc else ufeat.dtype)


def native_edge_grad(views, ufeat, grad_out, src_scale, dst_scale, per_feat: bool, out_dtype,
                     recorded: bool = False) -> torch.Tensor:
    """SDDMM: s_u s_v <x[u], grad[v]> per edge (or the elementwise product), edge-id order.
    ``recorded``: in differentiable torch ops (double backward), not the views' own kernel."""
    acc = acc_dtype(ufeat.dtype)
    x, g = ufeat.to(acc), grad_out.to(acc)
    x = x * src_scale[:, None] if src_scale is not None else x.contiguous()
    g = g * dst_scale[:, None] if dst_scale is not None else g.contiguous()
    out = torch_sddmm(views, x, g, per_feat) if recorded else views.native_sddmm(x, g, per_feat)
    return out.reshape(out.shape[0], x.shape[1] if per_feat else 1).to(out_dtype)
