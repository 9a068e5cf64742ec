"""Compile ahead, in parallel: the correctness section launches every registered kernel
specialisation (hundreds), and Triton compiles each at its first launch, one after another, in the
report's process.  :func:`warm` first runs the same checks split over worker processes (the shard
of :class:`~.correctness.Checks`); they fill Triton's on-disk cache, and the report's own run then
loads compiled kernels instead of compiling them.  The workers' results are thrown away: only the
report's own run counts, so a worker that fails costs time, never a finding.

``python -m dgl_accel.gpu_report.warm K N SMALL HUB`` is worker K of N (R-MAT scale SMALL, hub degree HUB).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time


def warm(jobs: int, small: int, hub: int, timeout: float, progress) -> int:
    """Run ``jobs`` workers (at most ``timeout`` seconds); returns how many failed or timed out."""
    t0, procs = time.perf_counter(), []
    for k in range(jobs):
        log = tempfile.TemporaryFile()
        cmd = [sys.executable, "-m", "dgl_accel.gpu_report.warm", str(k), str(jobs), str(small), str(hub)]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    failed, last = 0, (0.0, "")
    for proc, log in procs:
        try:
            proc.wait(max(1.0, t0 + timeout - time.perf_counter()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.seek(0)
        text = log.read().decode(errors="replace")
        if proc.returncode != 0:
            failed += 1
            progress(f"  warm-up worker exited with {proc.returncode}: {text[-800:]}")
        last = max(last, (time.perf_counter() - t0, text.strip().splitlines()[-1] if text.strip() else ""))
        log.close()
    progress(f"warm-up: {jobs} workers compiled the correctness kernels in {time.perf_counter() - t0:.1f} s "
             f"({failed} failed); the last to finish: {last[1]}")
    return failed


def _worker(k: int, n: int, small: int, hub: int) -> int:
    """Shard k of n of the correctness checks; off CUDA under the interpreter (what CI can run).
    Returns the number of checks the shard ran."""
    import torch  # lazy, as cli.py: the Triton mode is fixed at triton's first import, after the environment

    cuda = torch.cuda.is_available()
    os.environ.setdefault("DGL_ACCEL_BACKEND", "auto" if cuda else "triton")
    if not cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    # lazy: these import triton (through the kernels), which must come after the mode is set above
    from . import correctness, graphs
    from .env import Results  # lazy: with the line above

    started = time.perf_counter()
    device, results = torch.device("cuda" if cuda else "cpu"), Results({})
    correctness.run(results, device, small=graphs.rmat(small, device), hub_degree=hub,
                    sampling_graph=graphs.rmat(small + 2, "cpu"), tiny=not cuda, progress=lambda msg: None,
                    shard=(k, n))
    rows = results.section("correctness")
    # where a shard's time went (compiles happen inside the checks), for the next lease's planning
    slow = sorted(rows, key=lambda r: -r["seconds"])[:3]
    print(f"shard {k}/{n}: {len(rows)} checks, {time.perf_counter() - started:.1f} s after imports, slowest "
          + ", ".join(f"{r['family']} {r['case'][:40]} {r['seconds']:.1f} s" for r in slow))
    return len(rows)


if __name__ == "__main__":
    _worker(*map(int, sys.argv[1:5]))
