"""The user's training step (issue 48): whole training steps and evaluations of the models users
train, through the front door they use, against the best peer in the same environment.

A cell is (front door, model, graph, precision, mode); its providers run interleaved step by step
from the same weights (``bench.harness.interleaved``; each timed step from the state the warm-up
left).  Front doors, each where its stack is installed:

* ``dgl`` (the main lane: torch 2.2.1, DGL 2.1.0): DGL's modules and, for minibatches, DGL's sampler,
  against ``dgl_accel.swap`` with our sampler;
* ``pyg`` (the core lane: torch 2.11, PyG 2.8): PyG eager and PyG under ``torch.compile`` against
  ``dgl_accel.pyg.swap`` (minibatches: PyG's ``NodeLoader`` fed by our sampler for all three).

Models and steps: :mod:`bench.training_cases` (GCN, GraphSAGE, GIN, the GAT paper's model on the
full graph; DGL's GraphSAGE minibatch recipe; on the PyG front door also the further convs it swaps,
on Amazon-CS).  Precisions ``fp32`` and ``autocast-bf16`` (CPU
bf16 autocast: forward and loss); modes ``train`` and ``eval`` (the whole graph's forward).  A cell
is timed in ``--rounds`` interleaved runs (3); its ratio (the best peer's median / ours) is the
median of the rounds' ratios, ``ratio_min`` the lowest.  Each row: median / min / max of the step,
each round's median, each part's median (sample, gather, forward, backward, optimiser), the peak
resident memory the step added, the threads and the CPU model; and the loss check
(:func:`check_losses`): each provider's loss after three steps from the same weights on the same
batches with dropout off, ours within ``LOSS_TOLERANCE`` of every peer's (``loss_gap``,
``loss_ok``).  Every process runs with glibc's allocator thresholds pinned at a long run's values
(``bench.harness.steady_heap``: by default they follow the history of frees, and cells swung by up to
2x between runs).  Rows: ``bench/results/training.jsonl``.

Usage: DGL_ACCEL_DATASETS=../shared/datasets python bench/bench_training.py [--quick]
    [--graphs cora,amazon_cs,flickr,slashdot,cornell5] [--models gcn,sage,gin,gat,sage_mb,graphconv,...]
    [--dtypes fp32,autocast-bf16] [--modes train,eval] [--repeat 5] [--rounds 3] [--threads 1]
``--quick``: Cora and Amazon-CS, the five shared models, both precisions, training steps, 3 rounds of at
least 5 steps; the full matrix: every graph, model, precision and mode (times in ``docs/training.md``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.harness import (  # noqa: E402
    RESULTS_DIR,
    Isolated,
    cpu_model,
    interleaved,
    ratio_summary,
    record,
    save_figure,
    steady_heap,
    warm_up,
)
from bench.training_cases import MODELS, NPZ, PARTS, Graph, peak_rss_during  # noqa: E402

BENCH = "training"


def front_doors(wanted: list[str]) -> dict:
    """{front door: its module (``providers``, ``MODELS``)} of those ``wanted`` whose stack is here."""
    doors = {}
    if "dgl" in wanted:
        try:
            from bench import training_dgl
            doors["dgl"] = training_dgl
        except ImportError:
            print("no DGL here: the DGL front door is left out", file=sys.stderr)
    if "pyg" in wanted:
        try:
            from bench import training_pyg
            doors["pyg"] = training_pyg
        except ImportError:
            print("no torch_geometric here: the PyG front door is left out", file=sys.stderr)
    return doors


def wanted_cells(doors: dict, graphs, models, dtypes, modes) -> list[tuple]:
    """(front door, graph, model, dtype, mode) of every cell: each door's models (``models``: only
    those), its further convs (``ZOO``) on its ``ZOO_GRAPHS`` only, no ``eval`` of a minibatch model."""
    cells = []
    for name, door in doors.items():
        for g in graphs:
            for m in door.MODELS:
                if models is not None and m not in models or m in getattr(door, "ZOO", ()) and g not in door.ZOO_GRAPHS:
                    continue
                cells += [(name, g, m, t, mode) for t in dtypes for mode in modes
                          if not (mode == "eval" and m == "sage_mb")]
    return cells


MIN_ROUND_S, MAX_REPEAT = 0.15, 30  # a round of at least 0.15 s per provider where 30 steps reach it


def time_cell(steps: dict, warmup: int, repeat: int, rounds: int) -> dict:
    """{provider: {median, min, max, repeat, round_medians, parts medians, peak_bytes}}: ``rounds``
    interleaved runs of ``repeat`` steps each, every timed step from the warm-up's state (a peer
    whose warm-up step took over three times another provider's runs one step a round: PyG eager
    beside PyG compiled on the larger graphs; a step under ``MIN_ROUND_S / repeat`` runs more
    steps a round, up to ``MAX_REPEAT``, so a round of milliseconds-long steps is not one
    interruption away from another ratio).  The peak memory comes from one more, untimed step
    each, after the rounds."""
    warm = warm_up(steps, max(1, warmup))
    fastest = min(warm.values())
    # a peer over three times slower than another provider is never the best peer: one step a round
    reps = {p: 1 if p != "dgl_accel" and warm[p] > 3 * min(v for q, v in warm.items() if q != p)
            else max(repeat, min(MAX_REPEAT, math.ceil(MIN_ROUND_S / max(fastest, 1e-6)))) for p in steps}
    parts = {p: [] for p in steps}

    def recorded(p, fn):
        def run():
            own = fn()
            parts[p].append(fn.parts)
            return own
        run.reset = fn.reset  # interleaved resets each provider, untimed, before each timed call
        run.timed = getattr(fn, "timed", False)  # an Isolated step's own seconds
        return run
    fns = {p: recorded(p, fn) for p, fn in steps.items()}
    runs = [interleaved(fns, warmup=0, repeat=reps, raw=True) for _ in range(rounds)]
    peaks = {}
    for p, fn in steps.items():
        fn.reset()
        peaks[p] = fn.peak() if hasattr(fn, "peak") else peak_rss_during(fn)
    times = {}
    for p in steps:
        every = [t for run in runs for t in run[p]]
        times[p] = {"median": statistics.median(every), "min": min(every), "max": max(every),
                    "repeat": len(every), "round_medians": [statistics.median(run[p]) for run in runs],
                    **{f"{k}_s": statistics.median(s[k] for s in parts[p]) for k in PARTS},
                    "peak_bytes": peaks[p]}
    return times


def round_ratios(times: dict) -> list[float]:
    """Per round: the best peer's median that round / ours."""
    peers = [p for p in times if p != "dgl_accel"]
    return [min(times[p]["round_medians"][r] for p in peers) / ours
            for r, ours in enumerate(times["dgl_accel"]["round_medians"])]


