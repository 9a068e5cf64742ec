"""Triton launchers of ``kernels/sddmm.py``: compiled on CUDA tensors, interpreted on CPU tensors.
Operands are made contiguous here; outputs are new tensors."""
from __future__ import annotations

import math

import torch

from ..launch import kernel_module, triton_kernel
from .checks import broadcast

_NO_OFFSETS: dict = {}  # device -> a one-element int32 tensor standing for the unused offset tables


def _no_offsets(device: torch.device) -> torch.Tensor:
    key = str(device)
    if key not in _NO_OFFSETS:
        _NO_OFFSETS[key] = torch.zeros(1, dtype=torch.int32, device=device)
    return _NO_OFFSETS[key]


def sddmm_forward(views, op: str, lhs, rhs, lhs_target: str, rhs_target: str, feat_shape: tuple) -> torch.Tensor:
    """Per-edge ``op`` of the normalised operands (one rank; None where unused), [E, *feat_shape]."""
    mod = kernel_module("sddmm")
    lhs = lhs.contiguous() if lhs is not None else None
    rhs = rhs.contiguous() if rhs is not None else None
    lhs, rhs = (lhs if lhs is not None else rhs), (rhs if rhs is not None else lhs)  # copy ops: one operand
    num_edges = views.num_edges
    out = torch.empty((num_edges,) + tuple(feat_shape), dtype=lhs.dtype, device=lhs.device)
    lhs_len, rhs_len = math.prod(lhs.shape[1:]), math.prod(rhs.shape[1:])
    if op in ("copy_lhs", "copy_rhs"):
        bc = broadcast(op, tuple(feat_shape), tuple(feat_shape), lhs.device)  # no offset tables
    else:
        bc = broadcast(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]), lhs.device)
    if num_edges == 0 or bc.out_len == 0:
        return out
    if bc.red_len == 0:  # dot over an empty last dimension
        return out.zero_()
    src, dst = views.edges_by_id()
    bcast = bc.loff is not None
    loff, roff = (bc.loff, bc.roff) if bcast else (_no_offsets(lhs.device),) * 2  # unused: int32 as registered
    targets = mod.TARGETS
    if op == "dot":
        block_e, block_k = mod.dot_tile(bc.red_len)
        kernel = triton_kernel("sddmm", "_sddmm_dot_kernel", lhs.device)
        kernel[(-(-num_edges // block_e), bc.out_len)](
            src, dst, lhs, rhs, loff, roff, out, num_edges, bc.out_len, lhs_len, rhs_len, bc.red_len,
            LHS_T=targets.index(lhs_target), RHS_T=targets.index(rhs_target), BCAST=bcast,
            BLOCK_E=block_e, BLOCK_K=block_k, num_warps=mod.NUM_WARPS)
        return out
    block_e, block_f = mod.tile(bc.out_len)
    kernel = triton_kernel("sddmm", "_sddmm_kernel", lhs.device)
    kernel[(-(-num_edges // block_e), -(-bc.out_len // block_f))](
        src, dst, lhs, rhs, loff, roff, out, num_edges, bc.out_len, lhs_len, rhs_len,
        OP=mod.OPS.index(op), LHS_T=targets.index(lhs_target), RHS_T=targets.index(rhs_target), BCAST=bcast,
        BLOCK_E=block_e, BLOCK_F=block_f, num_warps=mod.NUM_WARPS)
    return out


def segment_sum(views, values: torch.Tensor, target: str) -> torch.Tensor:
    """Sum per-edge ``values`` [E, *] onto the rows of ``target`` (``u``: sources over the out-CSR,
    ``v``: destinations over the in-CSR), in one pass per row without atomics."""
    rows = views.csr("out" if target == "u" else "in")
    values = values.contiguous()
    width = math.prod(values.shape[1:])
    out = torch.empty((rows.num_rows,) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
    if rows.num_rows == 0 or width == 0:
        return out
    if rows.num_edges == 0:
        return out.zero_()
    mod = kernel_module("sddmm")
    block_e, block_f = mod.segment_tile(width)
    kernel = triton_kernel("sddmm", "_segment_sum_kernel", values.device)
    kernel[(rows.num_rows, -(-width // block_f))](rows.indptr, rows.eids, values, out, width,
                                                  BLOCK_E=block_e, BLOCK_F=block_f, num_warps=mod.NUM_WARPS)
    return out
