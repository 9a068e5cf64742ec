"""Run DGL 2.1.0's examples unchanged, on plain DGL and with dgl-accel's samplers swapped in
(issue 17's acceptance), several seeds each; parse the final metric; append JSONL rows.

    DGLBACKEND=pytorch DGL_ACCEL_DATASETS=/work/shared/datasets \\
        .venv/bin/python scripts/dgl_examples/run.py graphsage --provider both --seeds 0 1 2
    ... run.py node2vec --ours --seeds 0 -- --epochs 1      # args after -- go to the example

The example files in upstream/ are byte-identical to DGL's (checked against upstream/SOURCES.txt);
only their environment changes, in a subprocess per run (launch.py):
  * ``--ours`` / ``--provider ours``: dgl-accel's NeighborSampler, MultiLayer(Full)NeighborSampler,
    SAINTSampler, random_walk and node2vec_random_walk replace DGL's before the example imports them;
  * datasets: a fake ``ogb`` package (shim/ogb) answers ``DglNodePropPredDataset("ogbn-products")``
    with a shared dataset (``--dataset``), and DGL's download dir is a temporary copy of the shared
    raw folders, so ``CitationGraphDataset("cora")`` loads without a download;
  * seeds: the examples set none; launch.py seeds random, numpy, torch and dgl with ``--seeds``;
  * scikit-learn / torchmetrics (node2vec's / graphsage's metric): the real packages from
    ``--deps`` (install_deps.sh puts them there) when importable, else the small stand-ins in
    stubs/ (``deps`` says which in each row; reported numbers use the real ones).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
UPSTREAM = HERE / "upstream"
DEFAULT_DEPS = Path(os.environ.get("DGL_EXAMPLES_DEPS", Path.home() / ".cache/dgl_accel/dgl_examples_deps"))
NUMBER = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"

# example -> script, default arguments (the example's own flags), default dataset, metric patterns
EXAMPLES = {
    "node2vec": {
        "script": UPSTREAM / "node2vec" / "main.py",
        "args": ["--dataset", "cora", "--device", "cpu"],
        "dataset": None,  # utils.py loads cora through DGL's CitationGraphDataset (raw dir copy)
        "pattern": re.compile(rf"Epoch: \d+, Train Loss: {NUMBER}, Val Acc: {NUMBER}"),
        "fields": ("loss", "acc"),
        "metric": "acc",  # the example's "Val Acc": logistic regression on cora's test mask
    },
    "graphsage": {
        "script": UPSTREAM / "graphsage" / "node_classification.py",
        "args": ["--mode", "cpu"],
        "dataset": "graphdata_amazon_cs",
        "pattern": re.compile(rf"Test Accuracy {NUMBER}"),
        "fields": ("test_acc",),
        "metric": "test_acc",
        "epoch_pattern": re.compile(rf"Epoch \d+ \| Loss {NUMBER} \| Accuracy {NUMBER}"),
    },
    "gat": {  # issue 18: Cora GAT, 8 heads x 8, DGL's settings (feat/attn dropout 0.6, 200 epochs, int32 ids)
        "script": UPSTREAM / "gat" / "train.py",
        "args": [],  # its default: --dataset cora (DGL's CoraGraphDataset from the raw dir copy)
        "dataset": None,
        "pattern": re.compile(rf"Test accuracy {NUMBER}"),
        "fields": ("test_acc",),
        "metric": "test_acc",
        "epoch_pattern": re.compile(rf"Epoch \d+ \| Loss {NUMBER} \| Accuracy {NUMBER}"),
    },
}


def datasets_root() -> Path:
    env = os.environ.get("DGL_ACCEL_DATASETS")
    return Path(env) if env else ROOT.parent / "shared" / "datasets"


def have_real_deps(deps: Path) -> bool:
    """True when scikit-learn and torchmetrics import here (from the env or from ``deps``)."""
    added = str(deps) not in sys.path and deps.is_dir()
    if added:
        sys.path.insert(0, str(deps))
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("sklearn", "torchmetrics"))
    finally:
        if added:
            sys.path.remove(str(deps))


def code_version() -> str:
    """``git describe``-like stamp of the tree the run used (other engineers commit while runs go on)."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "dgl_accel"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty(dgl_accel)" if dirty else "")


