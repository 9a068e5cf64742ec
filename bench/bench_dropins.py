"""Every dgl-accel drop-in against DGL's own module over a configuration matrix, one training step a cell.

Issue 31, "drop-ins never slower and never less accurate": the speed half, measured in one run.

Modules: GraphConv, SAGEConv (mean, gcn, pool), GINConv (sum, max), GATConv, GATv2Conv, DotGatConv,
EdgeConv and HeteroGraphConv with GraphConv or SAGEConv relation modules.  Graphs: Cora, Citeseer,
Amazon-CS, Coauthor-CS, Slashdot, Cornell5 (self-loops added; random features at the cell's width).

The matrix (:mod:`bench.dropin_cases` states it in full): every module on every graph at the defaults
(input 128, hidden 64 or heads x features 4 x 32, no dropout, 1 thread), then one axis at a time on
Cora, Amazon-CS and Slashdot: input width 767 / 1433 (not on Slashdot: one SAGE-pool step at 1433
takes 30 s there), hidden 16 / 256 (attention: 1 x 64 / 8 x 8), dropout on (the module's own
dropouts where it has them: GAT's feat_drop = attn_drop = 0.6, SAGE's feat_drop = 0.5; otherwise
nn.Dropout(0.5) on the input), residual / activation as the module offers them, 2 threads, and for
the attention modules the GAT paper's first layer (input 767, 8 x 8, dropout on).  303 cells in all
(EdgeConv's widths 767 / 1433 on Amazon-CS and its hidden 256 on Slashdot are left out: DGL's module
would hold over 1 GB per edge tensor).  ``--quick``: the defaults on Cora, Amazon-CS and Slashdot, and on Amazon-CS the
three recipe cells and every cell at 2 threads: 51 cells, every module, both thread counts.

Method, per cell: ``torch``, DGL's OpenMP and numba set to the cell's thread count; one ``dgl.nn``
module (seeded) and a deep copy of it swapped with ``dgl_accel.swap``, so both start from the same
weights; an eval-mode forward of each (their max |difference| goes in the row); then the training step
as users run it, in train mode (forward as users call the module, loss on a fixed 10% of the rows,
backward, Adam step, zero_grad), ``--warmup`` steps of each (default 2: numba compiles, DGL builds its
formats; the last one sizes the repeats: at least ``--repeat``, more up to 8x while the cell stays under
a few seconds), then the providers interleaved repeat by repeat (``bench.harness.interleaved``), each
timed step starting from the weights and optimiser state the warm-up left (restored untimed,
``bench.harness.TrainingStep``: hundreds of steps on one batch would otherwise drive the gradients into
float32's slow subnormal range, at a pace that differs between providers), batch after batch of that
size while the ratio's 95% bootstrap interval is wider than +-3% (at most 4 batches: noisy cells, such
as two threads on a two-core machine, get more repeats, whatever their ratio; in ``--quick`` no new
batch starts after a cell's batches took 15 s). Ratio = DGL's median / dgl-accel's median (> 1: the
drop-in is faster); the interval goes in the row (``ratio_low``, ``ratio_high``).

Bars: every cell >= 0.95x; geomean >= 1.5x over the attention modules' cells (GATConv, GATv2Conv,
DotGatConv) and >= 1.2x over all cells.  Rows (one per cell and provider, with a ``run_id``) are
appended to bench/results/dropins.jsonl (and .csv) as each cell finishes; the plot of the run (ratio
per cell, grouped by module, lines at 1.0 and 0.95) goes to bench/results/dropins.png
(``--plot-only`` redraws it from the newest run in the jsonl).  Accuracy parity of whole models:
examples/dropin_parity.py.

Usage: DGL_ACCEL_DATASETS=... python bench/bench_dropins.py [--quick] [--graphs cora,slashdot]
    [--modules graphconv,sage,gatconv] [--threads 1,2] [--repeat 5] [--plot-only]
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402  (DGL's modules are the baseline)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import dgl_accel  # noqa: E402
from bench.dropin_cases import GRAPHS, MODULES, QUICK_GRAPHS, SHORT, Graph, matrix, resolve, setup  # noqa: E402
from bench.harness import RESULTS_DIR, interleaved, print_table, record, save_figure  # noqa: E402
from dgl_accel import data  # noqa: E402

BENCH = "dropins"
PROVIDERS = ("dgl", "dgl_accel")
ATTENTION = ("GATConv", "GATv2Conv", "DotGatConv")
BARS = {"cell": 0.95, "attention": 1.5, "overall": 1.2}
PRECISION = 0.03  # a cell's repeats go on until its ratio's 95% interval is within about +-3% ...
CAP = 4           # ... or this many batches of repeats ran
QUICK_CELL_CAP_S = 15.0  # ... or, in --quick, a cell's batches took this long (51 cells in <= 10 minutes)
PLOTTER = "bench/bench_dropins.py --plot-only"  # this bench draws its own figure (bench/plot.py's would not fit)
AXES = ("base", "width", "hidden", "heads", "dropout", "extra", "threads")


def set_threads(n: int) -> dict:
    """The cell's thread count for numba's parallel loops, torch and DGL's OpenMP kernels; returns
    what each reports.  numba first: the first ``numba.set_num_threads`` (or parallel loop) starts
    numba's OpenMP pool, which sets OpenMP's thread count, torch's and DGL's included, to all cores."""
    counts = {}
    try:  # numba is optional: without it dgl-accel's CPU path has no compiled loops to thread
        import numba
    except ImportError:
        pass
    else:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        counts["numba_threads"] = numba.get_num_threads()
    torch.set_num_threads(n)
    dgl.utils.set_num_threads(n)
    return {"torch_threads": torch.get_num_threads(), "dgl_threads": dgl.utils.get_num_threads(), **counts}


def ratio_interval(times: dict, resamples: int = 400) -> tuple[float, float]:
    """95% bootstrap interval of DGL's median / dgl-accel's median (each provider's times resampled)."""
    rng = np.random.default_rng(0)
    a, b = (np.asarray(times[p]) for p in PROVIDERS)
    ra = np.median(rng.choice(a, (resamples, a.size)), axis=1)
    rb = np.median(rng.choice(b, (resamples, b.size)), axis=1)
    low, high = np.percentile(ra / rb, [2.5, 97.5])
    return float(low), float(high)


def time_cell(steps: dict, warmup: int, repeat: int, budget_s: float, cell_cap_s: float | None = None) -> dict:
    """Warm-up steps (the last one's time sizes a batch of repeats), then batches of the providers
    interleaved repeat by repeat, until the ratio's 95% interval is within ``PRECISION`` of it (in
    log terms: the stop depends on the spread, never on the ratio itself), ``CAP`` batches ran, or
    (``cell_cap_s``, the quick mode) the batches took that many seconds: a wider interval, reported."""
    started = time.perf_counter()
    pair = 0.0
    for _ in range(warmup):
        pair = 0.0
        for fn in steps.values():
            start = time.perf_counter()
            fn()
            pair += time.perf_counter() - start
    for fn in steps.values():  # every timed step starts from here (TrainingStep.reset)
        fn.snapshot()
    reps = max(repeat, min(8 * repeat, int(budget_s / max(pair, 1e-9))))
    times = {p: [] for p in steps}
    for _ in range(CAP):
        batch = interleaved(steps, warmup=0, repeat=reps, raw=True)
        for p in steps:
            times[p] += batch[p]
        low, high = ratio_interval(times)
        if math.log(high / low) / 2 <= PRECISION:
            break
        if cell_cap_s is not None and time.perf_counter() - started > cell_cap_s:
            break
    out = {p: {"median": statistics.median(v), "min": min(v), "max": max(v), "repeat": len(v)}
           for p, v in times.items()}
    out["dgl_accel"].update(ratio_low=low, ratio_high=high)
    return out


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(rows: list[dict], elapsed: float, mode: str) -> bool:
    """Print the run against the bars; True when every bar is met."""
    ours = [r for r in rows if r["provider"] == "dgl_accel"]
    if not ours:
        print("summary: no cells ran")
        return False
    ratios = [r["ratio"] for r in ours]
    worst = min(ours, key=lambda r: r["ratio"])
    attention = [r["ratio"] for r in ours if r["module"] in ATTENTION]
    below = [r for r in ours if r["ratio"] < BARS["cell"]]
    g_all, g_att = geomean(ratios), geomean(attention)
    ok = {"cell": not below, "attention": bool(attention) and g_att >= BARS["attention"],
          "overall": g_all >= BARS["overall"]}

    def verdict(key):
        return "met" if ok[key] else "NOT met"

    print(f"\nsummary ({mode}): {len(ours)} cells in {elapsed:.0f} s; ratio = DGL median / dgl-accel median "
          f"(> 1: the drop-in is faster)")
    print(f"  min ratio {worst['ratio']:.2f}x: {worst['case']}  (bar: every cell >= {BARS['cell']}x: "
          f"{verdict('cell')}, {len(below)} below)")
    if attention:
        print(f"  geomean, attention modules ({', '.join(ATTENTION)}; {len(attention)} cells): {g_att:.2f}x  "
              f"(bar >= {BARS['attention']}x: {verdict('attention')})")
    else:
        print(f"  geomean, attention modules: no {', '.join(ATTENTION)} cells in this run (bar not checked)")
    print(f"  geomean, all cells: {g_all:.2f}x  (bar >= {BARS['overall']}x: {verdict('overall')})")
    for key in dict.fromkeys(r["key"] for r in ours):
        mine = [r["ratio"] for r in ours if r["key"] == key]
        print(f"    {key:17s} {len(mine):3d} cells  geomean {geomean(mine):.2f}x  min {min(mine):.2f}x")
    diff = max(ours, key=lambda r: r["max_abs_diff"])
    print(f"  largest eval-mode max |ours - DGL|: {diff['max_abs_diff']:.1e} ({diff['case']})")
    moved = [r["case"] for r in ours if r.get("torch_threads_after", r["threads"]) != r["threads"]]
    if moved:
        print(f"  torch's thread count changed during the step in {len(moved)} cells: {', '.join(moved)}")
    if below:
        print(f"  cells below {BARS['cell']}x:")
        cases = {r["case"] for r in below}
        print_table([r for r in rows if r["case"] in cases], columns=["ratio", "repeat"])
    print(f"  elapsed: {elapsed:.0f} s (bar for --quick: <= 600 s on a 2-core machine)")
    return all(ok.values())


def newest_run(path: Path) -> list[dict]:
    """The rows of the last run appended to ``path`` (its last row's run_id)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("run_id")]
    return [r for r in rows if r["run_id"] == rows[-1]["run_id"]] if rows else []


def plot(rows: list[dict], out: Path) -> Path | None:
    """Ratio per cell, grouped by module (in the matrix's order), coloured by the axis it varies."""
    try:  # matplotlib is optional: the numbers are in the results file either way
        import matplotlib

        matplotlib.use("Agg")  # headless
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ours = [r for r in rows if r["provider"] == "dgl_accel"]
    if not ours:
        return None
    keys = [k for k in MODULES if any(r["key"] == k for r in ours)]
    keys += [k for k in dict.fromkeys(r["key"] for r in ours) if k not in keys]
    colours = dict(zip(AXES, plt.get_cmap("tab10").colors))
    fig, ax = plt.subplots(figsize=(min(40, max(10, 0.11 * len(ours) + 4)), 5.5))
    x, centres, seen = 0, [], set()
    for key in keys:
        mine = [r for r in ours if r["key"] == key]
        start = x
        for r in mine:
            axis = r.get("axis", "base")
            ax.bar(x, r["ratio"] - 1, 0.8, bottom=1, color=colours.get(axis, "grey"),
                   label=None if axis in seen else axis)  # up from 1x: faster, down: slower
            seen.add(axis)
            if r["ratio"] < BARS["cell"]:
                ax.annotate(r["case"], (x, 1.0), rotation=90, fontsize=6, va="bottom", ha="center",
                            xytext=(0, 2), textcoords="offset points")  # above 1x: its own column is free
            x += 1
        centres.append((start + x - 1) / 2)
        x += 1.5  # a gap between modules
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(BARS["cell"], color="red", lw=0.8, ls="--", label=f"{BARS['cell']}x bar")
    ax.set_yscale("log")
    ratios = [r["ratio"] for r in ours]
    ticks = [t for t in (0.25, 0.5, 0.75, 0.95, 1, 1.5, 2, 3, 5, 10, 20) if min(ratios) / 1.3 <= t <= max(ratios) * 1.3]
    ax.set_yticks(ticks, [f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.set_xticks(centres, keys, rotation=30, ha="right")
    ax.set_ylabel("DGL median / dgl-accel median (one training step)")
    att = [r["ratio"] for r in ours if r["module"] in ATTENTION]
    env = ours[0]
    ax.set_title(f"dgl-accel drop-ins vs DGL: {len(ours)} cells, geomean {geomean(ratios):.2f}x, attention "
                 f"{geomean(att):.2f}x, min {min(ratios):.2f}x\nrun {env.get('run_id', '')}  {env.get('device', '')}"
                 f"  {str(env.get('git_commit', ''))[:10]}  cpu_count {env.get('cpu_count', '')}", fontsize=9)
    ax.legend(fontsize=8, ncol=4)
    return save_figure(fig, out)


def run(args) -> int:
    started = time.perf_counter()
    run_id = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())  # one timestamp for the run: plot.py's latest
    aliases = {v: k for k, v in SHORT.items()}
    names = resolve(args.graphs or ",".join(QUICK_GRAPHS if args.quick else GRAPHS), GRAPHS, "graphs", aliases)
    keys = resolve(args.modules, MODULES, "modules")
    threads = [int(t) for t in args.threads.split(",")]
    graphs = {n: Graph(n) for n in names}  # structure only; features are made per width, when a cell needs them
    cells = matrix(names, keys, threads, args.quick, edges=lambda n: graphs[n].g.num_edges())
    warmup = max(1, args.warmup)
    repeat = args.repeat or (3 if args.quick else 5)
    budget = 1.5 if args.quick else 4.0  # seconds per cell that cheap cells may spend on more repeats
    cell_cap = QUICK_CELL_CAP_S if args.quick else None
    mode = "quick" if args.quick else "full"
    print(f"{len(cells)} cells ({mode}), graphs {', '.join(names)}, threads {threads}, warm-up {warmup}, "
          f"repeats >= {repeat}; run {run_id}", file=sys.stderr)
    rows = []
    for i, cell in enumerate(cells, 1):
        counts = set_threads(cell.threads)
        steps, facts = setup(cell, graphs[cell.graph])
        times = time_cell(steps, warmup, repeat, budget, cell_cap)
        ratio = times["dgl"]["median"] / times["dgl_accel"]["median"]
        after = {"torch_threads_after": torch.get_num_threads()}  # a step that changed it would show here
        common = {"run_id": run_id, "timestamp": stamp, "plotter": PLOTTER, **cell.fields(), **facts, **counts,
                  **after, "loadavg_1min": os.getloadavg()[0]}
        cell_rows = [{"case": cell.case, "provider": p, **times[p], **common} for p in PROVIDERS]
        cell_rows[1]["ratio"] = ratio
        rows += record(BENCH, cell_rows, args.results_dir)
        del steps
        if i == len(cells) or cells[i].graph != cell.graph:  # the graph's last cell: free it
            del graphs[cell.graph]
        gc.collect()
        print(f"[{i}/{len(cells)}] {cell.case}: DGL {times['dgl']['median'] * 1e3:.1f} ms, ours "
              f"{times['dgl_accel']['median'] * 1e3:.1f} ms, {ratio:.2f}x [{times['dgl_accel']['ratio_low']:.2f}, "
              f"{times['dgl_accel']['ratio_high']:.2f}] ({times['dgl']['repeat']} repeats, "
              f"|diff| {facts['max_abs_diff']:.0e}); {time.perf_counter() - started:.0f} s", file=sys.stderr)
    elapsed = time.perf_counter() - started
    met = summary(rows, elapsed, mode)
    out = plot(rows, Path(args.results_dir or RESULTS_DIR) / f"{BENCH}.png")
    if out is not None:
        print(f"plot: {out}")
    return 0 if met or not args.strict else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="51 cells: defaults on Cora, Amazon-CS, Slashdot; "
                                                         "2 threads on Amazon-CS")
    ap.add_argument("--graphs", default=None, help=f"comma-separated, from {', '.join(GRAPHS)} "
                                                   f"(slashdot, cornell5 for short)")
    ap.add_argument("--modules", default=None, help=f"comma-separated, from {', '.join(MODULES)}; a prefix such "
                                                    f"as sage, gin or hetero picks its variants")
    ap.add_argument("--threads", default="1,2", help="the defaults run at the first count, the threads axis at the "
                                                     "others (default 1,2)")
    ap.add_argument("--repeat", type=int, default=None, help="minimum timed repeats per provider (3 quick, 5 full)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per provider (default 2: the first "
                                                          "compiles and builds formats, the second sizes the repeats)")
    ap.add_argument("--results-dir", default=None, help="default: bench/results")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a bar is not met")
    ap.add_argument("--plot-only", action="store_true", help="redraw the plot from the newest run in the jsonl")
    args = ap.parse_args(argv)
    results = Path(args.results_dir or RESULTS_DIR)
    if args.plot_only:
        rows = newest_run(results / f"{BENCH}.jsonl")
        if not rows:
            raise SystemExit(f"no {BENCH} rows with a run_id in {results}: run the bench first")
        print(f"plot: {plot(rows, results / f'{BENCH}.png')} (run {rows[0]['run_id']}, {len(rows) // 2} cells)")
        return 0
    if data.datasets_root() is None:
        print("no shared datasets here (DGL_ACCEL_DATASETS): nothing to compare on", file=sys.stderr)
        return 0
    if dgl_accel.is_enabled():  # the "dgl" provider must run DGL's own message passing
        dgl_accel.disable()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
