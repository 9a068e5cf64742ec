"""GraphSAINT sampler benchmark: dgl_accel's ``SAINTSampler`` vs ``dgl.dataloading.SAINTSampler``.

Cases per graph: node (budget 4,000 draws), edge (budget 4,000 edges) and walk (1,000 roots x 2
hops), one ``sampler.sample(g, ...)`` call = one node-induced subgraph with NID/EID mappings.  The
node case runs dgl_accel with ``node_prob="degree"``, DGL's distribution (P(v) ∝ out-degree), so
both build subgraphs of the same size; "node_norm" adds dgl_accel's default GraphSAINT
distribution (P(v) ∝ ||Ã[:, v]||², smaller subgraphs on these graphs) for information, against the
same DGL baseline.  Each repeat times ``per_repeat`` consecutive subgraphs per provider,
providers interleaved repeat by repeat so background load hits both alike; times are per
subgraph; ``nodes`` / ``edges`` = mean subgraph size.  Normalisation is off (it is a one-time
pre-computation; per subgraph it adds two gathers).

    .venv/bin/python -m bench.saint_samplers [--quick] [--record] [graph ...]
"""
from __future__ import annotations

import argparse

import torch

from bench.harness import interleaved

DEFAULT_GRAPHS = ("fb100_Cornell5", "snap_soc-Slashdot0902")
CASES = (("node", 4000, {"node_prob": "degree"}), ("edge", 4000, {}), ("walk", (1000, 2), {}),
         ("node_norm", 4000, {"node_prob": "norm"}))


def _sizes(fn, k=5):
    sgs = [fn() for _ in range(k)]
    return (sum(s.num_nodes() for s in sgs) / k, sum(s.num_edges() for s in sgs) / k)


def bench_saint_samplers(graph_names=DEFAULT_GRAPHS, quick: bool = False, repeat: int | None = None,
                         per_repeat: int | None = None, cases=None) -> list[dict]:
    """Rows ``{case, provider, median, min, max, repeat, subgraphs_per_s, graph, mode, budget, nodes,
    edges}`` (times in seconds per subgraph) for :func:`bench.harness.record`."""
    import dgl.dataloading

    from dgl_accel.data import load
    from dgl_accel.sampling import SAINTSampler

    repeat = repeat or (3 if quick else 9)
    per_repeat = per_repeat or (5 if quick else 20)
    rows = []
    for name in graph_names:
        g = load(name, features="none")
        for case, budget, extra in (cases or CASES):
            mode = case.split("_")[0]
            torch.manual_seed(0)
            ref = dgl.dataloading.SAINTSampler(mode, budget)
            ours = SAINTSampler(mode, budget, seed=0, **extra)
            one = {"dgl": lambda: ref.sample(g, None), "dgl_accel": lambda: ours.sample(g)}
            fns = {k: (lambda f=f: [f() for _ in range(per_repeat)]) for k, f in one.items()}
            res = interleaved(fns, warmup=1, repeat=repeat)
            for prov, t in res.items():
                per = {k: t[k] / per_repeat for k in ("median", "min", "max")}
                nodes, edges = _sizes(one[prov])
                rows.append({"case": f"{case}/{name}", "provider": prov, **per, "repeat": t["repeat"],
                             "subgraphs_per_s": 1.0 / per["median"], "graph": name, "mode": mode,
                             "budget": str(budget), "nodes": nodes, "edges": edges})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graphs", nargs="*", default=list(DEFAULT_GRAPHS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--per-repeat", type=int, default=None)
    ap.add_argument("--record", action="store_true", help="append rows to bench/results/saint_samplers.*")
    a = ap.parse_args(argv)
    from bench.harness import compare, print_table, record

    rows = bench_saint_samplers(a.graphs, quick=a.quick, repeat=a.repeat, per_repeat=a.per_repeat)
    print(f"torch threads: {torch.get_num_threads()}")
    print_table(rows, ["subgraphs_per_s", "nodes", "edges"])
    for case, speedup in compare(rows).items():
        print(f"{case:40s} dgl_accel speedup {speedup:.2f}x")
    if a.record:
        record("saint_samplers", rows)


if __name__ == "__main__":
    main()
