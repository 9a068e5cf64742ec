"""Edge softmax over the rows of a CSR view, DGL's ``edge_softmax`` without DGL.

Rows are the normalisation groups: the in-CSR's rows (destinations) for DGL's default
``norm_by='dst'``, the out-CSR's rows (sources) for ``norm_by='src'``.  Scores are in edge-id order
(``rows.eids`` maps a CSR position to its edge).  Backward is DGL's own: from the saved output a,
grad_score = a * (grad_a - sum over the row of a * grad_a).

Naming chain: ``_edge_softmax_fwd_kernel`` / ``_edge_softmax_bwd_kernel`` (kernels/attention.py)
-> :func:`~.launchers.edge_softmax_forward` / ``edge_softmax_backward`` (launchers) and
:func:`~.native.edge_softmax_native` (CPU; its loops :mod:`.compiled` with numba) -> :class:`EdgeSoftmaxFunction`
-> :func:`edge_softmax`.
"""
from __future__ import annotations

import math

import torch

from .. import backend
from ..csr import Structure
from . import compiled
from .checks import check_edge_softmax
from .launchers import edge_softmax_backward, edge_softmax_forward
from .native import edge_groups, edge_softmax_backward_native, edge_softmax_native, segment_softmax_backward


class EdgeSoftmaxFunction(torch.autograd.Function):
    """Edge softmax of ``score`` [E, H] on ``path`` (``"triton"`` or ``"native"``)."""

    @staticmethod
    def forward(ctx, rows: Structure, score: torch.Tensor, path: str):
        if path == "triton":
            out = edge_softmax_forward(rows, score)
        elif compiled.usable(rows.num_edges, score):  # one compiled pass per row, no E x H temporaries
            out = compiled.edge_softmax(rows, score)
        else:
            out = edge_softmax_native(rows, score)
        ctx.rows, ctx.path = rows, path
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        rows = ctx.rows
        backend.record("edge_softmax_backward", ctx.path, grad.device)
        if torch.is_grad_enabled():  # create_graph=True: the same formula in differentiable torch ops
            return None, segment_softmax_backward(a, grad.to(a.dtype), edge_groups(rows), rows.num_rows), None
        if ctx.path == "triton":
            return None, edge_softmax_backward(rows, a, grad), None
        if compiled.usable(rows.num_edges, a):
            return None, compiled.edge_softmax_backward(rows, a, grad), None
        return None, edge_softmax_backward_native(rows, a, grad), None


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
