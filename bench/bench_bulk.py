"""Bulk sampling throughput: ``BulkNeighborSampler`` sampling k = 32 minibatches in one pass vs the
same 32 minibatches sampled one at a time by dgl_accel's ``NeighborSampler`` and by DGL's
``dgl.dataloading.NeighborSampler`` (fanouts [15, 10, 5], batch 1024, snap_soc-Slashdot0902).

    python -m bench.bench_bulk [--quick] [--no-record] [--k 32] [--rounds N] [graph]

Seeds/s include block construction (every provider returns DGL blocks for all 32 minibatches).
Providers are interleaved (one timed round of each in turn, order alternating, the same seed
batches for all) so load from other processes hits all alike.  The bulk time is also split into
probability (building Q/P + NORM), sampling (ITS) and extraction (blocks).  The last line is
``bulk_vs_ours=<x> bulk_vs_dgl=<y>`` (ratios of median times; > 1: bulk is faster).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import torch  # noqa: E402

FANOUTS = [15, 10, 5]
BATCH = 1024
GRAPH = "snap_soc-Slashdot0902"


def bench_bulk(graph: str = GRAPH, k: int = 32, rounds: int = 9, warmup: int = 1, batch: int = BATCH) -> list[dict]:
    import dgl

    from dgl_accel import data
    from dgl_accel.sampling import BulkNeighborSampler, NeighborSampler

    g = data.load(graph, features="none")
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(g.num_nodes(), generator=gen)
    batches = [perm[(i * batch) % (g.num_nodes() - batch):][:batch] for i in range(k)]
    bulk = BulkNeighborSampler(FANOUTS, bulk=k, seed=0)
    ours = NeighborSampler(FANOUTS, seed=0)
    theirs = dgl.dataloading.NeighborSampler(FANOUTS)
    split = {"probability": [], "sampling": [], "extraction": []}

    def run_bulk():
        out = bulk.bulk_sample(g, batches)
        for key in split:
            split[key].append(bulk.last_timing[key])
        return out

    providers = {
        "bulk": run_bulk,
        "dgl_accel": lambda: [ours.sample_blocks(g, b) for b in batches],
        "dgl": lambda: [theirs.sample_blocks(g, b) for b in batches],
    }
    times = {p: [] for p in providers}
    edges = {p: 0 for p in providers}
    names = list(providers)
    for r in range(warmup + rounds):
        order = names if r % 2 == 0 else names[::-1]
        for p in order:
            t0 = time.perf_counter()
            res = providers[p]()
            dt = time.perf_counter() - t0
            if r >= warmup:  # the first round builds cached CSRs / compiles numba loops
                times[p].append(dt)
                edges[p] += sum(bl.num_edges() for _, _, blocks in res for bl in blocks)
    rows = []
    case = f"{graph} fanouts={FANOUTS} batch={batch} k={k}"
    for p, ts in times.items():
        med = statistics.median(ts)
        row = {"case": case, "provider": p, "median": med, "min": min(ts), "max": max(ts), "repeat": len(ts),
               "seeds_per_s": k * batch / med, "edges_per_batch": edges[p] / (len(ts) * k), "graph": graph,
               "num_nodes": g.num_nodes(), "num_edges": g.num_edges(), "k": k,
               "torch_threads": torch.get_num_threads()}
        if p == "bulk":
            for key, vals in split.items():
                row[f"{key}_s"] = statistics.median(vals[warmup:])
        rows.append(row)
    return rows


def main(argv=None):
    from bench.harness import compare, print_table, record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graph", nargs="?", default=GRAPH)
    ap.add_argument("--quick", action="store_true", help="k=8, 2 rounds (smoke test)")
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args(argv)
    k, rounds = (8, 2) if args.quick else (args.k, args.rounds)
    rows = bench_bulk(args.graph, k=k, rounds=rounds)
    print_table(rows, columns=["seeds_per_s", "edges_per_batch", "probability_s", "sampling_s", "extraction_s"])
    if not args.no_record:
        record("bulk", rows)
    vs_ours = compare(rows, baseline="dgl_accel", candidate="bulk")
    vs_dgl = compare(rows, baseline="dgl", candidate="bulk")
    case = rows[0]["case"]
    print(f"bulk_vs_ours={vs_ours[case]:.2f} bulk_vs_dgl={vs_dgl[case]:.2f}")


if __name__ == "__main__":
    main()
