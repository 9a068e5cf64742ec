"""Random-walk benchmark: dgl_accel's CPU walks vs DGL's C++ samplers.

Cases per graph: DeepWalk (uniform, length 80) and node2vec (p=0.5, q=2, length 80), from
``num_walks`` random start nodes (all nodes if fewer).  Providers are interleaved repeat by
repeat so background load hits both alike; each row reports the median/min/max over repeats and
``steps_per_s`` = num_walks * length / median.

    .venv/bin/python -m bench.sampling_walks [--quick] [--record] [graph ...]
"""
from __future__ import annotations

import argparse

import torch

from bench.harness import interleaved

DEFAULT_GRAPHS = ("snap_soc-Slashdot0902", "hetero_tolokers", "fb100_Cornell5")
LENGTH = 80
P, Q = 0.5, 2.0


def bench_walks(graph_names=DEFAULT_GRAPHS, quick: bool = False, num_walks: int | None = None,
                repeat: int | None = None) -> list[dict]:
    """Rows ``{case, provider, median, min, max, repeat, steps_per_s, graph, num_walks, length}``
    for :func:`bench.harness.record` (providers "dgl" and "dgl_accel")."""
    import dgl

    from dgl_accel.data import load
    from dgl_accel.sampling import node2vec_random_walk, random_walk

    num_walks = num_walks or (20_000 if quick else 100_000)
    repeat = repeat or (3 if quick else 7)
    rows = []
    for name in graph_names:
        g = load(name, features="none")
        gen = torch.Generator().manual_seed(0)
        W = num_walks
        nodes = torch.randint(g.num_nodes(), (W,), generator=gen).to(g.idtype)
        cases = {
            "deepwalk": {
                "dgl": lambda: dgl.sampling.random_walk(g, nodes, length=LENGTH),
                "dgl_accel": lambda: random_walk(g, nodes, length=LENGTH, seed=1),
            },
            "node2vec": {
                "dgl": lambda: dgl.sampling.node2vec_random_walk(g, nodes, P, Q, LENGTH),
                "dgl_accel": lambda: node2vec_random_walk(g, nodes, P, Q, LENGTH, seed=1),
            },
        }
        for case, fns in cases.items():
            res = interleaved(fns, warmup=1, repeat=repeat)
            for prov, t in res.items():
                rows.append({"case": f"{case}/{name}", "provider": prov, **t,
                             "steps_per_s": W * LENGTH / t["median"], "graph": name,
                             "num_walks": W, "length": LENGTH})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("graphs", nargs="*", default=list(DEFAULT_GRAPHS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--num-walks", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--record", action="store_true", help="append rows to bench/results/sampling_walks.*")
    a = ap.parse_args(argv)
    from bench.harness import compare, print_table, record

    rows = bench_walks(a.graphs, quick=a.quick, num_walks=a.num_walks, repeat=a.repeat)
    print(f"torch threads: {torch.get_num_threads()}")
    print_table(rows, ["steps_per_s"])
    for case, speedup in compare(rows).items():
        print(f"{case:40s} dgl_accel speedup {speedup:.2f}x")
    if a.record:
        record("sampling_walks", rows)


if __name__ == "__main__":
    main()