def check_losses(door, graph, key: str, dtype: str, mode: str, steps: int = 3) -> dict:
    """Each provider's loss after ``steps`` training steps (or one evaluation) from the same weights
    on the same batches, with dropout off: fresh models from the cell's seed, minibatches from one
    seeded sampler without shuffling (``deterministic=True``), PyG's compiled peer left out (its
    numbers are eager's).  {provider: loss}."""
    made = door(graph, key, dtype, mode, deterministic=True)
    losses = {}
    for name, fn in made.items():
        for _ in range(1 if mode == "eval" else steps):
            fn()
        losses[name] = fn.loss
    return losses


# relative loss gap allowed between ours and each peer after check_losses' steps: fp32 sums in
# another order; bf16 autocast rounds each product's inputs (a peer that runs fp32 where DGL raises
# under autocast compares at bf16's bound)
LOSS_TOLERANCE = {"fp32": 1e-3, "autocast-bf16": 3e-2}


def latest_cells(path: Path) -> dict:
    """{front door: [our rows]}: the newest row of every cell measured in rounds (``ratio_min``)."""
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    newest = {r["case"]: r for r in rows if r.get("provider") == "dgl_accel" and "ratio_min" in r}
    doors: dict = {}
    for r in newest.values():
        doors.setdefault(r["front_door"], []).append(r)
    return doors


