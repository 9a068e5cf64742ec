"""``copy_u_sum(g, feat)``: out[v] = sum over in-edges (u -> v) of feat[u] (DGL's copy_u + sum).

Naming chain: ``_csr_spmm_kernel`` (kernels/spmm_csr.py) -> :func:`csr_spmm_forward` (launcher)
-> :class:`CopyUSumFunction` (autograd; backward runs the same kernel on the cached transposed
structure, so directed graphs are handled) -> :func:`copy_u_sum` (public, dispatch).
The native path multiplies by a torch sparse CSR matrix built from the same cached structure.
"""
from __future__ import annotations

import warnings

import torch

from .. import backend
from ..graph.structure import Structure, in_csr, out_csr
from .launch import feature_tile, triton_kernel

_SUPPORTED = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_BLOCK_E = 32


def csr_spmm_forward(indptr: torch.Tensor, indices: torch.Tensor, feat: torch.Tensor,
                     num_rows: int) -> torch.Tensor:
    """Launch ``_csr_spmm_kernel``: row r of the result sums ``feat[indices[indptr[r]:indptr[r+1]]]``."""
    if feat.stride(-1) != 1:
        feat = feat.contiguous()  # rows may be strided, columns must be unit-stride for the tile loads
    num_feats = feat.shape[1]
    out = torch.empty((num_rows, num_feats), dtype=feat.dtype, device=feat.device)
    if num_rows and num_feats:
        block_f = feature_tile(num_feats)
        kernel = triton_kernel("spmm_csr", "_csr_spmm_kernel", feat.device)
        grid = (num_rows, -(-num_feats // block_f))
        kernel[grid](indptr, indices, feat, out, num_feats, feat.stride(0), out.stride(0),
                     BLOCK_E=_BLOCK_E, BLOCK_F=block_f, ACC_FP64=feat.dtype == torch.float64)
    return out


def csr_spmm_native(structure: Structure, feat: torch.Tensor) -> torch.Tensor:
    """The same product with torch's sparse CSR kernels (fp32 math for half types)."""
    compute = feat if feat.dtype in (torch.float32, torch.float64) else feat.float()
    values = torch.ones(structure.indices.numel(), dtype=compute.dtype, device=compute.device)
    with warnings.catch_warnings():  # torch 2.x calls sparse CSR "beta" on every construction
        warnings.simplefilter("ignore", UserWarning)
        matrix = torch.sparse_csr_tensor(structure.indptr, structure.indices.long(), values,
                                         size=(structure.num_rows, structure.num_cols))
    out = torch.sparse.mm(matrix, compute) if structure.indices.numel() else \
        compute.new_zeros((structure.num_rows, compute.shape[1]))
    return out.to(feat.dtype)


def _spmm(structure: Structure, feat: torch.Tensor, path: str) -> torch.Tensor:
    if path == "triton":
        return csr_spmm_forward(structure.indptr, structure.indices, feat, structure.num_rows)
    return csr_spmm_native(structure, feat)


class CopyUSumFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, feat, path):
        ctx.graph, ctx.path = graph, path
        return _spmm(in_csr(graph), feat, path)

    @staticmethod
    def backward(ctx, grad_out):
        # d out[v] / d feat[u] sums over edges u -> v: the transposed product A^T grad.
        return None, _spmm(out_csr(ctx.graph), grad_out, ctx.path), None


def _check(graph, feat) -> None:
    if not isinstance(feat, torch.Tensor) or feat.dim() < 1:
        raise ValueError(f"expected feat to be a tensor with one row per source node (got {type(feat).__name__}"
                         f"{'' if not isinstance(feat, torch.Tensor) else ' of dim 0'}). Fix: pass g.ndata['feat'].")
    if feat.dtype not in _SUPPORTED:
        raise ValueError(f"expected floating-point features (float32, float16, bfloat16, float64) "
                         f"(got {feat.dtype}). Fix: feat.float().")
    num_src = graph.num_src_nodes()
    if feat.shape[0] != num_src:
        raise ValueError(f"expected feat with {num_src} rows, one per source node (got {feat.shape[0]}). "
                         f"Fix: for a block pass the features of block.srcdata, for a graph g.ndata.")
    if graph.device != feat.device:
        raise ValueError(f"expected graph and features on one device (got graph on {graph.device}, "
                         f"features on {feat.device}). Fix: g = g.to(feat.device).")


def copy_u_sum(graph, feat: torch.Tensor) -> torch.Tensor:
    """Sum of source features over in-edges, like ``dgl.ops.copy_u_sum``; differentiable in ``feat``.

    ``feat`` has shape ``[num_src_nodes, *]``; trailing dimensions are flattened and restored.
    """
    _check(graph, feat)
    path = backend.choose_path(feat)
    backend.record("copy_u_sum", path, feat.device)
    width = 1
    for d in feat.shape[1:]:
        width *= d
    flat = feat.reshape(feat.shape[0], width)  # explicit width: -1 is ambiguous with 0 rows
    out = CopyUSumFunction.apply(graph, flat, path)
    return out.reshape((out.shape[0],) + tuple(feat.shape[1:]))
