"""Aggregation through a :class:`RedundancyPlan`: pre-adds, then the rewritten graph's sum.

    ext = [x ; pair nodes of round 1 ; round 2 ; ...]      (:class:`PreAdd`, rows appended in order)
    out = dst_scale * sum over the rewritten graph of ext  (the core's aggregation: native CPU / Triton)

Since every step is linear, GCN source scaling (``left``/``both``) is applied to x before the
pre-adds and target scaling (``right``/``both``, and 1/in_deg for ``mean``) after, always with the
ORIGINAL graph's degrees (clamped to >= 1, as dgl.nn.GraphConv and dgl_accel.functional.gspmm do).

Backward is the transpose schedule: the aggregation's own backward scatters the output gradient over the
rewritten graph's transpose into ext's rows, then :class:`PreAdd` walks the rounds in reverse,
adding each pair node's gradient into its two inputs.  The per-round pairs are disjoint and only
read earlier rows, so each round is one vectorised gather (forward) / scatter-add (backward).
"""
from __future__ import annotations

import torch

from ..aggregation.checks import FLOAT_DTYPES
from ..aggregation.function import aggregate as aggregate_core
from ..aggregation.scales import degree_scales

__all__ = ["PreAdd", "aggregate", "REDUCES", "NORMS"]

REDUCES = ("sum", "mean")
NORMS = (None, "none", "both", "left", "right")


class PreAdd(torch.autograd.Function):
    """x [num_src, F] -> ext [num_src + P, F]: row num_src + i = ext[a[i]] + ext[b[i]], round by round."""

    @staticmethod
    def forward(ctx, x, pair_a, pair_b, bounds):
        n = x.shape[0]
        ext = x.new_empty((n + pair_a.numel(), x.shape[1]))
        ext[:n] = x
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            # Rows read (< n + lo) and written (>= n + lo) never overlap; torch cannot see that
            # through out=, so gather from the prefix view.
            done = ext[:n + lo]
            rows = ext[n + lo:n + hi]
            torch.index_select(done, 0, pair_a[lo:hi], out=rows)
            rows.add_(done.index_select(0, pair_b[lo:hi]))
        ctx.save_for_backward(pair_a, pair_b)
        ctx.bounds, ctx.n = bounds, n
        return ext

    @staticmethod
    def backward(ctx, grad_ext):
        pair_a, pair_b = ctx.saved_tensors
        n, bounds = ctx.n, ctx.bounds
        if torch.is_grad_enabled():  # create_graph=True: the same transpose in out-of-place ops
            g = grad_ext
            for lo, hi in reversed(list(zip(bounds[:-1], bounds[1:]))):
                gp = g[n + lo:n + hi]  # read before the adds, which only reach rows < n + lo
                g = g.index_add(0, pair_a[lo:hi], gp).index_add(0, pair_b[lo:hi], gp)
            return g[:n], None, None, None
        g = grad_ext.clone()  # accumulated in place: pair gradients flow into their inputs
        for lo, hi in reversed(list(zip(bounds[:-1], bounds[1:]))):
            gp, earlier = g[n + lo:n + hi], g[:n + lo]  # disjoint views: inputs precede the pairs
            earlier.index_add_(0, pair_a[lo:hi], gp)
            earlier.index_add_(0, pair_b[lo:hi], gp)
        return g[:n], None, None, None


def _check(plan, feat, reduce, norm):
    if reduce not in REDUCES:
        raise ValueError(f"expected reduce to be one of {', '.join(REDUCES)} (got {reduce!r}). "
                         f"Fix: max/min have no pair-sum rewrite; aggregate on the original graph.")
    if norm not in NORMS:
        raise ValueError(f"expected norm to be None, 'none', 'both', 'left' or 'right' (got {norm!r}).")
    if not isinstance(feat, torch.Tensor) or feat.dim() < 1 or feat.dtype not in FLOAT_DTYPES:
        raise ValueError(f"expected floating-point features with one row per source node (got "
                         f"{feat.dtype if isinstance(feat, torch.Tensor) else type(feat).__name__}). "
                         f"Fix: feat.float().")
    if feat.shape[0] != plan.num_src:
        raise ValueError(f"expected features with {plan.num_src} rows, one per source node of the planned "
                         f"graph (got {feat.shape[0]}). Fix: use the plan built for this graph.")


def _scales(plan, norm, reduce, device, acc):
    # the op's own rule, on the ORIGINAL graph's degrees
    return degree_scales(lambda: plan.out_degrees.to(device), lambda: plan.in_degrees.to(device), norm, reduce, acc)


def aggregate(plan, feat: torch.Tensor, reduce: str = "sum", norm: str | None = None) -> torch.Tensor:
    """Equals ``aggregate(g, "copy_u", reduce, feat, norm=norm)`` (and ``dgl_accel.functional.gspmm``) on the
    planned graph g."""
    _check(plan, feat, reduce, norm)
    norm = "none" if norm is None else norm
    trailing = tuple(feat.shape[1:])
    width = 1
    for d in trailing:
        width *= d
    x = feat if feat.dim() == 2 else feat.reshape(feat.shape[0], width)  # -1 is ambiguous with 0 rows
    acc = torch.float64 if feat.dtype == torch.float64 else torch.float32  # halves: pair sums in fp32
    x = x.to(acc)
    graph, pair_a, pair_b = plan.on(feat.device)
    src_scale, dst_scale = _scales(plan, norm, reduce, feat.device, acc)
    if src_scale is not None:
        x = x * src_scale[:, None]
    ext = PreAdd.apply(x, pair_a, pair_b, plan.round_bounds) if plan.num_pair_nodes else x
    out = aggregate_core(graph, "copy_u", "sum", ext)
    if dst_scale is not None:
        out = out * dst_scale[:, None]
    return out.to(feat.dtype).reshape((plan.num_dst,) + trailing)