def plot(doors: dict, out: Path) -> Path | None:
    """One panel per front door: each cell's ratio (the median of its rounds) as a bar from 1x, a
    whisker down to its lowest round, grouped by model and graph, coloured by precision and mode."""
    try:  # matplotlib is optional: the numbers are in the results file either way
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if not doors:
        return None
    kinds = [(d, m) for d in ("fp32", "autocast-bf16") for m in ("train", "eval")]
    colours = dict(zip(kinds, plt.get_cmap("tab10").colors))
    fig, axes = plt.subplots(len(doors), 1, figsize=(16, 4.2 * len(doors)), squeeze=False)
    for ax, (door, rows) in zip(axes[:, 0], sorted(doors.items())):
        order = {m: i for i, m in enumerate(MODELS)}
        rows = sorted(rows, key=lambda r: (order.get(r["model"], 99), r["model"], list(NPZ).index(r["graph"])
                                           if r["graph"] in NPZ else 99, kinds.index((r["dtype"], r["mode"]))))
        x, ticks, labels, last, seen = 0.0, [], [], None, set()
        for r in rows:
            group = (r["model"], r["graph"])
            if group != last:
                x += 0.8 if last is not None else 0.0
                ticks.append(x + 1.5)
                labels.append(f"{r['model']} {r['graph']}")
                last = group
            kind = (r["dtype"], r["mode"])
            ax.bar(x, r["ratio"] - 1, 0.9, bottom=1, color=colours[kind], label=None if kind in seen else
                   f"{kind[0]} {kind[1]}")
            ax.plot([x, x], [r["ratio_min"], r["ratio"]], color="black", lw=0.7)
            seen.add(kind)
            x += 1
        ratios = [r["ratio"] for r in rows]
        ax.axhline(1.0, color="black", lw=0.8)
        ax.axhline(0.97, color="red", lw=0.8, ls="--", label="0.97x")
        ax.set_yscale("log")
        low, high = min(r["ratio_min"] for r in rows), max(ratios)
        marks = [t for t in (0.5, 0.75, 0.97, 1.25, 1.5, 2, 3, 5, 8) if low / 1.2 <= t <= high * 1.2]
        ax.set_yticks(marks, [f"{t:g}x" for t in marks])
        ax.minorticks_off()
        ax.set_xticks(ticks, labels, rotation=40, ha="right", fontsize=7)
        ax.set_ylabel("best peer / ours (median of rounds)")
        ax.set_title(f"{door} front door ({rows[0]['torch']}): {len(rows)} cells, geomean "
                     f"{statistics.geometric_mean(ratios):.2f}x, lowest median {min(ratios):.2f}x, lowest round "
                     f"{min(r['ratio_min'] for r in rows):.2f}x; {rows[0]['cpu_model']}, {rows[0]['threads']} thread",
                     fontsize=9)
        ax.legend(fontsize=7, ncol=5)
    return save_figure(fig, out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--front-doors", default="dgl,pyg")
    ap.add_argument("--graphs", default=None, help=f"comma-separated, from {', '.join(NPZ)}")
    ap.add_argument("--models", default=None, help=f"comma-separated, from {', '.join(MODELS)} and the PyG front "
                    "door's further convs (default: every model of each front door)")
    ap.add_argument("--dtypes", default="fp32,autocast-bf16")
    ap.add_argument("--modes", default=None, help="train,eval (quick: train)")
    ap.add_argument("--repeat", type=int, default=None, help="timed steps per provider a round (5)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved runs a cell; its ratio is their median")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-compile", action="store_true", help="PyG: leave out the torch.compile'd peer")
    ap.add_argument("--in-process", dest="isolate", action="store_false",
                    help="run every provider in this process (default: each in its own forked process)")
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--replot", action="store_true", help="only draw training.png from the results file's newest cells")
    args = ap.parse_args(argv)
    results = Path(args.results_dir) if args.results_dir else RESULTS_DIR
    if args.replot:
        print(plot(latest_cells(results / f"{BENCH}.jsonl"), results / f"{BENCH}.png") or "nothing to plot")
        return 0
    torch.set_num_threads(args.threads)
    heap = steady_heap()  # before any provider's process forks: every child inherits it
    # PyG's stack has no library sharing numba's GNU OpenMP: this process runs the loops' serial twins
    # only (the loss checks), and each provider's process the parallel ones, as a user's main process
    parallel = args.isolate and args.front_doors.split(",") == ["pyg"]
    if parallel:
        os.environ["DGL_ACCEL_NUMBA_PARALLEL"] = "0"
    graphs = (args.graphs or ("cora,amazon_cs" if args.quick else ",".join(NPZ))).split(",")
    modes = (args.modes or ("train" if args.quick else "train,eval")).split(",")
    repeat, rounds = args.repeat or 5, args.rounds
    doors = front_doors(args.front_doors.split(","))
    common = {"cpu_model": cpu_model(), "threads": args.threads, "torch": torch.__version__, **heap,
              "loops": "serial" if args.isolate and not parallel else "parallel"}
    started, rows = time.perf_counter(), []
    models = args.models.split(",") if args.models else (MODELS if args.quick else None)
    cells = wanted_cells(doors, graphs, models, args.dtypes.split(","), modes)
    loaded = {}
    for i, (door, gname, model, dtype, mode) in enumerate(cells):
        graph = loaded.setdefault(gname, Graph.load(gname))
        kwargs = {"compiled": not args.no_compile} if door == "pyg" else {}
        steps = doors[door].providers(graph, model, dtype, mode, **kwargs)
        runners = {p: Isolated(step, peak_rss_during, parallel) for p, step in steps.items()} if args.isolate else steps
        try:
            times = time_cell(runners, args.warmup, repeat, rounds)
        finally:
            for runner in runners.values():
                getattr(runner, "close", lambda: None)()
        ratios = round_ratios(times)
        ratio = statistics.median(ratios)
        peer = min((p for p in steps if p != "dgl_accel"), key=lambda p: times[p]["median"])
        losses = check_losses(doors[door].providers, graph, model, dtype, mode)
        gap = max(abs(losses["dgl_accel"] - v) / max(abs(v), 1e-12) for p, v in losses.items() if p != "dgl_accel")
        case = f"{door} {model} {gname} {dtype} {mode}"
        facts = {"front_door": door, "model": model, "graph": gname, "dtype": dtype, "mode": mode,
                 "nodes": graph.num_nodes, "edges": graph.num_edges}
        cell = [{"case": case, "provider": p, **times[p], **facts, **common, "loss": losses.get(p),
                 "precision": getattr(steps[p], "precision", dtype)} for p in steps]
        cell[-1].update(ratio=ratio, ratio_min=min(ratios), round_ratios=ratios, best_peer=peer, loss_gap=gap,
                        loss_ok=gap <= LOSS_TOLERANCE[dtype], peer_precision=cell[0]["precision"])
        rows += record(BENCH, cell, args.results_dir)
        split = " ".join(f"{k} {times['dgl_accel'][f'{k}_s'] * 1e3:.0f}" for k in PARTS if times["dgl_accel"][f"{k}_s"])
        print(f"[{i + 1}/{len(cells)}] {case}: " + ", ".join(f"{p} {times[p]['median'] * 1e3:.1f} ms" for p in steps)
              + f" -> {ratio:.2f}x the best ({peer}; rounds {', '.join(f'{r:.2f}' for r in ratios)}); ours: {split} ms;"
              + f" loss gap {gap:.1e}{'' if cell[-1]['loss_ok'] else ' OVER TOLERANCE'};"
              + f" {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
    ratio_summary(rows, noun="cells", bar="bars: every round >= 0.97x, every cell's median >= 1.0x, geomean >= 1.3x",
                  started=started, columns=["ratio", "ratio_min", "best_peer", "peer_precision", "loss_gap", "loss_ok"],
                  nothing="neither DGL nor torch_geometric here")
    ours = [r for r in rows if r["provider"] == "dgl_accel"]
    drawn = plot(latest_cells(results / f"{BENCH}.jsonl"), results / f"{BENCH}.png")
    if drawn:
        print(f"plot: {drawn}")
    if ours:
        low = min(ours, key=lambda r: r["ratio_min"])
        bad = [r["case"] for r in ours if not r["loss_ok"]]
        print(f"lowest round {low['ratio_min']:.2f}x ({low['case']}); losses within tolerance in "
              f"{len(ours) - len(bad)} of {len(ours)} cells" + (f"; over: {', '.join(bad)}" if bad else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