def parse_metrics(example: str, out: str) -> dict[str, float]:
    """The last match of the example's metric line(s) in its output, as floats."""
    spec = EXAMPLES[example]
    found: dict[str, float] = {}
    hits = spec["pattern"].findall(out)
    if hits:
        last = hits[-1] if isinstance(hits[-1], tuple) else (hits[-1],)
        found.update(zip(spec["fields"], map(float, last)))
    if "epoch_pattern" in spec and (ep := spec["epoch_pattern"].findall(out)):
        found["loss"], found["val_acc"] = map(float, ep[-1])
    return found


def run_once(example: str, provider: str, seed: int, *, dataset: str | None = None,
             extra_args: list[str] = (), deps: Path | None = DEFAULT_DEPS, timeout: float = 1800,
             threads: int = 1) -> dict:
    """One subprocess run of ``example``; returns the JSONL row (``ok`` False with a ``tail`` on failure).

    ``deps=None`` forces the stand-ins in stubs/ (they come first on the path even where the real
    packages are installed)."""
    spec = EXAMPLES[example]
    dataset = dataset or spec["dataset"]
    args = [*spec["args"], *extra_args]
    real = deps is not None and have_real_deps(deps)
    path = [str(HERE / "shim"), *([str(deps)] if real and deps.is_dir() else []),
            *([] if real else [str(HERE / "stubs")]), os.environ.get("PYTHONPATH", "")]
    with tempfile.TemporaryDirectory(prefix="dgl_examples_") as tmp:
        download = Path(tmp) / "dgl_download"
        raw = datasets_root() / "dgl"
        if raw.is_dir():  # DGL writes its processed cache next to the raw files: copy, never write there
            shutil.copytree(raw, download)
            for p in [download, *download.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)
        download.mkdir(exist_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p), "DGLBACKEND": "pytorch",
               "DGL_DOWNLOAD_DIR": str(download), "DGL_ACCEL_DATASETS": str(datasets_root()),
               "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        if dataset:
            env["DGL_EXAMPLES_DATASET"] = dataset
        cmd = [sys.executable, str(HERE / "launch.py"), "--provider", provider, "--seed", str(seed),
               str(spec["script"]), "--", *args]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
            out, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = f"{e.stdout or ''}{e.stderr or ''}\n[timed out after {timeout}s]", -1
        seconds = time.perf_counter() - t0
    found = parse_metrics(example, out)
    value = found.get(spec["metric"], math.nan)
    bind = re.findall(r"^DGL_EXAMPLES_BINDINGS (.*)$", out, re.M)
    stats = re.findall(r"^DGL_EXAMPLES_STATS (.*)$", out, re.M)
    return {"example": example, "provider": provider, "seed": seed, "metric": spec["metric"], "value": value,
            "seconds": round(seconds, 2), "ok": rc == 0 and math.isfinite(value), "rc": rc,
            "dataset": dataset or "cora (DGL CitationGraphDataset)", "args": args,
            "deps": "real" if real else "stub", "code": code_version(), "finished": time.strftime("%H:%M:%S"),
            "extra": {k: v for k, v in found.items() if k != spec["metric"]},
            "bindings": json.loads(bind[-1]) if bind else None,
            **({"stats": json.loads(stats[-1])} if stats else {}),
            **({} if rc == 0 else {"tail": out[-3000:]})}


def _label(row: dict) -> str:
    """Rows group by example and dataset (a graphsage run on another dataset is another experiment)."""
    return f"{row['example']} on {row['dataset'].split(' ')[0]}"


