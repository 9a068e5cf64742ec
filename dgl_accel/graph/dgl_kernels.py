"""DGL's compiled CPU SpMM/SDDMM, called directly, as the native kernels of DGL graph views.

DGL's own compiled CPU SpMM/SDDMM (multi-threaded, per-row CSR kernels) is the fastest CPU
primitive on the pinned stack: torch.sparse.mm on CSR measured 1.5-2.5x slower than it for F >= 64
(bench/bench_aggregation.py).  So the DGL adapter calls DGL's kernels without DGL's Python/autograd
layers.  These are DGL's private entry points (``dgl._sparse_ops``): this file is the one place
that touches them, with a fallback to the wrapper where a DGL version lacks the C entry.
"""
from __future__ import annotations

import dgl.ops.spmm
import torch
from dgl._sparse_ops import _gsddmm, _gspmm

# DGL's own gspmm, captured when this module is first imported: dgl_accel.patching imports it
# before it can patch anything, so this is always the original (max/min fall through to it).
ORIGINAL_GSPMM = dgl.ops.spmm.gspmm

try:  # DGL's C entry point: skips _gspmm's per-call shape inference and Python conversions
    from dgl._sparse_ops import _CAPI_DGLKernelSpMM, to_dgl_nd, to_dgl_nd_for_write
except ImportError:  # another DGL version: go through its wrapper
    _CAPI_DGLKernelSpMM = None


def spmm_sum(gidx, x: torch.Tensor, w: torch.Tensor | None, num_rows: int, num_edges: int) -> torch.Tensor:
    """sum over in-edges of x[u] (* w[e]) with DGL's CPU kernel; x, w contiguous, same dtype."""
    if _CAPI_DGLKernelSpMM is None:
        return _gspmm(gidx, "copy_lhs" if w is None else "mul", "sum", x, w)[0]
    out = torch.zeros((num_rows, x.shape[1]), dtype=x.dtype, device=x.device)
    if num_edges:
        null = to_dgl_nd(None)
        _CAPI_DGLKernelSpMM(gidx, "copy_lhs" if w is None else "mul", "sum", to_dgl_nd(x),
                            null if w is None else to_dgl_nd(w), to_dgl_nd_for_write(out), null, null)
    return out


def extrema(graph, reduce: str, x: torch.Tensor) -> torch.Tensor:
    """max/min over in-edges of x[u] with DGL's kernel and DGL's arg-based backward (rows without
    in-edges hold -inf/+inf; the caller fills them)."""
    return ORIGINAL_GSPMM(graph, "copy_lhs", reduce, x, None)


def sddmm(gidx, x: torch.Tensor, g: torch.Tensor, per_feat: bool) -> torch.Tensor:
    """Per edge (edge-id order): x[src] * g[dst] (``per_feat``) or their dot product."""
    return _gsddmm(gidx, "mul" if per_feat else "dot", x, g, "u", "v")
