"""Execution paths on the device: the backward aggregation restricted to the edges that reach the
training rows, against the full backward, at 1% and 10% training nodes.

With a loss on the training rows R only, the output gradient of the last aggregation is zero
outside R (depth 0), and the one below it is zero outside N^1(R) (depth 1).  The input gradient
then needs only the in-edges of those rows: the core runs that as an aggregation plan
(:class:`~dgl_accel.core.aggregation.plan.AggregationPlan`, the same hook the DGL-side
``policies/exec_paths`` uses) over a :class:`~dgl_accel.core.aggregation.views.TensorGraph` of those
edges, with the full graph's degree scales.  Results must equal the full backward (same tolerance
rule as the correctness section); the row records both times.
"""
from __future__ import annotations

import time

import torch

from ..core.aggregation.function import aggregate
from ..core.aggregation.plan import AggregationPlan
from ..core.aggregation.views import TensorGraph
from ..testing.tolerances import assert_close
from .graphs import Graph
from .timing import median_seconds, synchronize


class PathPlan(AggregationPlan):
    """Forward on the full graph; the input gradient over ``sub``'s edges only (the in-edges of
    the rows where the output gradient can be nonzero)."""

    def __init__(self, sub: TensorGraph):
        self.sub = sub

    def backward_input(self, agg, state, grad, w):
        return agg.spmm("out", grad, w, agg.dst_scale, agg.src_scale, views=self.sub), self.sub


def frontier(g: Graph, rows: torch.Tensor, depth: int) -> torch.Tensor:
    """N^depth(rows): the rows and everything within ``depth`` hops upstream, as a node mask."""
    mask = torch.zeros(g.num_nodes, dtype=torch.bool, device=g.src.device)
    mask[rows] = True
    for _ in range(depth):
        mask[g.src[mask[g.dst]]] = True
    return mask


def _backward(out, x, gout):
    return lambda: torch.autograd.grad(out, x, gout, retain_graph=True)


def run(results, graphs: list[Graph], device, timing: dict, width: int, progress, deadline=None) -> None:
    for g in graphs:
        if deadline is not None and deadline.passed():
            progress(f"  execution paths on {g.name}: skipped (budget spent)")
            continue
        views = TensorGraph(g.src.to(torch.int32), g.dst.to(torch.int32), num_nodes=g.num_nodes)
        gen = torch.Generator().manual_seed(5)
        x = torch.randn(g.num_nodes, width, generator=gen).to(device).requires_grad_(True)
        for fraction in (0.01, 0.10):
            train = torch.randperm(g.num_nodes, generator=gen)[:max(1, int(fraction * g.num_nodes))].to(device)
            for depth in (0, 1):
                row = dict(graph=g.name, nodes=g.num_nodes, edges=g.num_edges, train_fraction=fraction, depth=depth,
                           width=width, dtype="float32")
                try:
                    t0 = time.perf_counter()
                    mask = frontier(g, train, depth)
                    keep = mask[g.dst]
                    sub = TensorGraph(g.src[keep].to(torch.int32), g.dst[keep].to(torch.int32), num_nodes=g.num_nodes)
                    sub.csr("out")
                    synchronize(device)
                    prep = time.perf_counter() - t0
                    gout = torch.randn(g.num_nodes, width, generator=gen).to(device) * mask[:, None]
                    out_full = aggregate(views, "copy_u", "sum", x, norm="both")
                    out_path = aggregate(views, "copy_u", "sum", x, norm="both", plan=PathPlan(sub))
                    full = torch.autograd.grad(out_full, x, gout, retain_graph=True)[0]
                    path = torch.autograd.grad(out_path, x, gout, retain_graph=True)[0]
                    assert_close(path, full.double(), msg="path backward vs full backward")
                    t_full = median_seconds(_backward(out_full, x, gout), device, **timing)
                    t_path = median_seconds(_backward(out_path, x, gout), device, **timing)
                    row.update(ok=True, path_edges=int(keep.sum()), frontier_rows=int(mask.sum()),
                               full_ms=t_full * 1e3, paths_ms=t_path * 1e3, speedup=t_full / t_path,
                               prep_ms=prep * 1e3)
                except Exception as exc:  # a failing case is a row, not the end of the report
                    row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
                results.add("exec_paths", **row)
        last = results.section("exec_paths")[-4:]
        progress(f"  execution paths on {g.name}: " + ", ".join(
            f"{r['train_fraction']:.0%} d{r['depth']} {r.get('speedup', float('nan')):.2f}x" for r in last))
