"""Bar chart of a bench's results: median time per case, one bar per provider, min/max whiskers.

Usage: python bench/plot.py bench/results/<name>.jsonl [-o out.png] [--all-runs] [--linear]
By default only the rows of the latest run (latest timestamp) are drawn.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: CI and remote machines have no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def load(path: Path, all_runs: bool = False) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if rows and not all_runs:
        # ISO-8601 UTC timestamps sort lexicographically.
        latest = max(r.get("timestamp", "") for r in rows)
        rows = [r for r in rows if r.get("timestamp", "") == latest]
    return rows


def plot(rows: list[dict], out: Path, title: str, log: bool = True) -> None:
    cases = list(dict.fromkeys(r["case"] for r in rows))
    providers = list(dict.fromkeys(r["provider"] for r in rows))
    # With --all-runs a (case, provider) can repeat; the last row wins.
    by = {(r["case"], r["provider"]): r for r in rows}
    x = np.arange(len(cases))
    width = 0.8 / max(1, len(providers))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(cases) * len(providers)), 4.5))
    for i, p in enumerate(providers):
        med = np.array([float(by[(c, p)]["median"]) if (c, p) in by else np.nan for c in cases]) * 1e3
        lo = np.array([float(by[(c, p)]["min"]) if (c, p) in by else np.nan for c in cases]) * 1e3
        hi = np.array([float(by[(c, p)]["max"]) if (c, p) in by else np.nan for c in cases]) * 1e3
        ax.bar(x + (i - (len(providers) - 1) / 2) * width, med, width, label=p,
               yerr=[med - lo, hi - med], capsize=3)
    ax.set_xticks(x, cases, rotation=30 if len(cases) > 4 else 0, ha="right" if len(cases) > 4 else "center")
    ax.set_ylabel("median time (ms)")
    if log:
        ax.set_yscale("log")  # cases usually span orders of magnitude
    env = rows[0]
    ax.set_title(f"{title}\n{env.get('device', '')}  {env.get('git_commit', '')[:10]}  {env.get('timestamp', '')}",
                 fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="bench/results/<name>.jsonl")
    ap.add_argument("-o", "--output", type=Path, help="PNG path (default: next to the results file)")
    ap.add_argument("--all-runs", action="store_true", help="use every run, not only the latest")
    ap.add_argument("--linear", action="store_true", help="linear instead of log y axis")
    args = ap.parse_args(argv)
    rows = load(args.results, args.all_runs)
    if not rows:
        raise SystemExit(f"plot: no rows in {args.results}")
    if rows[-1].get("plotter") and args.output is None:  # the bench draws its own plot there
        print(f"plot: {args.results.name} is drawn by `{rows[-1]['plotter']}`; skipped")
        return
    out = args.output or args.results.with_suffix(".png")
    plot(rows, out, title=rows[0].get("bench", args.results.stem), log=not args.linear)
    print(f"plot: wrote {out}")


if __name__ == "__main__":
    main()
