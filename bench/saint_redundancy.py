"""GraphACT redundancy reduction on GraphSAINT-size subgraphs: savings, transform cost, CPU timing.

For each npz graph, a few node-induced subgraphs from GraphSAINT's random-walk sampler (``roots``
roots x ``hops`` hops; ``dgl_accel.sampling.SAINTSampler(mode="walk")`` when it exists, else
``dgl.sampling.random_walk`` + ``g.subgraph``).  Per subgraph: gamma_read, gamma_add, pair nodes,
transform seconds, and the forward sum aggregation at F = 256 on the CPU, original graph
(dgl_accel.functional.gspmm, DGL's native SpMM underneath) vs through the plan, interleaved repeat by
repeat.  ``amortised`` = (3L aggregations on the original) / (transform + 3L through the plan)
for L = 2: > 1 means the rewrite pays within one training iteration on that subgraph.

    .venv/bin/python -m bench.saint_redundancy [--quick] [--record] [graph ...]
"""
from __future__ import annotations

import argparse

import torch

from bench.harness import interleaved

FEAT_DIM = 256
NUM_LAYERS = 2
AGGS = 3 * NUM_LAYERS  # GraphACT's 3L, see dgl_accel/core/redundancy/cost.py
COLUMNS = ["nodes", "edges", "pair_nodes", "gamma_read", "gamma_add", "transform_ms", "original_ms",
           "original_min_ms", "speedup", "amortised", "model_pays"]


def saint_walk_subgraph(g, roots: int, hops: int, seed: int):
    """One GraphSAINT random-walk subgraph (node-induced on the walks' nodes)."""
    import dgl

    import dgl_accel.sampling as S

    roots = min(roots, g.num_nodes())  # small graphs (Cora): every node a root
    if hasattr(S, "SAINTSampler"):
        try:
            return S.SAINTSampler(mode="walk", budget=(roots, hops), seed=seed).sample(g, None)
        except TypeError:  # a different constructor than DGL's: fall back to the plain recipe
            pass
    dgl.seed(seed)
    gen = torch.Generator().manual_seed(seed)
    start = torch.randint(g.num_nodes(), (roots,), generator=gen).to(g.idtype)
    traces, _ = dgl.sampling.random_walk(g, start, length=hops)
    nodes = torch.unique(traces[traces >= 0])
    return g.subgraph(nodes)


def bench_redundancy(graph_names=None, quick: bool = False, roots: int = 3000, hops: int = 2,
                     num_subgraphs: int | None = None, repeat: int | None = None) -> list[dict]:
    """Rows (one per subgraph) for :func:`bench.harness.record`; ``median``/``min``/``max`` are the
    aggregation through the plan, ``original_ms`` the original aggregation's median."""
    from dgl_accel import data
    from dgl_accel.functional import gspmm
    from dgl_accel.policies.redundancy import predicts_gain, reduce_redundancy

    if graph_names is None:
        graph_names = [n for n in data.available() if n not in data.registry.SYNTHETIC_NAMES
                       and n not in ("cora", "citeseer")]  # the npz graphs
    num_subgraphs = num_subgraphs or (1 if quick else 3)
    repeat = repeat or (3 if quick else 9)
    rows = []
    for name in graph_names:
        g = data.load(name, features="none")
        for i in range(num_subgraphs):
            sg = saint_walk_subgraph(g, roots, hops, seed=1000 + i)
            plan = reduce_redundancy(sg)
            x = torch.randn(sg.num_nodes(), FEAT_DIM, generator=torch.Generator().manual_seed(i))
            t = interleaved({"original": lambda: gspmm(sg, "copy_u", "sum", x),
                              "redundancy": lambda: plan.aggregate(x)}, warmup=1, repeat=repeat)
            t0, t1 = t["original"]["median"], t["redundancy"]["median"]
            rows.append({
                "case": f"{name}#{i}", "provider": "redundancy", **t["redundancy"],
                "graph": name, "nodes": sg.num_nodes(), "edges": sg.num_edges(),
                "edges_rewritten": plan.num_edges_rewritten, "pair_nodes": plan.num_pair_nodes,
                "rounds": len(plan.rounds), "gamma_read": plan.gamma_read, "gamma_add": plan.gamma_add,
                "transform_ms": plan.transform_seconds * 1e3, "original_ms": t0 * 1e3,
                "original_min_ms": t["original"]["min"] * 1e3, "speedup": t0 / t1,
                "amortised": AGGS * t0 / (plan.transform_seconds + AGGS * t1),
                "model_pays": bool(predicts_gain(plan, FEAT_DIM, NUM_LAYERS)), "feat_dim": FEAT_DIM,
                "num_layers": NUM_LAYERS, "roots": roots, "hops": hops,
            })
    return rows


def main(argv=None) -> None:
    from bench.harness import print_table, record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="*")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--roots", type=int, default=3000)
    args = ap.parse_args(argv)
    rows = bench_redundancy(args.graphs or None, quick=args.quick, roots=args.roots)
    if args.record:
        record("saint_redundancy", rows)
    print_table(rows, COLUMNS)


if __name__ == "__main__":
    main()
