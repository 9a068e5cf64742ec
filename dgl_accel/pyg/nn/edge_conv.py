"""Drop-in ``torch_geometric.nn.EdgeConv`` (DGCNN's edge convolution): PyG's module (constructor,
``nn``, ``aggr``, state_dict keys) with its per-edge work moved to the nodes where ``nn`` allows it.

PyG runs ``nn`` on every edge's ``[x_i, x_j - x_i]`` (two gathers, a difference and a [E, 2F]
concatenation, then ``nn``'s first product on E rows) and aggregates the results into the targets.
Where ``nn`` is a linear layer, or a ``Sequential`` that starts with one (``W = [W_a, W_b]``, bias
``b``), that first layer's output per edge is ``(W_a - W_b) x_i + b + W_b x_j``: two products over
the nodes, ``A = (W_a - W_b) x_dst + b`` and ``B = W_b x_src`` (one product over their stacked
weights on one node set), and then

* ``nn`` the linear layer alone: ``aggr`` max/min is ``A_i + max_j B_j`` (the copy_u extrema op: no
  per-edge tensor at all), add is ``deg_i A_i + sum_j B_j`` and mean ``A_i + mean_j B_j`` (the
  core's copy_u sum/mean), 0 for targets without in-edges, as PyG's scatter gives;
* more layers after it: the first layer's [E, H] output as one SDDMM (``gsddmm`` ``add`` of ``B``
  at the source and ``A`` at the target), the rest of ``nn`` on those E rows as PyG runs it, and
  max/min on the extrema op over the edges (``copy_e``).

The same sums in another order: PyG's numbers up to rounding; where two edges' messages tie
exactly, PyG's max splits the gradient between them and the extrema op gives it to the first.
Under ``torch.compile`` (torch >= 2.4) the layer is traced into the model's graph, its core ops
the custom ops of :mod:`dgl_accel.core.library` and :mod:`dgl_accel.core.library.edges` (the
SDDMM, the edge extrema, the in-degrees); torch 2.2 keeps a compile boundary (run eagerly).

Left to PyG's forward (``pyg.EdgeConv: fallthrough: <reason>``): an ``nn`` of another shape (not a
materialised linear layer taking ``2 * F`` features, without hooks, first), aggr add/mean after a
multi-layer ``nn`` (the core sums no edge rows), other aggregations, a pair without target features
(PyG's own error), ``torch.sparse`` adjacencies, features other than [N, F] floats of one dtype,
``torch_sparse.SparseTensor`` and ``EdgeIndex`` inputs, and PyG's explain mode, message passing
hooks, ``decomposed_layers`` and the ``target_to_source`` flow.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch_geometric.nn.dense.linear import Linear as PygLinear

from ...core.aggregation.function import aggregate
from ...core.extrema import aggregate_extrema
from ...core.sddmm.function import gsddmm
from .inputs import dropin, fall_back, is_lazy, prepare, reduce_of

PygEdgeConv = pyg_nn.EdgeConv


@dropin(PygEdgeConv, "propagate")
class EdgeConv(PygEdgeConv):
    def forward(self, x, edge_index):
        found = _input_reason(x, edge_index) or prepare(self, x, edge_index, None)
        if not isinstance(found, str):
            first, rest = leading_linear(self.nn, found[0].shape[-1])
            found = _nn_reason(first, rest, reduce_of(self)) or found
        if isinstance(found, str):
            return fall_back(self, PygEdgeConv, found, x, edge_index)
        x_src, x_dst, _, views = found
        reduce, width = reduce_of(self), first.weight.shape[0]
        w_i, w_j = first.weight[:, : x_src.shape[-1]], first.weight[:, x_src.shape[-1]:]
        if x_dst is x_src:  # one node set: one product over the stacked weights
            both = F.linear(x_src, torch.cat([w_i - w_j, w_j]))
            own, theirs = both[:, :width], both[:, width:]
        else:
            own, theirs = F.linear(x_dst, w_i - w_j), F.linear(x_src, w_j)
        if first.bias is not None:
            own = own + first.bias.to(own.dtype)
        if rest is not None:  # the first layer's output per edge, the rest of nn on the edges, as PyG
            messages = rest(gsddmm(views, "add", theirs.contiguous(), own.contiguous(), "u", "v"))
            return aggregate_extrema(views, "copy_e", reduce, None, messages, fill=0.0)
        theirs = theirs.contiguous()
        if reduce in ("max", "min"):
            out = own + aggregate_extrema(views, "copy_u", reduce, theirs, fill=0.0)
        elif reduce == "mean":
            out = own + aggregate(views, "copy_u", "mean", theirs)
        else:  # deg_i copies of own_i
            degrees = views.cached(f"edge_conv.degrees.{own.dtype}", lambda: views.in_degrees().to(own.dtype))
            return own * degrees.unsqueeze(-1) + aggregate(views, "copy_u", "sum", theirs)
        has_in = views.cached("edge_conv.has_in_edges", lambda: (views.in_degrees() > 0).unsqueeze(-1))
        return torch.where(has_in, out, torch.zeros((), dtype=out.dtype, device=out.device))


def _input_reason(x, edge_index) -> str | None:
    """Why the call's inputs go to PyG's forward before any check of ours, or None."""
    if isinstance(x, (tuple, list)) and len(x) == 2 and x[1] is None:
        return "a pair without target features"
    if isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
        return "torch.sparse adjacency"
    return None


def _nn_reason(first, rest, reduce: str) -> str | None:
    if first is None:
        return "nn neither a linear layer nor a Sequential starting with one (taking 2 * F features)"
    if rest is not None and reduce in ("sum", "mean"):
        return f"aggr {reduce!r} after a multi-layer nn (the core sums no edge rows)"
    return None


def leading_linear(nn, num_feat: int):
    """(the linear layer ``nn`` is or starts with, the rest of ``nn`` or None) where that layer is a
    ``torch.nn.Linear`` or PyG ``Linear`` with a materialised weight taking ``2 * num_feat``
    features, neither it nor the ``Sequential`` with hooks; (None, None) otherwise."""
    first, rest = nn, None
    if isinstance(nn, torch.nn.Sequential):
        if len(nn) == 0 or nn._forward_hooks or nn._forward_pre_hooks:
            return None, None
        first, rest = nn[0], (nn[1:] if len(nn) > 1 else None)
    if not isinstance(first, (torch.nn.Linear, PygLinear)) or is_lazy(first.weight) or first._forward_hooks \
            or first._forward_pre_hooks:
        return None, None
    if first.weight.dim() != 2 or first.weight.shape[1] != 2 * num_feat:
        return None, None
    return first, rest


__all__ = ["EdgeConv"]
