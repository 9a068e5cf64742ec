"""Neighbour-sampling throughput: ``sample_blocks`` seeds/s (choice + block construction),
dgl_accel's NeighborSampler vs DGL's, fanouts [15, 10, 5], 1024 random seeds per batch.

    python -m bench.sampling_neighbor [--quick] [--record] [graph ...]

``bench_neighbor`` returns rows for ``bench.harness.record``; providers are interleaved (one timed
batch of each in turn, same seed batches for both) so load from other processes hits both alike.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

DEFAULT_GRAPHS = ("snap_soc-Slashdot0902", "hetero_tolokers", "fb100_Cornell5")
FANOUTS = [15, 10, 5]
BATCH = 1024


def _samplers():
    import dgl

    from dgl_accel.sampling import NeighborSampler

    return {"dgl": dgl.dataloading.NeighborSampler(FANOUTS),
            "dgl_accel": NeighborSampler(FANOUTS, seed=0)}


def time_samplers(samplers: dict, g, batches, warmup: int):
    """({provider: [seconds per timed batch]}, {provider: sampled edges over the timed batches}):
    each batch sampled by every provider in turn, the order alternating batch to batch; the first
    ``warmup`` batches (where DGL builds its CSC and we our cached CSR) are not timed."""
    times = {p: [] for p in samplers}
    edges = {p: 0 for p in samplers}
    for i, seeds in enumerate(batches):
        order = list(samplers) if i % 2 == 0 else list(samplers)[::-1]
        for p in order:
            t0 = time.perf_counter()
            _, _, blocks = samplers[p].sample_blocks(g, seeds)
            dt = time.perf_counter() - t0
            if i >= warmup:
                times[p].append(dt)
                edges[p] += sum(b.num_edges() for b in blocks)
    return times, edges


def bench_neighbor(graph_names=DEFAULT_GRAPHS, quick: bool = False, warmup: int = 3,
                   repeat: int | None = None) -> list[dict]:
    """Rows ``{case, provider, median, min, max, repeat, seeds_per_s, ...}`` per graph and provider."""
    from dgl_accel import data

    repeat = repeat or (5 if quick else 25)
    rows = []
    for name in graph_names:
        g = data.load(name, features="none")
        samplers = _samplers()
        gen = torch.Generator().manual_seed(0)
        batches = [torch.randperm(g.num_nodes(), generator=gen)[:BATCH] for _ in range(warmup + repeat)]
        times, edges = time_samplers(samplers, g, batches, warmup)
        for p, ts in times.items():
            med = statistics.median(ts)
            rows.append({"case": f"{name} fanouts={FANOUTS} batch={BATCH}", "provider": p, "median": med,
                         "min": min(ts), "max": max(ts), "repeat": len(ts), "seeds_per_s": BATCH / med,
                         "edges_per_batch": edges[p] / len(ts), "graph": name, "num_nodes": g.num_nodes(),
                         "num_edges": g.num_edges(), "torch_threads": torch.get_num_threads()})
    return rows


def ratios(rows) -> dict:
    """{case: dgl median / dgl_accel median}: > 1 means ours is faster (seeds/s ours over dgl)."""
    from bench.harness import compare

    return compare(rows, baseline="dgl", candidate="dgl_accel")


def sampler_cli(argv, description: str, default_graphs, bench, name: str):
    """The command line of a sampler bench module: graphs, --quick, --repeat, --record (rows to
    bench/results/<name>.*); prints the table and the seeds/s ratios."""
    from bench.harness import print_table, record

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("graphs", nargs="*", default=list(default_graphs))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--record", action="store_true", help=f"append rows to bench/results/{name}.*")
    args = ap.parse_args(argv)
    rows = bench(args.graphs, quick=args.quick, repeat=args.repeat)
    print_table(rows, columns=["seeds_per_s", "edges_per_batch"])
    for case, r in ratios(rows).items():
        print(f"ratio ours/dgl (seeds/s) {r:.2f}  {case}")
    if args.record:
        record(name, rows)
    return rows


def main(argv=None):
    return sampler_cli(argv, __doc__.splitlines()[0], DEFAULT_GRAPHS, bench_neighbor, "sampling_neighbor")


if __name__ == "__main__":
    main()
