"""The two linear layers around a neighbour aggregation (SAGEConv's ``lin_l`` / ``lin_r``, GraphConv's
``lin_rel`` / ``lin_root``): ``lin(aggr(x_src)) + own(x_dst)``, in the cheaper order.

* :func:`projects_first`: a sum or mean commutes with ``lin``'s product, so where ``lin`` narrows
  the features (fewer outputs than inputs, DGL's SAGEConv rule) the rows are projected first and
  the narrower rows aggregated (:func:`project_then_aggregate`; on one node set ``lin`` and ``own``
  are one product over their stacked weights);
* otherwise :func:`aggregate_then_project`: ``own``'s product carries ``lin``'s bias and the
  neighbours' product accumulates into it (``addmm``), no separate [N, out] sum.

Both are the same sums in another order (rounding apart).  ``own`` may be None (no root term)."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.parameter import is_lazy

__all__ = ["projects_first", "project_then_aggregate", "aggregate_then_project"]


def projects_first(lin, reduce: str | None, x_src: torch.Tensor) -> bool:
    """Whether ``lin`` (materialised, not a lazy ``in_channels=-1`` layer before its first call)
    narrows ``x_src``'s features under a sum or mean."""
    return (reduce in ("sum", "mean") and not is_lazy(lin.weight)
            and lin.weight.shape[0] < lin.weight.shape[1] == x_src.shape[-1])


def project_then_aggregate(lin, own, x_src: torch.Tensor, x_dst, aggregate_rows: Callable) -> torch.Tensor:
    """``aggregate_rows(x_src @ W^T) + b + own(x_dst)``."""
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
    if lin.bias is not None:
        out = out + lin.bias.to(out.dtype)
    return out if mine is None else out + mine


def aggregate_then_project(lin, own, aggregated: torch.Tensor, x_dst) -> torch.Tensor:
    """``lin(aggregated) + own(x_dst)``."""
    own = own if x_dst is not None else None
    if own is None or is_lazy(lin.weight) or is_lazy(own.weight) or own.bias is not None:
        out = lin(aggregated)
        return out if own is None else out + own(x_dst)
    mine = F.linear(x_dst, own.weight, lin.bias)
    return torch.addmm(mine, aggregated, lin.weight.t())
