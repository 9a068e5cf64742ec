"""GraphACT on the device: the redundancy-reduced aggregation (:mod:`dgl_accel.core.redundancy`)
against the plain one on GraphSAINT random-walk subgraphs, the graphs GraphACT trains on.

Per graph, a few subgraphs (``roots`` uniform roots, walks of 2 hops, the nodes they visit and every
edge between them, as ``SAINTSampler(mode="walk")`` draws them); per subgraph the plan is built once
(the rewrite runs on the host) and, per width, copy_u-sum forward+backward is timed plain and
through the plan, interleaved.  Each row says what the cost model predicts for one aggregation
(what ``use_redundancy("auto")`` routes on) and what was measured; :func:`summary` counts how often
the prediction picked the faster and fits the model's constants to the timings
(:func:`~dgl_accel.core.redundancy.cost.fit_constants`), for the next change of its defaults.
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.aggregation.function import aggregate
from ..core.aggregation.views import TensorGraph
from ..core.redundancy.cost import fit_constants, per_aggregation_seconds, predicts_gain
from ..core.redundancy.transform import reduce_edges
from ..core.sampling.induced.subgraph import InCSR
from ..core.sampling.induced.subgraph_device import induced_device
from ..core.sampling.saint.draw import build_tables, draw_walk
from .graphs import Graph
from .timing import median_seconds

WIDTHS = (64, 128, 256)


def walk_subgraph(g: Graph, tables, s_in, roots: int, seed: int) -> TensorGraph:
    """One GraphSAINT walk subgraph of ``g`` on its device, relabelled 0..k-1."""
    nodes = torch.from_numpy(draw_walk(tables, roots, 2, seed)).to(g.src.device)
    indptr, local_src, _ = induced_device(s_in, nodes)
    dst = torch.repeat_interleave(torch.arange(nodes.numel(), device=indptr.device), indptr[1:] - indptr[:-1])
    return TensorGraph(local_src, dst, num_nodes=int(nodes.numel()))


def _fwd_bwd(fn, x, gout):
    def run():
        xg = x.detach().requires_grad_(True)
        out = fn(xg)
        out.backward(gout)
        return out
    return run


def bench_subgraph(sub: TensorGraph, plan, width: int, dtype, device, timing: dict) -> dict:
    gen = torch.Generator(device=device).manual_seed(width)
    x = torch.randn(sub.num_src, width, generator=gen, device=device).to(dtype)
    gout = torch.randn(sub.num_dst, width, generator=gen, device=device).to(dtype)
    plain = median_seconds(_fwd_bwd(lambda xg: aggregate(sub, "copy_u", "sum", xg), x, gout), device, **timing)
    rewritten = median_seconds(_fwd_bwd(plan.aggregate, x, gout), device, **timing)
    stats = plan.summary()
    model = predicts_gain(stats, width, 1, aggregations_per_layer=1, device=device.type, include_transform=False)
    t0, t1 = per_aggregation_seconds(stats, width, device.type)
    return dict(width=width, dtype=str(dtype).replace("torch.", ""), nodes=sub.num_src, edges=sub.num_edges,
                **{k: stats[k] for k in ("edges_rewritten", "pair_nodes", "rounds", "gamma_read", "gamma_add")},
                transform_ms=stats["transform_seconds"] * 1e3, plain_ms=plain * 1e3, plan_ms=rewritten * 1e3,
                measured_gain=plain / rewritten, predicted=bool(model), model_gain=t0 / t1 if t1 else 1.0,
                picked_faster=bool(model) == (rewritten < plain), ok=True)


def run(results, graphs: list[Graph], device, timing: dict, tiny: bool, progress, deadline=None) -> None:
    """Rows ``graphact``: per graph of ``graphs``, subgraph and width."""
    roots, count, widths = (40, 2, (16,)) if tiny else (3000, 4, WIDTHS)
    for g in graphs:
        whole = TensorGraph(g.src, g.dst, num_nodes=g.num_nodes)
        s_in = whole.csr("in")
        tables = build_tables(InCSR.from_structure(s_in), whole.csr("out"))
        progress(f"  GraphACT on {g.name}: {count} walk subgraphs of {roots} roots")
        for k in range(count):
            if deadline is not None and deadline.passed():
                results.add("skipped", part="graphact", cases=count - k, reason="budget spent")
                break
            sub = walk_subgraph(g, tables, s_in, roots, seed=k)
            src, dst = sub.edges_by_id()
            plan = reduce_edges(src, dst, sub.num_src, sub.num_dst)
            for width in widths:
                row = bench_subgraph(sub, plan, width, torch.float32, device, timing)
                results.add("graphact", graph=g.name, subgraph=k, roots=roots, **row)


def summary(rows: list[dict]) -> dict:
    """How often the model picked the faster (goal 90%), the median measured gain, and the constants
    fitted to these timings (forward+backward is two aggregations)."""
    rows = [r for r in rows if r.get("ok")]
    if not rows:
        return {}
    samples = [dict(edges=r["edges"], edges_rewritten=r["edges_rewritten"], pair_nodes=r["pair_nodes"],
                    rounds=r["rounds"], feat_dim=r["width"], original_seconds=r["plain_ms"] / 2e3,
                    rewritten_seconds=r["plan_ms"] / 2e3) for r in rows]
    fit = fit_constants(samples) if len(samples) >= 2 else None
    return dict(cases=len(rows), picked_faster=float(np.mean([r["picked_faster"] for r in rows])),
                faster=int(sum(r["measured_gain"] > 1 for r in rows)),
                median_gain=float(np.median([r["measured_gain"] for r in rows])), fitted=fit)