def summarize(rows: list[dict]) -> str:
    """A markdown table: example, provider, quantity (the metric, then the extras), runs, mean ± std, seconds."""
    lines = ["| example | provider | quantity | runs | mean ± std | seeds | mean s/run |",
             "|---|---|---|---|---|---|---|"]
    for ex, prov in sorted({(_label(r), r["provider"]) for r in rows}):
        sel = [r for r in rows if (_label(r), r["provider"]) == (ex, prov) and r["ok"]]
        keys = dict.fromkeys([r["metric"] for r in sel] + [k for r in sel for k in r.get("extra", {})])
        for key in keys or ["?"]:
            vals = [r["value"] if key == r["metric"] else r.get("extra", {}).get(key) for r in sel]
            vals = [v for v in vals if v is not None]
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            mean = f"{statistics.fmean(vals):.4f} ± {sd:.4f}" if vals else "n/a"
            secs = f"{statistics.fmean(r['seconds'] for r in sel):.0f}" if sel else "n/a"
            seeds = ",".join(str(r["seed"]) for r in sel)
            lines.append(f"| {ex} | {prov} | {key} | {len(vals)} | {mean} | {seeds} | {secs} |")
    return "\n".join(lines + ["", *compare(rows)])


def _values(rows: list[dict], example: str, provider: str, key: str) -> list[float]:
    sel = [r for r in rows if (_label(r), r["provider"]) == (example, provider) and r["ok"]]
    vals = [r["value"] if key == r["metric"] else r.get("extra", {}).get(key) for r in sel]
    return [v for v in vals if v is not None]


def compare(rows: list[dict]) -> list[str]:
    """ours − dgl per example and quantity: difference of means, its standard error (Welch) and
    their ratio z; |z| < 2 reads as "within seed noise"."""
    lines = ["| example | quantity | ours − dgl | s.e. | z |", "|---|---|---|---|---|"]
    for ex in sorted({_label(r) for r in rows}):
        keys = dict.fromkeys(k for r in rows if _label(r) == ex for k in [r["metric"], *r.get("extra", {})])
        for key in keys:
            a, b = _values(rows, ex, "ours", key), _values(rows, ex, "dgl", key)
            if len(a) < 2 or len(b) < 2:
                continue
            diff = statistics.fmean(a) - statistics.fmean(b)
            se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
            z = diff / se if se else math.inf if diff else 0.0
            lines.append(f"| {ex} | {key} | {diff:+.4f} | {se:.4f} | {z:+.2f} |")
    return lines if len(lines) > 2 else []


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("example", nargs="?", choices=sorted(EXAMPLES))
    p.add_argument("--summarize", type=Path, metavar="JSONL", help="only print the table of the rows in JSONL")
    p.add_argument("--provider", choices=("dgl", "ours", "both"), default="both")
    p.add_argument("--ours", action="store_true", help="same as --provider ours")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--dataset", help="shared dataset behind the ogb shim (graphsage; default graphdata_amazon_cs)")
    p.add_argument("--jsonl", type=Path, help="append one row per run here (e.g. bench/results/dgl_examples.jsonl)")
    p.add_argument("--deps", type=Path, default=DEFAULT_DEPS, help="where install_deps.sh put sklearn/torchmetrics")
    p.add_argument("--threads", type=int, default=1, help="OMP/MKL threads of each run (same for both providers)")
    p.add_argument("--timeout", type=float, default=1800)
    a = p.parse_args(argv)
    if a.summarize:
        rows = [json.loads(line) for line in a.summarize.read_text().splitlines() if line.strip()]
        print(summarize([r for r in rows if a.example in (None, r["example"])]))
        return 0
    if a.example is None:
        p.error("name an example (or --summarize JSONL)")
    providers = ["ours"] if a.ours else ["dgl", "ours"] if a.provider == "both" else [a.provider]
    rows = []
    for seed in a.seeds:  # interleaved: seed by seed, both providers, so machine load hits both alike
        for provider in providers:
            row = run_once(a.example, provider, seed, dataset=a.dataset, extra_args=extra, deps=a.deps,
                           timeout=a.timeout, threads=a.threads)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "tail"}), flush=True)
            if not row["ok"]:
                print(row.get("tail", ""), file=sys.stderr)
            if a.jsonl:
                a.jsonl.parent.mkdir(parents=True, exist_ok=True)
                with a.jsonl.open("a") as f:
                    f.write(json.dumps({k: v for k, v in row.items() if k != "tail"}) + "\n")
    print(summarize(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
