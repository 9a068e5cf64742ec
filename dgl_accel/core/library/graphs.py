"""What the custom ops of :mod:`dgl_accel.core.library` share: the graph passed as tensors (its
schema ``GRAPH``, the kinds that turn it into the core's views, :func:`resolve`), a stand-in
autograd ctx for running an eager Function's forward and backward inside an op (:class:`Ctx`), and
:func:`fresh` (an op's outputs may not share memory with its inputs)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..aggregation.views import TensorGraph

__all__ = ["AVAILABLE", "GRAPH", "Ctx", "fresh", "register_graph_kind", "resolve"]

AVAILABLE = hasattr(torch.library, "custom_op")  # torch >= 2.4
GRAPH = "Tensor edge_index, SymInt num_src, SymInt num_dst, bool homogeneous, str kind"
_KINDS: dict[str, Callable] = {}


def register_graph_kind(name: str, build: Callable) -> None:
    """``build(edge_index, num_src, num_dst, homogeneous, detail) -> (views, edge weights or None)``
    serves the graphs of kind ``name`` (and ``name:detail``) inside the custom ops."""
    _KINDS[name] = build


def _plain(edge_index, num_src, num_dst, homogeneous, detail):
    if detail:
        raise ValueError(f"expected no detail for the graph kind 'edges' (got {detail!r}).")
    src, dst = edge_index[0], edge_index[1]
    if homogeneous:
        return TensorGraph(src, dst, num_nodes=num_src), None
    return TensorGraph(src, dst, num_src=num_src, num_dst=num_dst), None


register_graph_kind("edges", _plain)


def resolve(edge_index: torch.Tensor, num_src: int, num_dst: int, homogeneous: bool, kind: str):
    """(the core's views, the graph's own edge weights or None) of a graph passed as tensors."""
    name, _, detail = kind.partition(":")
    if name not in _KINDS:
        raise ValueError(f"expected a registered graph kind ({', '.join(sorted(_KINDS))}) (got {name!r}). "
                         f"Fix: register_graph_kind({name!r}, build) before the op runs.")
    return _KINDS[name](edge_index, int(num_src), int(num_dst), homogeneous, detail)


class Ctx:
    """Stands in for an autograd ctx: the eager attention Functions' forward and backward run on
    it, so the ops compute what the eager ops compute (nothing between the passes but the inputs
    and lse, as there)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def set_materialize_grads(self, value):
        pass


def fresh(t: torch.Tensor, taken: set) -> torch.Tensor:
    """``t``, or a copy where it shares memory with an input or an earlier output (a custom op's
    outputs may not); its memory joins ``taken``."""
    ptr = t.untyped_storage().data_ptr()
    if ptr in taken:
        t = t.clone()
    taken.add(t.untyped_storage().data_ptr())
    return t
