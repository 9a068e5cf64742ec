"""Edge softmax over the rows of a CSR view, DGL's ``edge_softmax`` without DGL.

Rows are the normalisation groups: the in-CSR's rows (destinations) for DGL's default
``norm_by='dst'``, the out-CSR's rows (sources) for ``norm_by='src'``.  Scores are in edge-id order
(``rows.eids`` maps a CSR position to its edge).  Backward is DGL's own: from the saved output a,
grad_score = a * (grad_a - sum over the row of a * grad_a).

Naming chain: ``_edge_softmax_fwd_kernel`` / ``_edge_softmax_bwd_kernel`` (``kernels/edge_softmax.py``)
and the loops of ``core/jit/edge_softmax.py`` -> the paths of :mod:`.edge_softmax_paths`
(``forward_{triton,compiled,native}``, ``backward_...``) -> :class:`EdgeSoftmaxFunction` -> :func:`edge_softmax`.
"""
from __future__ import annotations

import math

import torch

from .. import backend
from ..csr import Structure
from . import edge_softmax_paths as paths
from .checks import check_edge_softmax
from .common import edge_groups, usable


class EdgeSoftmaxFunction(torch.autograd.Function):
    """Edge softmax of ``score`` [E, H] on ``path`` (``"triton"`` or ``"native"``)."""

    @staticmethod
    def forward(ctx, rows: Structure, score: torch.Tensor, path: str):
        if path == "triton":
            out = paths.forward_triton(rows, score)
        elif usable(rows.num_edges, score):  # compiled passes over the edges, no E x H temporaries
            out = paths.forward_compiled(rows, score)
        else:
            out = paths.forward_native(rows, score)
        ctx.rows, ctx.path = rows, path
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        rows = ctx.rows
        backend.record("edge_softmax_backward", ctx.path, grad.device)
        if torch.is_grad_enabled():  # create_graph=True: the same formula in differentiable torch ops
            return None, paths.segment_softmax_backward(a, grad.to(a.dtype), edge_groups(rows), rows.num_rows), None
        if ctx.path == "triton":
            return None, paths.backward_triton(rows, a, grad), None
        if usable(rows.num_edges, a):
            return None, paths.backward_compiled(rows, a, grad), None
        return None, paths.backward_native(rows, a, grad), None


def edge_softmax(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """Softmax of ``score`` over the entries of each row of ``rows``, per trailing column.

    ``score``: [E] or [E, *] (e.g. [E, H] or [E, H, 1]) in edge-id order, float32/16/bf16/64;
    the result has its shape and dtype (half types accumulate in fp32).  Rows without entries
    contribute nothing.  Differentiable in ``score``.

    >>> import torch
    >>> from dgl_accel.core.aggregation.views import TensorGraph
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 1, 2]), num_nodes=3)
    >>> edge_softmax(g.csr("in"), torch.tensor([0.0, 0.0, 7.0])).tolist()  # edges 0, 1 share destination 1
    [0.5, 0.5, 1.0]
    """
    check_edge_softmax(rows, score)
    path = backend.choose_path(score)
    backend.record("edge_softmax", path, score.device)
    heads = math.prod(score.shape[1:])  # 1 for [E]; reshape(E, -1) is ambiguous with 0 edges
    out = EdgeSoftmaxFunction.apply(rows, score.reshape(score.shape[0], heads), path)
    return out.reshape(score.shape)
