"""Group size for neighbour-grouped aggregation on DGL graphs: linear model, cost model, autotuner.

``choose_group_size(g, feat_dim)`` is the entry point; ``print(explain(g, feat_dim))`` tells why.
The models live in the DGL-free core (``dgl_accel.core.grouping``) and work on any
``GraphViews``; these functions take a ``DGLGraph`` or block.

>>> import dgl, torch
>>> g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))
>>> choose_group_size(g, 64).gs >= 1
True
"""
from __future__ import annotations

from .core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import torch

from .core.aggregation import locality
from .core.grouping import autotune, size
from .core.grouping.autotune import autotune_group_size, clear_autotune_cache
from .core.grouping.size import GroupSizeChoice, cost_model_group_size, linear_group_size, set_autotune_timer
from .graph.structure import check_graph
from .graph.views import DGLGraphViews

__all__ = ["linear_group_size", "linear_inputs", "cost_model_group_size", "choose_group_size",
           "explain", "GroupSizeChoice", "autotune_group_size", "graph_signature",
           "clear_autotune_cache", "set_autotune_timer", "is_symmetric"]


def _views(g) -> DGLGraphViews:
    check_graph(g)
    return DGLGraphViews(g)


def choose_group_size(g, feat_dim: int, dtype: torch.dtype = torch.float32, device=None,
                      policy="auto") -> GroupSizeChoice:
    """Choose ``gs`` for aggregating ``feat_dim``-wide ``dtype`` features over ``g``; see
    :func:`dgl_accel.core.grouping.size.choose_group_size`."""
    return size.choose_group_size(_views(g), feat_dim, dtype, device, policy)


def explain(g, feat_dim: int, dtype: torch.dtype = torch.float32) -> GroupSizeChoice:
    """What ``choose_group_size(g, feat_dim, dtype)`` picks and why; print it for the story."""
    return locality.explain(_views(g), feat_dim, dtype)


def linear_inputs(g) -> tuple[int, int, float]:
    """``(V, E, avg_degree)`` of a DGL graph or block in the linear model's convention."""
    return size.linear_inputs(_views(g))


def is_symmetric(g) -> bool:
    """Whether the (non-block) graph ``g`` has v->u for every u->v (cached per graph)."""
    return size.is_symmetric(_views(g))


def graph_signature(g) -> tuple:
    """``(num_src, num_dst, num_edges, idtype, hash of the in-degree histogram)``, cached per graph."""
    return autotune.graph_signature(_views(g))
