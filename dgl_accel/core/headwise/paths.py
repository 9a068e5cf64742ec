"""One CSR pass of the head-wise aggregation on each path, and the pure-torch reference.

``out[r, f]`` = the sum over row r's entries k of ``x[col_k, f]`` (op ``copy_e``: col = the edge id)
or ``x[col_k, f] * w[eids[k], (f // R) % K]`` (``u_mul_e``), fp32 accumulation (fp64 for fp64
inputs), the result in x's dtype, 0 in rows without entries.  Naming chain:
``_headwise_fwd_kernel`` (kernels/headwise.py) -> :func:`headwise_forward` (launcher);
:func:`headwise_compiled` (numba, ``core/jit/headwise.py``) where numba runs and the row view has
at least ``jit.runtime.MIN_WORK`` entries, else :func:`headwise_native` (torch gathers and
index_add) -> :func:`run_rows` -> ``function.HeadwiseFunction``.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..jit import headwise as loops
from ..jit import runtime as jit_runtime
from ..launch import kernel_module, triton_kernel
from ..sampling.arrays import np64

__all__ = ["headwise_forward", "headwise_native", "headwise_compiled", "run_rows", "headwise_reference"]

_OP_CODE = {"copy_e": 0, "u_mul_e": 1}


def _cols(rows: Structure, op: str) -> torch.Tensor:
    return rows.eids if op == "copy_e" else rows.indices


def headwise_forward(rows: Structure, op: str, x: torch.Tensor, w: torch.Tensor | None,
                     head_len: int) -> torch.Tensor:
    """Launch ``_headwise_fwd_kernel``: out [R, F] in x's dtype; ``x`` [N, F] (edge features for
    copy_e), ``w`` [E, K] or None."""
    x = x.contiguous()
    num_rows, num_feat = rows.num_rows, x.shape[1]
    out = torch.empty((num_rows, num_feat), dtype=x.dtype, device=x.device)
    if num_rows and num_feat:
        mod = kernel_module("headwise")
        block_e, block_f = mod.feature_tile(num_feat)
        heads = 1 if w is None else w.shape[1]
        w = x if w is None else w.contiguous()  # copy_e never reads w
        kernel = triton_kernel("headwise", "_headwise_fwd_kernel", x.device)
        kernel[(num_rows, -(-num_feat // block_f))](
            rows.indptr, _cols(rows, op), rows.eids, x, w, out, num_feat, heads, max(head_len, 1),
            OP=_OP_CODE[op], BLOCK_E=block_e, BLOCK_F=block_f, num_warps=mod.NUM_WARPS)
    return out


def _entry_rows(rows: Structure) -> torch.Tensor:
    degrees = rows.indptr[1:] - rows.indptr[:-1]
    return torch.repeat_interleave(torch.arange(rows.num_rows, device=rows.indptr.device), degrees)


def headwise_native(rows: Structure, op: str, x: torch.Tensor, w: torch.Tensor | None,
                    head_len: int) -> torch.Tensor:
    """:func:`headwise_forward` in vectorised torch: every entry's message (CSR order), index_add."""
    acc = acc_dtype(x.dtype)
    num_feat, num_entries = x.shape[1], rows.num_edges
    out = torch.zeros((rows.num_rows, num_feat), dtype=acc, device=x.device)
    if num_entries and num_feat:
        m = x.index_select(0, _cols(rows, op).long()).to(acc)
        if op == "u_mul_e":
            heads = w.shape[1]
            wk = w.index_select(0, rows.eids.long()).to(acc)
            m = (m.reshape(num_entries, -1, heads, head_len) * wk[:, None, :, None]).reshape(num_entries, num_feat)
        out.index_add_(0, _entry_rows(rows), m)
    return out.to(x.dtype)


def headwise_compiled(rows: Structure, op: str, x: torch.Tensor, w: torch.Tensor | None,
                      head_len: int) -> torch.Tensor:
    """:func:`headwise_native` as one compiled pass per row (CPU tensors; half types in fp32)."""
    acc = acc_dtype(x.dtype)
    xa = x.detach().to(acc).contiguous().numpy()
    wa = (torch.ones((1, 1), dtype=acc) if w is None else w.detach().to(acc).contiguous()).numpy()
    out = loops.headwise_rows(np64(rows.indptr), np64(_cols(rows, op)), np64(rows.eids), xa, wa, _OP_CODE[op],
                              max(head_len, 1))
    return torch.from_numpy(out).to(x.dtype)


def run_rows(path: str, rows: Structure, op: str, x: torch.Tensor, w: torch.Tensor | None,
             head_len: int) -> torch.Tensor:
    """The pass on ``path`` (``triton``: the kernel; ``native``: compiled loop or torch ops)."""
    if path == "triton":
        return headwise_forward(rows, op, x, w, head_len)
    if x.device.type == "cpu" and x.shape[1] and jit_runtime.worth(rows.num_edges):
        return headwise_compiled(rows, op, x, w, head_len)
    return headwise_native(rows, op, x, w, head_len)


def headwise_reference(src: torch.Tensor, dst: torch.Tensor, num_dst: int, op: str, reduce: str,
                       ufeat: torch.Tensor | None, efeat: torch.Tensor) -> torch.Tensor:
    """The aggregation by torch broadcasting in edge-id order (clear, not fast; differentiable):
    messages ``ufeat[src] * efeat`` (DGL's padding of the lower-rank operand) or ``efeat``
    (copy_e), index_add onto ``dst``, divided by the in-degree (at least 1) for ``mean``."""
    if op == "copy_e":
        m = efeat
    else:
        x, w = ufeat[src.long()], efeat
        rank = max(x.dim(), w.dim())
        x = x.reshape((x.shape[0],) + (1,) * (rank - x.dim()) + tuple(x.shape[1:]))
        w = w.reshape((w.shape[0],) + (1,) * (rank - w.dim()) + tuple(w.shape[1:]))
        m = x * w
    out = torch.zeros((num_dst,) + tuple(m.shape[1:]), dtype=m.dtype, device=m.device).index_add(0, dst.long(), m)
    if reduce == "mean":
        deg = torch.bincount(dst.long(), minlength=num_dst).clamp(min=1).to(m.dtype)
        out = out / deg.reshape((num_dst,) + (1,) * (out.dim() - 1))
    return out
