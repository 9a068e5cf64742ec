"""Drop-in ``torch_geometric.nn.GINEConv`` (GIN with edge features, Hu et al.): PyG's module
(constructor, ``nn``, ``eps`` parameter or buffer as ``train_eps`` says, ``lin`` for ``edge_dim``,
state_dict keys) with its neighbour aggregation on dgl-accel's core.

PyG's forward step for step: ``x`` or ``(x_src, x_dst)``; the edge features through ``lin`` where
the module has one; the messages ``relu(x_src[j] + edge_attr[e])`` aggregated into every target;
plus ``(1 + eps) * x_dst`` when there are target features; then ``nn``.  The sum (``aggr`` add,
GINE's) runs as one fused op, :func:`dgl_accel.core.add_relu_sum.add_relu_sum` (no [E, F] message
tensor on the CPU's compiled loops, forward or backward); mean is that sum divided by the in-degree
(at least 1, as PyG's scatter mean); max and min run on the extrema op (``u_add_e``) followed by
the relu, which commutes with them (rows without in-edges: 0, as PyG's).  ``lin`` (a plain linear
layer) goes to the core op as its weight and bias: in inference (no gradient asked for, outside
autocast) its product is formed per edge inside the sum and never stored.  Node and edge features
of different float dtypes (``lin``'s bf16 output under autocast beside fp32 ``x``) give PyG's
promoted dtype.  Under ``torch.compile`` (torch >= 2.4) the layer is traced into the model's
graph, its core ops the custom ops of :mod:`dgl_accel.core.library.edges` (``lin``'s product traced
before the sum: the per-edge fused product is eager inference's only); torch 2.2 keeps a compile
boundary (run eagerly).

Left to PyG's forward (``pyg.GINEConv: fallthrough: <reason>``): a call without ``edge_attr``
(PyG's own error), edge features other than a 2-D float tensor, ``torch.sparse`` adjacencies,
other aggregations, features other than [N, F] floats of one dtype, ``torch_sparse.SparseTensor``
and ``EdgeIndex`` inputs, and PyG's explain mode, message passing hooks, ``decomposed_layers`` and
the ``target_to_source`` flow.  Edge features whose width differs from the node features' raise
PyG's ValueError (without ``lin``), or the RuntimeError PyG's addition raises (with ``lin``, or a
row count other than the edges'), before any kernel runs.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch_geometric.nn.dense.linear import Linear as PygLinear

from ...core.add_relu_sum import add_relu_sum
from ...core.aggregation.checks import describe
from ...core.extrema import aggregate_extrema
from .inputs import check_device, dropin, fall_back, is_lazy, prepare, reduce_of

PygGINEConv = pyg_nn.GINEConv


@dropin(PygGINEConv, "propagate")
class GINEConv(PygGINEConv):
    def forward(self, x, edge_index, edge_attr=None, size=None):
        found = _edge_reason(edge_index, edge_attr) or prepare(self, x, edge_index, size)
        if isinstance(found, str):
            return fall_back(self, PygGINEConv, found, x, edge_index, edge_attr, size)
        x_src, x_dst, edges, views = found
        check_device(edge_index, edge_attr)
        w, weight, bias = edge_attr, None, None
        if self.lin is not None and plain_linear(self.lin):  # the core forms the product (fused where it can)
            weight, bias = self.lin.weight, self.lin.bias
        elif self.lin is not None:
            w = self.lin(edge_attr)
        _check_edge_features(self, w, weight, x_src, views.num_edges)
        reduce = reduce_of(self)
        if reduce in ("sum", "mean"):
            out = add_relu_sum(views, x_src, w, weight, bias)
            if reduce == "mean":
                degrees = views.cached("gine.mean_divisor", lambda: views.in_degrees().clamp(min=1).unsqueeze(-1))
                out = out / degrees.to(out.dtype)
        else:  # relu is monotone: the max (min) of the rectified messages is the rectified max (min)
            w = w if weight is None else F.linear(w, weight, bias)
            dtype = torch.promote_types(x_src.dtype, w.dtype)
            out = aggregate_extrema(views, "u_add_e", reduce, x_src.to(dtype), w.to(dtype), fill=0.0).relu()
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)


def _edge_reason(edge_index, edge_attr) -> str | None:
    """Why the call's edge features or graph input go to PyG's forward, or None."""
    if edge_attr is None:
        return "no edge_attr (PyG's message needs one)"
    if not isinstance(edge_attr, torch.Tensor) or edge_attr.dim() != 2 or not edge_attr.is_floating_point():
        return f"edge_attr not a 2-D float tensor ({describe(edge_attr)})"
    if isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
        return "torch.sparse adjacency"
    return None


def plain_linear(lin) -> bool:
    """Whether ``lin`` computes ``F.linear(x, lin.weight, lin.bias)`` and nothing else: a materialised
    ``torch.nn.Linear`` or PyG ``Linear`` without hooks."""
    return (isinstance(lin, (torch.nn.Linear, PygLinear)) and not is_lazy(lin.weight) and not lin._forward_hooks
            and not lin._forward_pre_hooks)


def _check_edge_features(module, w: torch.Tensor, weight, x: torch.Tensor, num_edges: int) -> None:
    """PyG's errors for edge features (through ``lin``: ``weight``, or already ``w``) that do not fit
    the messages ``x[j] + lin(edge_attr)[e]``."""
    if module.lin is None and w.shape[-1] != x.shape[-1]:
        raise ValueError(f"Node and edge feature dimensionalities do not match. Consider setting the 'edge_dim' "
                         f"attribute of 'GINEConv' (got {x.shape[-1]} node features, {w.shape[-1]} edge features). "
                         f"Fix: GINEConv(nn, edge_dim={w.shape[-1]}).")
    if weight is not None and w.shape[-1] != weight.shape[1]:  # PyG's F.linear: mat1 and mat2 shapes ...
        raise RuntimeError(f"Expected edge_attr with lin's {weight.shape[1]} input features (edge_dim; got "
                           f"{w.shape[-1]}). Fix: GINEConv(nn, edge_dim={w.shape[-1]}).")
    width = w.shape[-1] if weight is None else weight.shape[0]
    if (w.shape[0], width) != (num_edges, x.shape[-1]):
        raise RuntimeError(f"Expected edge features of shape [{num_edges}, {x.shape[-1]}] (one row per column of "
                           f"'edge_index', as wide as the node features{' after lin' if module.lin is not None else ''}"
                           f"; got [{w.shape[0]}, {width}]). Fix: pass one edge_attr row per edge, and nn's input "
                           f"width equal to the node features'.")


__all__ = ["GINEConv"]
