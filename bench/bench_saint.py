"""GraphSAINT benchmarks (issue 7), each ratio measured in one run on this machine:

* node / edge / walk samplers vs DGL's ``SAINTSampler``, subgraphs per second, on
  fb100_Cornell5 and snap_soc-Slashdot0902 (walk: 1,000 roots x 2 hops; node, edge: budget 4,000);
  bar: >= 2.5x;
* the parallel frontier sampler (Dashboard, many instances) vs the sequential algorithm;
* GraphACT redundancy reduction on sampled subgraphs of every npz graph: gamma_read, gamma_add,
  and aggregation time at F = 256 on rewritten vs original subgraphs, with the transform cost
  amortised over 3L = 6 aggregations.

Usage: python bench/bench_saint.py [--quick] [--skip samplers,frontier,redundancy]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

from bench.harness import compare, print_table, record  # noqa: E402
from dgl_accel import data  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: samplers, frontier, redundancy")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    if data.datasets_root() is None:
        print("no ../shared/datasets here: nothing to compare on", file=sys.stderr)
        return 0
    summary = []
    if "samplers" not in skip:
        from bench.saint_samplers import bench_saint_samplers

        rows = bench_saint_samplers(quick=args.quick)
        print_table(rows, ["subgraphs_per_s", "nodes", "edges"])
        record("saint_samplers", rows)
        r = compare(rows)
        for case, x in r.items():
            print(f"  {case}: {x:.2f}x DGL's SAINTSampler (bar 2.5x)")
        summary.append(f"sampler_min_ratio={min(r.values()):.2f}")
    if "frontier" not in skip:
        from bench.saint_frontier import bench_frontier, ratios

        rows = bench_frontier(quick=args.quick)
        print_table(rows, ["subgraphs_per_s"])
        record("saint_frontier", rows)
        r = ratios(rows)
        for case, x in r.items():
            print(f"  {case}: {x:.2f}x the sequential frontier sampler")
        summary.append(f"frontier_min_ratio={min(r.values()):.2f}")
    if "redundancy" not in skip:
        from bench.saint_redundancy import bench_redundancy

        rows = bench_redundancy(quick=args.quick)
        print_table(rows, ["nodes", "edges", "pair_nodes", "gamma_read", "gamma_add", "transform_ms", "original_ms",
                           "speedup", "amortised", "model_pays"])
        record("saint_redundancy", rows)
        summary.append(f"redundancy_amortised_geomean="
                       f"{_geomean([r['amortised'] for r in rows]):.2f}")
    print(" ".join(summary))
    return 0


def _geomean(xs):
    import math

    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


if __name__ == "__main__":
    sys.exit(main())
