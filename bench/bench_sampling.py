"""Sampling benchmarks vs DGL's CPU samplers, measured in one run.

* NeighborSampler, fanouts [15, 10, 5], batch 1024: seeds/s including block construction
  (acceptance: >= 1.0x DGL's NeighborSampler);
* heterograph NeighborSampler (Slashdot split into 2 node types and 3 relations, see
  bench/sampling_hetero.py), per-edge-type fanouts [15, 10, 5]: seeds/s (>= 1.5x DGL's);
* DeepWalk walks of length 80 (>= 1.0x dgl.sampling.random_walk) and node2vec p=0.5 q=2
  (>= 1.5x dgl.sampling.node2vec_random_walk),
on snap_soc-Slashdot0902, hetero_tolokers and fb100_Cornell5.  With CUDA, a GPU mode reports
sampled edges per second of the Triton neighbour-choice kernel.

Usage: python bench/bench_sampling.py [--quick] [--graphs a,b] [--device auto|cpu|cuda]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import torch  # noqa: E402

from bench.harness import print_table, record, time_fn  # noqa: E402
from dgl_accel import data  # noqa: E402

GRAPHS = ("snap_soc-Slashdot0902", "hetero_tolokers", "fb100_Cornell5")


def _ratios(rows, metric):
    """{case: ours / dgl} for a throughput column (higher is better)."""
    by_case: dict = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["provider"]] = r[metric]
    return {c: v["dgl_accel"] / v["dgl"] for c, v in by_case.items() if "dgl" in v and "dgl_accel" in v}


def gpu_mode(graph_names, quick):
    """Sampled edges per second of the Triton neighbour-choice kernel (fanout 15, all nodes)."""
    from dgl_accel.core.sampling.neighbor.launchers import neighbor_choice_triton
    from dgl_accel.graph.structure import in_csr

    rows = []
    for name in graph_names:
        g = data.load(name, features="none").to("cuda")
        csr = in_csr(g)
        transits = torch.randperm(g.num_nodes(), device="cuda")[: 1024 if quick else 65536]
        for replace in (True, False):
            t = time_fn(lambda: neighbor_choice_triton(csr.indptr, transits, 15, seed=1, step=0,
                                                       num_nodes=g.num_nodes(), replace=replace), warmup=2, repeat=10)
            rows.append({"case": f"{name} fanout 15 replace={replace}", "provider": "dgl_accel", **t,
                         "edges_per_s": transits.numel() * 15 / t["median"]})
    print_table(rows)
    record("sampling_gpu", rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = ap.parse_args(argv)
    names = args.graphs.split(",")
    if data.datasets_root() is None:
        print("no ../shared/datasets here: nothing to compare on", file=sys.stderr)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("expected a CUDA device for --device cuda (got none). Fix: run on a GPU machine or use --device cpu.",
              file=sys.stderr)
        return 1
    if args.device in ("auto", "cpu"):
        from bench.sampling_hetero import bench_hetero
        from bench.sampling_neighbor import bench_neighbor
        from bench.sampling_walks import bench_walks

        neighbor_rows = bench_neighbor(names, quick=args.quick)
        hetero_rows = bench_hetero([n for n in names if n == "snap_soc-Slashdot0902"], quick=args.quick)
        walk_rows = bench_walks(names, quick=args.quick)
        record("sampling", neighbor_rows + hetero_rows + walk_rows)
        groups = {"neighbor": _ratios(neighbor_rows, "seeds_per_s"),
                  "hetero_neighbor": _ratios(hetero_rows, "seeds_per_s"),
                  "deepwalk": {c: r for c, r in _ratios(walk_rows, "steps_per_s").items() if "deepwalk" in c},
                  "node2vec": {c: r for c, r in _ratios(walk_rows, "steps_per_s").items() if "node2vec" in c}}
        print("\nratio ours / dgl (throughput; bars: NeighborSampler and DeepWalk >= 1.0, "
              "heterograph NeighborSampler and node2vec >= 1.5)")
        for group in groups.values():
            for case, r in group.items():
                print(f"  {case}: {r:.2f}x")
        print(" ".join(f"{k}_min_ratio={min(v.values()):.2f}" if v else f"{k}_min_ratio=nan"
                       for k, v in groups.items()))
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        gpu_mode(names, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
