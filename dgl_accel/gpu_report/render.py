"""Rebuild ``docs/gpu_report.md`` and its roofline from ``bench/results/gpu_*.jsonl`` alone:
``python -m dgl_accel.gpu_report.render [--results DIR] [--docs DIR]``.

A lease can end before a run writes its report (the rows are appended after every section, the
document only at the end), and a later, shorter run may measure only some sections.  The rebuilt
document takes every section from the newest run that has rows in it (rows carry ``run``: the
run's start and host) and lists which run each section came from.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import roofline, table
from .env import Results

SECTIONS = ("correctness", "aggregation", "aggregation_plan", "sampling", "attention", "training", "training_accuracy",
            "training_repeat_calls", "exec_paths", "graphact",
            "failed", "skipped")


def load(folder: Path) -> dict[str, list[dict]]:
    """Rows by section, in file order."""
    return {p.stem[4:]: [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
            for p in sorted(folder.glob("gpu_*.jsonl"))}


# sections whose runs may each measure some cases (``--training-graphs`` / ``--training-cases``):
# every case comes from the newest run that measured it
CASE_KEYS = {"training": ("graph", "model", "dtype", "provider"), "training_accuracy": ("graph", "model", "seed")}


def newest_per_case(rows: list[dict], key: tuple) -> list[dict]:
    """The GPU rows of every case (``key`` fields) from the newest run that has it, in file order."""
    newest: dict = {}
    for r in rows:
        if r.get("mode") == "gpu" and r.get("run"):
            k = tuple(r.get(f) for f in key)
            if k not in newest or r["run"] >= newest[k]:
                newest[k] = r["run"]
    return [r for r in rows if r.get("mode") == "gpu" and newest.get(tuple(r.get(f) for f in key)) == r.get("run")]


def newest_run(rows: list[dict]) -> str | None:
    runs = [r["run"] for r in rows if r.get("mode") == "gpu" and r.get("run")]
    return max(runs) if runs else None  # run ids start with their ISO start time


def rebuild(folder: Path, docs: Path) -> Path:
    rows = load(folder)
    run = newest_run(rows.get("correctness", []))
    if run is None:
        raise SystemExit(f"render: expected GPU rows with a run id in {folder}/gpu_correctness.jsonl (found none). "
                         "Fix: run python -m dgl_accel.gpu_report on a GPU first.")
    env_row = next(r for r in rows["environment"] if r.get("run") == run)
    env = {k: env_row[k] for k in ("run", "device", "compute_capability", "driver", "torch", "triton", "cuda",
                                   "python", "host", "mode", "size") if k in env_row}
    results, sources = Results(env), []
    for section in SECTIONS:
        if section in CASE_KEYS:
            picked = newest_per_case(rows.get(section, []), CASE_KEYS[section])
            results.rows[section] = picked
            runs = sorted({r["run"] for r in picked})
            sources.append(f"{section}: {', '.join(runs)} (the newest run of each case; {len(picked)} rows)" if picked
                           else f"{section}: no GPU rows yet (no run has finished this section)")
            continue
        section_run = run if section in ("correctness", "failed", "skipped") else newest_run(rows.get(section, []))
        picked = [r for r in rows.get(section, []) if r.get("run") == section_run]
        results.rows[section] = picked
        if section in ("failed", "skipped"):
            continue
        sources.append(f"{section}: {section_run} ({len(picked)} rows)" if picked else
                       f"{section}: no GPU rows yet (no run has finished this section)")
    cov_row = next(r for r in rows["coverage"] if r.get("run") == run)
    cov = {k: cov_row[k] for k in ("registered", "launched", "missing", "other_mode", "extra", "launches",
                                   "per_kernel")}
    cov["part"] = cov_row.get("part", "all")
    ceilings = {"copy_bytes_per_s": env_row["copy_bytes_per_s"], "matmul": env_row["matmul"]}
    png = roofline.plot(results.section("aggregation"), ceilings, env["device"], docs / "gpu_report_roofline.png")
    md = docs / "gpu_report.md"
    md.write_text(table.render(results, cov, ceilings, env_row.get("command", ""), png.name, None, sources))
    return md


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dgl_accel.gpu_report.render", description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=Path("bench/results"))
    p.add_argument("--docs", type=Path, default=Path("docs"))
    args = p.parse_args(argv)
    print(f"wrote {rebuild(args.results, args.docs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
