"""GraphSAINT frontier-sampler benchmark: the Dashboard sampler (``frontier_sample``, CPU path:
many instances vectorised in numpy) against the paper's sequential algorithm
(``frontier_sample_sequential``: one subgraph at a time, an O(m) cumulative sum per step).

Configuration: frontier m = 1000, budget n = 4000 distinct vertices, eta = 2, no degree clip.
GraphSAINT's own frontier ("mrw") configs use m = 1000 / n = 8000 (Reddit, 233k nodes) and
m = 2500 / n = 8000 (PPI); the IPDPS'19 C++ code defaults to m = 3000 / n = 9000 with
ETA = 1.5 and a degree clip of 3000.  We keep Reddit's frontier and scale the budget to these
smaller graphs (n = 4000 is 21% of fb100_Cornell5's 18.7k nodes, 4.9% of Slashdot's 82k); the
clip of 3000 would hardly bind here (max degrees 3156 and 2552).

Providers are interleaved repeat by repeat so background load hits both alike.  Each row has
median/min/max seconds per call over ``repeat`` calls and ``subgraphs_per_s`` =
subgraphs per call / median; the dashboard sampler makes ``num_instances`` subgraphs per call,
the sequential one 1.

    .venv/bin/python -m bench.saint_frontier [--quick] [--record] [graph ...]
"""
from __future__ import annotations

import argparse

from bench.harness import interleaved

DEFAULT_GRAPHS = ("fb100_Cornell5", "snap_soc-Slashdot0902")
NUM_ROOTS, BUDGET = 1000, 4000


def bench_frontier(graph_names=DEFAULT_GRAPHS, quick: bool = False, num_instances: int | None = None,
                   repeat: int | None = None) -> list[dict]:
    """Rows ``{case, provider, median, min, max, repeat, subgraphs_per_s, graph, num_roots, budget,
    num_instances}`` (providers "sequential" and "dgl_accel") for :func:`bench.harness.record`."""
    from dgl_accel.data import load
    from dgl_accel.sampling.frontier import frontier_sample, frontier_sample_sequential

    inst = num_instances or (16 if quick else 64)
    rep = repeat or (2 if quick else 5)
    rows = []
    for name in graph_names:
        g = load(name, features="none")
        calls = {"seq": 0, "fast": 0}

        def seq():
            calls["seq"] += 1  # a new seed per call: a fresh subgraph every time
            return frontier_sample_sequential(g, NUM_ROOTS, BUDGET, num_instances=1, seed=calls["seq"])

        def fast():
            calls["fast"] += 1
            return frontier_sample(g, NUM_ROOTS, BUDGET, num_instances=inst, seed=calls["fast"])

        # The sequential sampler makes one subgraph per call: time 3x more calls of it.
        res = interleaved({"sequential": seq, "dgl_accel": fast}, warmup=1,
                           repeat={"sequential": 3 * rep, "dgl_accel": rep})
        for prov, t in res.items():
            per_call = inst if prov == "dgl_accel" else 1
            rows.append({"case": f"frontier_m{NUM_ROOTS}_n{BUDGET}/{name}", "provider": prov, **t,
                         "subgraphs_per_s": per_call / t["median"], "graph": name, "num_roots": NUM_ROOTS,
                         "budget": BUDGET, "num_instances": per_call})
    return rows


def ratios(rows) -> dict:
    """``{case: dgl_accel subgraphs/s / sequential subgraphs/s}``."""
    sps = {(r["case"], r["provider"]): r["subgraphs_per_s"] for r in rows}
    return {c: sps[(c, "dgl_accel")] / sps[(c, "sequential")] for c, p in sps
            if p == "dgl_accel" and (c, "sequential") in sps}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("graphs", nargs="*", default=list(DEFAULT_GRAPHS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--num-instances", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--record", action="store_true", help="append rows to bench/results/saint_frontier.*")
    a = ap.parse_args(argv)
    from bench.harness import print_table, record

    rows = bench_frontier(a.graphs, quick=a.quick, num_instances=a.num_instances, repeat=a.repeat)
    print_table(rows, ["num_instances", "subgraphs_per_s"])
    for case, ratio in ratios(rows).items():
        print(f"{case:45s} dgl_accel / sequential subgraphs per second: {ratio:.2f}x")
    if a.record:
        record("saint_frontier", rows)


if __name__ == "__main__":
    main()
