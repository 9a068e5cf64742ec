"""shaDow-GNN subgraph extraction on CPU (issue 19), one run, providers interleaved.

* k-hop scopes, batch 512, fanouts [10, 5]: subgraphs/s of ``dgl_accel.sampling.ShaDowKHopSampler``
  (merged mode, DGL's output) vs ``dgl.dataloading.ShaDowKHopSampler`` (acceptance: >= 2x DGL's on
  both graphs), and our ``per_target=True`` mode (the paper's disjoint per-target subgraphs) as a
  third provider.  One merged subgraph serves the whole batch, so subgraphs/s = batches/s; the
  per-target row counts batches too (each of its batches holds 512 subgraphs);
* PPR scopes (``ShaDowPPRSampler``, alpha 0.15, eps 1e-5): targets/s and mean subgraph size (nodes
  per target) for K in {32, 64, 200} with ``cache=False`` (every call runs the push), and K = 200
  with the cache warm (every target's set already computed: only the subgraphs are built).

on snap_soc-Slashdot0902 and fb100_Cornell5 (``DGL_ACCEL_DATASETS``).  Rows go to
``bench/results/shadow.{jsonl,csv}`` with the 1-minute load average (the box may be shared), the
plot to ``shadow.png``.  On a shared box run it with one thread per library
(``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1``, recorded in the rows): DGL's OpenMP sampler with 2
threads on a loaded 2-core machine spins at barriers (~125 ms a batch on Slashdot instead of ~12).

Usage: python bench/bench_shadow.py [--quick] [--graphs a,b]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import torch  # noqa: E402

from bench.harness import RESULTS_DIR, print_table, record  # noqa: E402
from dgl_accel import data  # noqa: E402

GRAPHS = ("snap_soc-Slashdot0902", "fb100_Cornell5")
FANOUTS = [10, 5]
BATCH = 512
TOPKS = (32, 64, 200)
BAR = 2.0  # merged k-hop: ours >= 2x DGL's subgraphs/s


def khop_samplers() -> dict:
    # DGL and the samplers load when a bench runs, not when the module is imported (--help, make)
    import dgl

    from dgl_accel.sampling import ShaDowKHopSampler

    return {"dgl": dgl.dataloading.ShaDowKHopSampler(FANOUTS),
            "dgl_accel": ShaDowKHopSampler(FANOUTS, seed=0),
            "dgl_accel per_target": ShaDowKHopSampler(FANOUTS, per_target=True, seed=0)}


def time_batches(samplers: dict, g, batches, warmup: int):
    """({provider: [seconds per timed batch]}, {provider: [nodes per timed batch]}): every batch
    sampled by each provider in turn, the order reversed every other batch (load hits all alike);
    the first ``warmup`` batches (CSR/CSC builds, JIT compiles) are not timed."""
    times = {p: [] for p in samplers}
    nodes = {p: [] for p in samplers}
    for i, seeds in enumerate(batches):
        order = list(samplers) if i % 2 == 0 else list(samplers)[::-1]
        for p in order:
            t0 = time.perf_counter()
            _, _, sg = samplers[p].sample(g, seeds)
            dt = time.perf_counter() - t0
            if i >= warmup:
                times[p].append(dt)
                nodes[p].append(sg.num_nodes())
    return times, nodes


def _row(case, provider, ts, **extra) -> dict:
    med = statistics.median(ts)
    return {"case": case, "provider": provider, "median": med, "min": min(ts), "max": max(ts),
            "repeat": len(ts), **extra}


def _batches(g, count: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randperm(g.num_nodes(), generator=gen)[:BATCH] for _ in range(count)]


def bench_khop(g, name: str, facts: dict, warmup: int, repeat: int) -> list[dict]:
    times, nodes = time_batches(khop_samplers(), g, _batches(g, warmup + repeat), warmup)
    case = f"{name} k-hop fanouts={FANOUTS} batch={BATCH}"
    return [_row(case, p, ts, subgraphs_per_s=1 / statistics.median(ts),
                 seeds_per_s=BATCH / statistics.median(ts), nodes_per_batch=statistics.mean(nodes[p]), **facts)
            for p, ts in times.items()]


def bench_ppr(g, name: str, facts: dict, warmup: int, repeat: int) -> list[dict]:
    """K in TOPKS with cache=False (interleaved over K), then K = TOPKS[-1] with a warm cache."""
    from dgl_accel.sampling import ShaDowPPRSampler  # loaded when the bench runs (as above)

    samplers = {f"dgl_accel topk={k}": ShaDowPPRSampler(topk=k, cache=False) for k in TOPKS}
    batches = _batches(g, warmup + repeat, seed=1)
    times, nodes = time_batches(samplers, g, batches, warmup)
    rows = []
    for (p, ts), k in zip(times.items(), TOPKS):
        rows.append(_row(f"{name} PPR topk={k} push", p, ts, topk=k, cache="cold",
                         targets_per_s=BATCH / statistics.median(ts),
                         mean_subgraph_nodes=statistics.mean(nodes[p]) / BATCH, **facts))
    warm = ShaDowPPRSampler(topk=TOPKS[-1], cache=True)
    for seeds in batches:  # the table now holds every target's set
        warm.sample(g, seeds)
    wt, wn = time_batches({"warm": warm}, g, batches, warmup)  # the cold rows' batches
    rows.append(_row(f"{name} PPR topk={TOPKS[-1]} cached", f"dgl_accel topk={TOPKS[-1]}", wt["warm"],
                     topk=TOPKS[-1], cache="warm", targets_per_s=BATCH / statistics.median(wt["warm"]),
                     mean_subgraph_nodes=statistics.mean(wn["warm"]) / BATCH, **facts))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if data.datasets_root() is None:
        print("no shared datasets here (set DGL_ACCEL_DATASETS): nothing to compare on", file=sys.stderr)
        return 0
    khop_rep, ppr_rep = (4, 2) if args.quick else (30, 8)
    rows = []
    for name in args.graphs.split(","):
        g = data.load(name, features="none")
        facts = {"graph": name, "num_nodes": g.num_nodes(), "num_edges": g.num_edges(), "batch": BATCH,
                 "torch_threads": torch.get_num_threads(),
                 "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
                 "numba_num_threads": os.environ.get("NUMBA_NUM_THREADS", ""), "loadavg_1min": os.getloadavg()[0]}
        rows += bench_khop(g, name, facts, warmup=2, repeat=khop_rep)
        rows += bench_ppr(g, name, {**facts, "loadavg_1min": os.getloadavg()[0]}, warmup=1, repeat=ppr_rep)
    print_table(rows, columns=["subgraphs_per_s", "targets_per_s", "mean_subgraph_nodes", "loadavg_1min"])
    record("shadow", rows)
    print(f"\nmerged k-hop subgraphs/s, ours / DGL's (bar: >= {BAR:.0f}x)")
    by = {(r["case"], r["provider"]): r for r in rows}
    ratios = []
    for case in dict.fromkeys(r["case"] for r in rows if "k-hop" in r["case"]):
        r = by[(case, "dgl_accel")]["subgraphs_per_s"] / by[(case, "dgl")]["subgraphs_per_s"]
        pt = by[(case, "dgl_accel per_target")]["median"] / by[(case, "dgl")]["median"]
        ratios.append(r)
        print(f"  {case}: {r:.2f}x  (per_target batches: {1 / pt:.2f}x DGL's merged batches/s)")
    print(f"khop_min_ratio={min(ratios):.2f} bar_met={min(ratios) >= BAR}")
    print("PPR targets/s (mean subgraph nodes):")
    for r in rows:
        if "PPR" in r["case"]:
            print(f"  {r['case']}: {r['targets_per_s']:.0f} targets/s ({r['mean_subgraph_nodes']:.1f} nodes)")
    try:  # matplotlib is optional: the numbers are in the results file either way
        from bench.plot import plot
    except ImportError:
        return 0
    plot(rows, RESULTS_DIR / "shadow.png", "shaDow-GNN extraction on CPU, batch 512 (time per batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
