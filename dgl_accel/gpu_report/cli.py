"""``python -m dgl_accel.gpu_report``: measure every kernel on a GPU, DGL-free, in one command.

Writes ``<out>/bench/results/gpu_<section>.jsonl`` (appended; every row carries the device, driver,
torch / triton / CUDA versions, mode and a timestamp), ``<out>/docs/gpu_report.md`` and
``<out>/docs/gpu_report_roofline.png``.  ``<out>`` is the checkout (``--out``, default ``.``; a
temporary folder under ``--interpret`` when none is given).  Sections: correctness on the device
(every registered kernel specialisation, the test suite's tolerance rule, launch coverage),
aggregation against torch.sparse / PyG / DGL, sampling, a GAT layer fused / unfused / PyG (time and
peak memory), training end to end (PyG's models as written against the same models swapped: full
graph GCN / GAT, minibatch GraphSAGE, accuracy on the labelled shared graph), execution paths.  Exit status 1 when any
check mismatched or a registered specialisation was never launched.

Modes:
* default (a CUDA GPU): R-MAT scales 18-23 and the shared graphs.  On one H200 (2026-11-26): about
  100 s to compile the correctness kernels with ``--warm-jobs 16``, 10 s of checks, 180 s for the
  aggregation grid on R-MAT 22 (with the linear model's gs at every width, now F=128 only), 35 s
  for attention; the rest was not reached in a 15-minute lease (see docs/gpu_notes.md).
* ``--quick`` (about 2 minutes): R-MAT 20 and the largest shared graph, fewer widths and repeats.
* ``--interpret --tiny`` (CI, no GPU; under 2 minutes on 2 cores): the Triton interpreter on tiny
  graphs, every code path of the report, the same files.

On a lent GPU (the ``device`` tool; its machine has Python 3.12, torch 2.11, triton 3.6, PyG, no
DGL): stage the shared graphs here once (``python -m dgl_accel.gpu_report.graphs stage`` -> the
ignored ``data/gpu/``, about 11 MB), then call ``run`` with ``carry=["data/gpu"]`` and::

    set -o pipefail; timeout 390 bash dgl_accel/gpu_report/device.sh --budget-s 300 --warm-jobs 16 \
        2>&1 | tee $OUT/log.txt; tar czf $OUT/report.tgz bench/results/gpu_*.jsonl docs/gpu_report*

(``$OUT`` takes at most 8 files: one archive; the rows are written as they are measured, so an
archive made after a stopped run still holds what was measured).

``device.sh`` makes ``dgl_accel.kernels`` importable from the carried tree (pyproject maps it to
``kernels/``; a symlink stands in for an install) and runs the report with ``PYTHONUNBUFFERED=1``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from . import runner

SIZES = {  # (warmup, repeats) per mode
    "full": dict(warmup=2, repeats=7), "quick": dict(warmup=1, repeats=3), "tiny": dict(warmup=0, repeats=1)}


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m dgl_accel.gpu_report", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a 2-minute subset")
    p.add_argument("--interpret", action="store_true", help="run the kernels under the Triton interpreter on CPU")
    p.add_argument("--tiny", action="store_true", help="tiny graphs (with --interpret: the CI run)")
    p.add_argument("--out", type=Path, default=None, help="folder for bench/results/ and docs/ (default: .)")
    p.add_argument("--data", type=Path, default=None, help="folder of shared npz graphs (default: data/gpu)")
    p.add_argument("--skip", default="",
                   help="comma-separated sections to skip: aggregation,sampling,attention,exec_paths,graphact,training")
    p.add_argument("--aggregation-graphs", choices=("all", "rmat", "shared"), default="all",
                   help="which graphs the aggregation section times (e.g. shared: the small graphs alone)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="wall-clock budget in seconds: later sections and cases are skipped, what ran is written")
    p.add_argument("--correctness", choices=("all", "sampling"), default="all",
                   help="which correctness checks run: all (every kernel: minutes of compiling on a GPU) or "
                        "sampling (the samplers alone, when no kernel changed since a run that checked all)")
    p.add_argument("--training-graphs", choices=("all", "rmat", "labelled"), default="all",
                   help="the training section's graphs: the R-MAT graph with random features, the labelled shared one")
    p.add_argument("--training-cases", default="",
                   help="comma-separated training cases model-precision (gcn-float32, gat-float32, sage-float32, "
                        "gcn-bfloat16, gcn-autocast-bfloat16, gat-autocast-float16, ...: "
                        "gpu_report.training.cases) and model-accuracy (gcn-accuracy, gat-accuracy); default: all")
    p.add_argument("--warm-jobs", type=int, default=0,
                   help="compile the correctness kernels first in this many worker processes (CUDA only)")
    return p.parse_args(argv)


def choose_mode(args) -> torch.device:
    """Fix the process's Triton mode before anything imports triton (kernels/loader.py)."""
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ["DGL_ACCEL_BACKEND"] = "triton"
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("gpu_report: expected a CUDA device (got none). Fix: run on a GPU machine, or pass "
                         "--interpret --tiny for the CPU run of every code path.")
    os.environ.setdefault("DGL_ACCEL_BACKEND", "auto")
    return torch.device("cuda")


def main(argv=None) -> int:
    args = parse(argv if argv is not None else sys.argv[1:])
    device = choose_mode(args)  # nothing above imported triton: the mode is still open
    if args.tiny:  # tiny tensors: intra-op threads only add fork/join waits (100 ms per op on a busy 2-core box)
        torch.set_num_threads(1)
    out = args.out or (Path(tempfile.mkdtemp(prefix="gpu_report_")) if args.interpret else Path("."))
    size = "tiny" if args.tiny else "quick" if args.quick else "full"
    started = time.perf_counter()

    def progress(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {msg}", flush=True)

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    command = "python -m dgl_accel.gpu_report " + " ".join(argv if argv is not None else sys.argv[1:])
    return runner.run(device, size, out, args.data, SIZES[size], skip, command, progress, started,
                      budget=args.budget_s, warm_jobs=args.warm_jobs,
                      aggregation_graphs=args.aggregation_graphs, correctness_part=args.correctness,
                      training_graphs=args.training_graphs, training_cases=args.training_cases)
