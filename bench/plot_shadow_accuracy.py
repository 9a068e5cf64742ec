"""Per-split test accuracy of shaDow-SAGE against full-batch GraphSAGE (issue 19), one panel per dataset.

Usage: python bench/plot_shadow_accuracy.py [bench/results/shadow_accuracy.jsonl] [--select acc] [-o out.png]

Reads the rows ``examples/shadow_gnn.py --results FILE`` appends (one per run), keeps one selection
rule, and draws each run as a dot (its split on the x axis, one colour per model) with the split's
mean over its seeds as a bar: where the gap between the models lives, and how far one seed moves it,
is easier to see than to read from the table in docs/shadow_gnn.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: CI and remote machines have no display
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "shadow_accuracy.jsonl"


def load(path: Path, select: str) -> dict:
    """{dataset: {model: {split: [test accuracy in %, one per run]}}} of the rows run with ``select``."""
    by = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for line in path.read_text().splitlines():
        row = json.loads(line) if line.strip() else None
        if row and row["flags"].get("select", "acc") == select:
            by[row["dataset"]][row["model"]][row["split"]].append(100 * row["test"])
    if not by:
        raise ValueError(f"expected rows run with --select {select} in {path} (got none). Fix: pass another "
                         f"--select, or record runs with examples/shadow_gnn.py --results {path}")
    return by


def split_means(runs: dict) -> dict:
    return {s: statistics.mean(v) for s, v in runs.items()}


def plot(by: dict, out: Path, select: str) -> None:
    fig, axes = plt.subplots(1, len(by), figsize=(6 * len(by), 4.5), squeeze=False)
    for ax, (dataset, models) in zip(axes[0], by.items()):
        names = sorted(models, key=lambda m: m != "sage-fullbatch")  # the baseline first
        means = {m: split_means(models[m]) for m in names}
        for i, model in enumerate(names):
            offset = (i - (len(names) - 1) / 2) * 0.25
            for s, values in sorted(models[model].items()):
                ax.scatter([s + offset] * len(values), values, s=18, color=f"C{i}", alpha=0.6,
                           label=model if s == min(models[model]) else None)
                ax.hlines(means[model][s], s + offset - 0.1, s + offset + 0.1, color=f"C{i}", linewidth=2.5)
        title = dataset
        if len(names) == 2 and names[0] == "sage-fullbatch" and means[names[0]].keys() == means[names[1]].keys():
            diff = statistics.mean(means[names[1]][s] - means[names[0]][s] for s in means[names[0]])
            title += f": shaDow minus full batch {diff:+.2f} points (mean over splits)"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("split (dots: seeds; bars: the split's mean)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_xticks(sorted({s for m in names for s in models[m]}))
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))  # below: no dot hidden
    fig.suptitle(f"shaDow-SAGE vs full-batch GraphSAGE, 20 labels per class (--select {select})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default=str(RESULTS))
    ap.add_argument("--select", default="acc", help="the selection rule of the rows to draw (the example's --select)")
    ap.add_argument("-o", "--out", default=None, help="default: the results file with .png")
    args = ap.parse_args(argv)
    path = Path(args.results)
    out = Path(args.out) if args.out else path.with_suffix(".png")
    plot(load(path, args.select), out, args.select)
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    main()
