"""PyG's models as written against the same models after ``dgl_accel.pyg.swap``, one training step a
case, on the CPU (issue 30, item 4: what a CPU user of PyG gains).

Cases (``examples/pyg_train.py`` trains them; this bench records its timings): full-graph GCN
(2 x GCNConv, hidden 256) and GAT (8 heads x 8, then 1 head), minibatch GraphSAGE (3 x SAGEConv 256,
fanouts [15, 10, 5], batch 1024, our ``NeighborSampler`` through PyG's ``NodeLoader`` for both
providers: PyG's own sampler needs pyg-lib), on Graph500 R-MAT graphs with 128 random features.
Per case both providers train from the same weights, epoch by epoch in turn (interleaved); the
first epoch is left out of the times (caches, compilation).  Rows: median / min / max of the step
(an epoch: full graph; ``--batches`` minibatches: SAGE), the SAGE split (sample / gather / forward /
backward), and the largest relative loss gap between the providers (they must agree).

Usage: python bench/bench_pyg.py [--quick] [--graphs rmat:14,rmat:16] [--epochs 8] [--threads 1]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.harness import print_table, record  # noqa: E402
from dgl_accel.gpu_report.training import OURS, PYG, require_ok, train  # noqa: E402
from examples.pyg_train import graph  # noqa: E402

BENCH = "pyg"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="rmat:12, 4 epochs (about a minute)")
    p.add_argument("--graphs", default=None, help="comma-separated rmat:SCALE (default rmat:14,rmat:16)")
    p.add_argument("--models", default="gcn,gat,sage")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--results-dir", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    graphs = (args.graphs or ("rmat:12" if args.quick else "rmat:14,rmat:16")).split(",")
    epochs = args.epochs or (4 if args.quick else 8)
    started, rows = time.perf_counter(), []
    for spec in graphs:
        data, classes = graph(spec, torch.device("cpu"))
        print(f"== {spec}: {data.num_nodes} nodes, {data.num_edges} edges", file=sys.stderr)
        for model in args.models.split(","):
            pair = require_ok(train(model, data, classes, [PYG, OURS], epochs=epochs, batches=args.batches))
            for r in pair:
                t = r["step_times"]
                rows.append({"case": f"{model} {spec} t{args.threads}", "provider": r["provider"],
                             "median": statistics.median(t), "min": min(t), "max": max(t), "repeat": len(t),
                             "model": model, "graph": spec, "threads": args.threads, "nodes": data.num_nodes,
                             "edges": data.num_edges, **{k: v for k, v in r.items() if k.endswith("_s")},
                             "loss_gap": pair[1]["max_relative_loss_gap"]})
            rows[-1]["ratio"] = rows[-2]["median"] / rows[-1]["median"]
            print(f"{model} {spec}: PyG {rows[-2]['median'] * 1e3:.1f} ms, ours {rows[-1]['median'] * 1e3:.1f} ms, "
                  f"{rows[-1]['ratio']:.2f}x, loss gap {rows[-1]['loss_gap']:.1e}; "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    record(BENCH, rows, args.results_dir)
    print_table(rows, columns=["ratio", "loss_gap"])
    ours = [r for r in rows if r["provider"] == "dgl_accel"]
    geo = statistics.geometric_mean(r["ratio"] for r in ours)
    print(f"summary: {len(ours)} cases in {time.perf_counter() - started:.0f} s, PyG median / ours median: "
          f"geomean {geo:.2f}x, min {min(r['ratio'] for r in ours):.2f}x; largest loss gap "
          f"{max(r['loss_gap'] for r in ours):.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
