"""The two linear layers around a neighbour aggregation (SAGEConv's ``lin_l`` / ``lin_r``, GraphConv's
``lin_rel`` / ``lin_root``): ``lin(aggr(x_src)) + own(x_dst)``, in the cheaper order.

* :func:`projects_first`: a sum or mean commutes with ``lin``'s product, so where ``lin`` narrows
  the features (fewer outputs than inputs, DGL's SAGEConv rule) the rows are projected first and
  the narrower rows aggregated (:func:`project_then_aggregate`; on one node set ``lin`` and ``own``
  are one product over their stacked weights);
* otherwise :func:`aggregate_then_project`: ``own``'s product carries ``lin``'s bias and the
  neighbours' product accumulates into it (``addmm``), no separate [N, out] sum.

Both are the same sums in another order (rounding apart).  ``own`` may be None (no root term).

Targets without in-edges aggregate to 0, so ``lin`` adds only its bias there: with a root term, the
aggregation may cover just the targets up to the last one with an in-edge (:func:`with_in_edges`;
a sampled mini-batch lists its last hop's nodes last, and they have none), and ``lin``'s product
runs on those rows only; the others are ``own(x_dst) + bias``, as in PyG's full product."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ...core.autocast import autocast_dtype
from .inputs import is_lazy

__all__ = ["projects_first", "project_then_aggregate", "aggregate_then_project", "with_in_edges", "narrowed_once"]

TRIM_FROM = 0.95  # trim when the targets with in-edges are at most this share of all targets


def projects_first(lin, reduce: str | None, x_src: torch.Tensor) -> bool:
    """Whether ``lin`` (materialised, not a lazy ``in_channels=-1`` layer before its first call)
    narrows ``x_src``'s features under a sum or mean."""
    return (reduce in ("sum", "mean") and not is_lazy(lin.weight)
            and lin.weight.shape[0] < lin.weight.shape[1] == x_src.shape[-1])


def with_in_edges(edges, views, root: bool):
    """The views over the targets ``0 .. t`` with ``t`` the last target that has an in-edge, where
    a root term fills the other rows (``root``) and that drops at least 5% of the targets; else
    ``views``.  ``edges``: the graph's :class:`~dgl_accel.pyg.graph.Edges` (its id range is read
    once per graph)."""
    if not root or getattr(edges, "traced", False):  # traced: no id range read under compile
        return views
    rows = edges.max_dst + 1 if edges.num_edges else 0
    if rows > TRIM_FROM * views.num_dst:
        return views
    return edges.views(views.num_src, rows, homogeneous=False)


def narrowed_once(x_src: torch.Tensor, x_dst):
    """``(x_src, x_dst)`` for :func:`aggregate_then_project` under CPU autocast: fp32 rows on one
    node set cast to autocast's dtype once, for both ``own``'s product (which would cast them
    itself) and the aggregation (which then reads half the bytes, sums in fp32 and rounds once:
    PyG rounds the fp32 mean instead; both within bf16's rounding).  Otherwise as they are."""
    low = autocast_dtype(x_src.device.type)
    if x_dst is x_src and low is not None and x_src.dtype == torch.float32 and x_src.device.type == "cpu":
        x_src = x_dst = x_src.to(low)
    return x_src, x_dst


def _add_rows(base: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """``base`` with ``top`` added to its first rows (``base`` a fresh tensor of this layer)."""
    if top.shape[0] == base.shape[0]:
        return base + top
    base[: top.shape[0]] += top
    return base


def project_then_aggregate(lin, own, x_src: torch.Tensor, x_dst, aggregate_rows: Callable) -> torch.Tensor:
    """``aggregate_rows(x_src @ W^T) + b + own(x_dst)``; ``aggregate_rows`` may give fewer rows than
    there are targets where ``own(x_dst)`` is there (:func:`with_in_edges`)."""
    width = lin.weight.shape[0]
    root = own is not None and x_dst is not None
    if root and x_dst is x_src and not is_lazy(own.weight):
        both = F.linear(x_src, torch.cat([lin.weight, own.weight]))
        h, mine = both[:, :width], both[:, width:]
        if own.bias is not None:
            mine = mine + own.bias
    else:
        h, mine = F.linear(x_src, lin.weight), (own(x_dst) if root else None)
    out = aggregate_rows(h)
    if mine is None or out.shape[0] == mine.shape[0]:
        if lin.bias is not None:
            out = out + lin.bias.to(out.dtype)
        return out if mine is None else out + mine
    base = mine + lin.bias.to(mine.dtype) if lin.bias is not None else mine.clone()
    return _add_rows(base, out.to(base.dtype))


def aggregate_then_project(lin, own, aggregated: torch.Tensor, x_dst) -> torch.Tensor:
    """``lin(aggregated) + own(x_dst)``; ``aggregated`` may cover only the first targets where
    ``own(x_dst)`` is there (:func:`with_in_edges`)."""
    own = own if x_dst is not None else None
    if own is None or is_lazy(lin.weight) or is_lazy(own.weight) or own.bias is not None:
        out = lin(aggregated)
        return out if own is None else _add_rows(own(x_dst), out)
    mine = F.linear(x_dst, own.weight, lin.bias)
    weight = lin.weight
    if mine.dtype != weight.dtype and mine.dtype == autocast_dtype(mine.device.type):  # autocast's product dtype
        aggregated, weight = aggregated.to(mine.dtype), weight.to(mine.dtype)
    if not mine.dtype == aggregated.dtype == weight.dtype:  # mixed dtypes without autocast: torch's rules
        return _add_rows(mine, F.linear(aggregated, weight))
    mine[: aggregated.shape[0]].addmm_(aggregated, weight.t())  # in place: the product's backward does not read it
    return mine
