"""What the aggregation's per-graph locality split costs to build, against the aggregation it serves.

The split (``dgl_accel.core.aggregation.locality``) is built once per graph and view; a training
run then aggregates on that graph hundreds of times.  Per graph and width: build both views' plans
(forward ``in`` and backward ``out``) on a graph seen for the first time, its CSRs and neighbour
groups already built (a training run's first step builds those anyway), and time one plain
copy_u-sum forward on the same machine (the native CPU path here; the GPU report's aggregation
section does the same on the device).  The bar (issue 29): ``plan / forward <= 10``.  Off a GPU there
is no L2 to size the hot set for, so it is a sixteenth of the rows (``gpu_report.aggregation.split_l2``),
the size class of R-MAT 22's hot set on an H100 (1.2% of its rows).

    .venv/bin/python bench/bench_aggregation_plan.py [--quick] [--widths 64,128,256] [--rmat 20]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import torch  # noqa: E402

from bench.harness import print_table, record  # noqa: E402
from dgl_accel.gpu_report.aggregation import plan_build_case  # noqa: E402
from dgl_accel.gpu_report.graphs import load_npz, rmat, shared_paths  # noqa: E402

GOAL = 10


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two largest shared graphs at F=128 (about a minute)")
    ap.add_argument("--widths", default="64,128,256")
    ap.add_argument("--rmat", type=int, default=20, help="also an R-MAT graph of this scale (0: none; full run only)")
    ap.add_argument("--no-record", action="store_true", help="print only, do not append to bench/results")
    args = ap.parse_args(argv)
    device = torch.device("cpu")
    widths = (128,) if args.quick else tuple(int(w) for w in args.widths.split(","))
    graphs = [load_npz(p, device) for p in shared_paths(None)[:2 if args.quick else 3]]
    if args.rmat and not args.quick:
        graphs.append(rmat(args.rmat, device))
    if not graphs:
        print("bench_aggregation_plan: no shared npz graphs here; using R-MAT 16", file=sys.stderr)
        graphs = [rmat(16, device)]
    rows = []
    for g in graphs:
        for width in widths:
            r = plan_build_case(g, width, torch.float32, device, {"warmup": 1, "repeats": 3 if args.quick else 5})
            rows.append(dict(case=f"{g.name} F={width}", provider="locality plan", median=r["plan_ms"] / 1e3,
                             min=r["plan_min_ms"] / 1e3, max=r["plan_max_ms"] / 1e3, forward_ms=r["fwd_ms"],
                             plan_over_forward=r["plan_over_fwd"], hot_rows=r["hot_rows"], hot_share=r["hot_share"],
                             nodes=g.num_nodes, edges=g.num_edges, split=r["split"]))
            print(f"  {g.name} F={width}: plan {r['plan_ms']:.1f} ms, forward {r['fwd_ms']:.1f} ms "
                  f"({r['plan_over_fwd']:.2f} forwards)", file=sys.stderr, flush=True)
    print_table(rows, ["forward_ms", "plan_over_forward", "hot_rows", "hot_share"])
    if not args.no_record:
        record("aggregation_plan", rows)
    worst = max(r["plan_over_forward"] for r in rows)
    ok = worst <= GOAL and all(r["split"] for r in rows)
    print(f"summary: worst plan / forward = {worst:.2f} (bar {GOAL}) -> {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
