"""Small benchmark harness: timing, environment capture, append-only result files.

Every bench script produces rows ``{"bench", "case", "provider", "median", "min", "max", ...}``
(times in seconds) and calls :func:`record`, which appends them, stamped with
:func:`environment`, to ``bench/results/<bench>.csv`` and ``<bench>.jsonl``.  Results are
never overwritten so numbers from different machines/commits can be compared later.
"""
from __future__ import annotations

import csv
import ctypes
import ctypes.util
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"
TIME_FIELDS = ("median", "min", "max")


def _cuda_sync_fn(sync: bool | None) -> Callable[[], None]:
    try:
        import torch
    except ImportError:  # the harness itself does not need torch
        return lambda: None
    if sync is None:
        # Only sync when CUDA was actually used; is_initialized avoids creating a context.
        sync = torch.cuda.is_available() and torch.cuda.is_initialized()
    return torch.cuda.synchronize if sync else (lambda: None)


def time_fn(fn: Callable[[], object], warmup: int = 2, repeat: int = 5, min_time: float | None = None,
            sync: bool | None = None) -> dict:
    """Time ``fn()``: ``warmup`` untimed calls, then at least ``repeat`` timed calls (more
    until ``min_time`` seconds have been spent in total, if given).

    Returns ``{"median", "min", "max"}`` in seconds plus ``"repeat"`` (calls timed).  CUDA
    work is synchronised around each call so asynchronous launches are not mistaken for
    fast kernels.
    """
    sync_fn = _cuda_sync_fn(sync)
    for _ in range(warmup):
        fn()
    sync_fn()
    times: list[float] = []
    while len(times) < repeat or (min_time is not None and sum(times) < min_time):
        t0 = time.perf_counter()
        fn()
        sync_fn()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "repeat": len(times)}


class TrainingStep:
    """One training step (``run``: forward, loss, backward, optimiser step), timed as ``step()``, and
    ``reset()``, untimed (:func:`interleaved` calls it before each timed call): the model's parameters
    and buffers and the optimiser's state back to the values of the last ``snapshot()``.

    Why: repeating steps on one fixed batch drives a model that can fit it into saturation, and its
    gradients shrink into float32's subnormal range, where a matrix product runs several times slower
    (GIN sum on Cora at input width 1433, one thread: 14 -> 56 ms a step over 30 steps; 12 ms
    throughout with subnormals flushed).  A cell's time would then depend on how many repeats it
    ran, and on which provider's gradients went subnormal first.  Each timed step starts from the
    same state instead, the state a user's model has early in training."""

    def __init__(self, model, opt, run: Callable[[], object]):
        self.model, self.opt, self._run, self._saved = model, opt, run, None

    def __call__(self):
        return self._run()

    def _tensors(self) -> list:
        import torch
        params = list(self.model.parameters())
        state = [v for p in params for v in self.opt.state.get(p, {}).values() if isinstance(v, torch.Tensor)]
        return params + list(self.model.buffers()) + state

    def snapshot(self) -> None:
        """Remember the current values (after the warm-up steps: the optimiser's state exists then)."""
        self._saved = [t.detach().clone() for t in self._tensors()]

    def reset(self) -> None:
        import torch
        if self._saved is None:
            return
        tensors = self._tensors()
        if len(tensors) != len(self._saved):
            raise RuntimeError(f"TrainingStep.reset: {len(self._saved)} tensors saved, {len(tensors)} now; "
                               "call snapshot() after the warm-up steps, once the optimiser's state exists")
        with torch.no_grad():
            for t, saved in zip(tensors, self._saved):
                t.copy_(saved)


class Isolated:
    """A :class:`TrainingStep` run in a process of its own, forked from this one after the step
    was built (so it shares nothing with the other providers from then on: its allocations, its
    compiled code, its page cache of freed memory), as a user runs one model in a process.  Why:
    in one process a provider's step time depended on who ran before it (compiled PyG on Cora's
    minibatch under autocast: 24.5 ms right after eager PyG's step, 29 ms after ours or alone),
    through glibc's heap, which one provider's large allocations leave grown or trimmed for the
    next.  ``step()`` returns the seconds the child measured (``timed``: :func:`interleaved`
    takes them instead of its own clock, which would add the pipe's round trip); ``parts``,
    ``loss``, ``reset()``, ``snapshot()`` as the step's; ``peak()``: ``peak(step)`` in the child.
    The heap is trimmed before the fork (:func:`_trim_heap`): without it a child inherited the
    free space every earlier cell left, and compiled PyG's GIN evaluation on Cora took 4.7 ms after
    16 cells and 7.7 ms as the first cell.  ``parallel``: the child runs dgl-accel's compiled loops
    in their parallel form, as a user's main process does (a multiprocessing child otherwise runs
    the serial twins); only where this process never entered a GNU OpenMP parallel region."""

    timed = True

    def __init__(self, step, peak: Callable | None = None, parallel: bool = False):
        import multiprocessing
        _trim_heap()  # the child starts from this process's live data, not the slack its history left
        ctx = multiprocessing.get_context("fork")
        self._conn, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(step, theirs, peak, parallel), daemon=True)
        self._proc.start()
        theirs.close()
        self.parts = self.loss = None

    def _ask(self, *message):
        self._conn.send(message)
        kind, value = self._conn.recv()
        if kind == "error":
            raise RuntimeError(f"the isolated step's process failed:\n{value}")
        return value

    def __call__(self) -> float:
        seconds, self.parts, self.loss = self._ask("step")
        return seconds

    def reset(self) -> None:
        self._ask("reset")

    def snapshot(self) -> None:
        self._ask("snapshot")

    def peak(self) -> int:
        return self._ask("peak")

    def close(self) -> None:
        if self._proc.is_alive():
            self._conn.send(("close",))
            self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.terminate()
        self._conn.close()


def _libc():
    """glibc, or None where there is none."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _trim_heap() -> None:
    """glibc's ``malloc_trim(0)``: free heap memory back to the system, so that a forked child's
    first allocations do not depend on how much free space earlier cells left in the heap (a
    fresh process's heap holds only its live data); nothing elsewhere."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


# glibc's dynamic mmap threshold rises to the largest mmapped block freed, up to 32 MiB, and the trim
# threshold to twice that: the state a long-running training process reaches
STEADY_MMAP_THRESHOLD = 32 << 20
STEADY_TRIM_THRESHOLD = 64 << 20


def steady_heap() -> dict:
    """Pin glibc's mmap and trim thresholds at the values its dynamic rule reaches in a long run
    (``mallopt``; forked children inherit them), and return them as a row's facts ({} without glibc).

    Why: by default the thresholds move with the history of frees, so whether a step's
    megabyte-sized tensors came from fresh mmapped pages (zeroed and faulted in at every step) or
    from the reused heap depended on what the process had done before.  Cells swung by up to 2x
    between runs that way, each run consistent within its rounds (DGL's SAGE evaluation on Cora
    under autocast: DGL 9.3 or 4.7 ms, ours 5.4 or 6.8 ms); with the thresholds pinned, two runs of
    the same cells agree within the machine's noise."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return {}
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    if not (libc.mallopt(m_mmap_threshold, STEADY_MMAP_THRESHOLD) and libc.mallopt(m_trim_threshold,
                                                                                   STEADY_TRIM_THRESHOLD)):
        return {}
    return {"mmap_threshold": STEADY_MMAP_THRESHOLD, "trim_threshold": STEADY_TRIM_THRESHOLD}


def _serve(step, conn, peak, parallel: bool) -> None:
    """The child of :class:`Isolated`: run the commands it is sent until ``close``; ``parallel``: the
    compiled loops' parallel twins, as in a main process (``claim_parallel``: the parent ran none)."""
    import traceback
    if parallel:
        from dgl_accel.core.jit import runtime  # here: only the child claims them
        runtime.claim_parallel()
    while True:
        command = conn.recv()[0]
        if command == "close":
            return
        try:
            if command == "step":
                t0 = time.perf_counter()
                step()
                value = (time.perf_counter() - t0, getattr(step, "parts", None), getattr(step, "loss", None))
            elif command == "peak":
                value = peak(step) if peak is not None else 0
            else:
                value = getattr(step, command)()  # reset, snapshot
            conn.send(("ok", value))
        except Exception:  # noqa: BLE001 (the parent raises it with the child's traceback)
            conn.send(("error", traceback.format_exc()))


def interleaved(fns: dict, warmup: int, repeat, raw: bool = False) -> dict:
    """Time several providers repeat by repeat, in turn, so background load hits all alike.
    ``repeat``: an int, or a dict of repeats per provider (a slow provider may run fewer).  A
    provider with a ``reset`` method (:class:`TrainingStep`) gets it called, untimed, before each
    timed call; one whose ``timed`` is true (:class:`Isolated`) returns its own seconds.
    Returns ``{name: {median, min, max, repeat}}`` in seconds (``raw``: ``{name: [times]}``)."""
    reps = repeat if isinstance(repeat, dict) else dict.fromkeys(fns, repeat)
    for _ in range(warmup):
        for f in fns.values():
            f()
    times = {k: [] for k in fns}
    for r in range(max(reps.values())):
        for k, f in fns.items():
            if r < reps[k]:
                if hasattr(f, "reset"):
                    f.reset()
                t0 = time.perf_counter()
                own = f()
                took = time.perf_counter() - t0
                times[k].append(own if getattr(f, "timed", False) else took)
    if raw:
        return times
    return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "repeat": len(v)}
            for k, v in times.items()}


def warm_up(steps: dict, warmup: int) -> dict:
    """``warmup`` rounds of every :class:`TrainingStep` in ``steps`` (in turn), then each one's
    ``snapshot()``: the state every timed step starts from.  Returns {name: seconds of its last
    warm-up step} (a compiled model's first step compiles; the last one shows its pace)."""
    last = {}
    for _ in range(warmup):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            own = fn()
            last[name] = own if getattr(fn, "timed", False) else time.perf_counter() - t0
    for fn in steps.values():
        fn.snapshot()
    return last


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _git(*args: str) -> str:
    try:  # read-only queries; empty string outside a checkout or without git
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor string elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    """Flat dict describing where and with what the numbers were taken."""
    device = "cpu"
    try:
        import torch

        if torch.cuda.is_available():
            device = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        import dgl_accel

        accel_version = dgl_accel.__version__
    except ImportError:
        accel_version = ""
    commit = _git("rev-parse", "HEAD")
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": device,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "dgl": _version("dgl"),
        "triton": _version("triton"),
        "numpy": _version("numpy"),
        "dgl_accel": accel_version,
        "git_commit": commit,
        # Uncommitted changes make the commit alone misleading (results appended by earlier runs do not).
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"))
        if commit else "",
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _append_csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    if path.exists() and path.stat().st_size:
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
        missing = [k for k in fields if k not in header]
        if missing:
            # New columns: rewrite once with the widened header; old rows get blanks there.
            with path.open(newline="") as f:
                old = list(csv.DictReader(f))
            header += missing
            with path.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=header)
                w.writeheader()
                w.writerows(old)
        with path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=header, restval="").writerows(rows)
    else:
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, restval="")
            w.writeheader()
            w.writerows(rows)


def record(bench_name: str, rows: Iterable[dict], results_dir: str | os.PathLike | None = None) -> list[dict]:
    """Append ``rows`` (stamped with one :func:`environment`) to ``<bench_name>.csv`` and
    ``.jsonl`` in ``results_dir`` (default ``bench/results``).  Returns the stamped rows."""
    env = environment()
    stamped = []
    for r in rows:
        missing = {"case", "provider", *TIME_FIELDS} - r.keys()
        if missing:
            raise ValueError(f"expected each row to have case, provider, median, min, max (missing {sorted(missing)}). "
                             f"Fix: build rows as {{'case': ..., 'provider': ..., **time_fn(fn)}}.")
        stamped.append({"bench": bench_name, **r, **{k: v for k, v in env.items() if k not in r}})
    if not stamped:
        return stamped
    out = Path(results_dir) if results_dir is not None else RESULTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    _append_csv(out / f"{bench_name}.csv", stamped)
    with (out / f"{bench_name}.jsonl").open("a") as f:
        for r in stamped:
            f.write(json.dumps(r, default=str) + "\n")
    return stamped


def compare(rows: Iterable[dict], baseline: str = "dgl", candidate: str = "dgl_accel") -> dict:
    """``{case: baseline median / candidate median}``: > 1 means the candidate is faster.
    Cases missing either provider are left out."""
    med: dict[tuple, float] = {}
    for r in rows:
        med[(r["case"], r["provider"])] = float(r["median"])
    cases = dict.fromkeys(c for c, _ in med)  # first-seen order
    return {c: med[(c, baseline)] / med[(c, candidate)]
            for c in cases if (c, baseline) in med and (c, candidate) in med and med[(c, candidate)] > 0}


def print_table(rows: Iterable[dict], columns: list[str] | None = None, file=None) -> None:
    """Aligned table of case / provider / times in milliseconds (plus any ``columns``)."""
    rows = list(rows)
    cols = ["case", "provider", *TIME_FIELDS, *(columns or [])]
    heads = [c + " (ms)" if c in TIME_FIELDS else c for c in cols]

    def fmt(r, c):
        v = r.get(c, "")
        if c in TIME_FIELDS and v != "":
            return f"{float(v) * 1e3:.4g}"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    cells = [[fmt(r, c) for c in cols] for r in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads)]
    out = file or sys.stdout
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)), file=out)


def save_figure(fig, out: Path) -> Path:
    """``fig`` laid out and written to ``out`` (its folder made), then closed."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def ratio_summary(rows: list[dict], *, noun: str, bar: str, started: float, columns: list[str], nothing: str) -> None:
    """The table of ``rows`` and one summary line over dgl-accel's rows (their ``ratio``: the best
    peer's median / ours): how many ``noun``, the time since ``started``, the machine, geomean and
    min, and the ``bar``; or ``summary: nothing ran (<nothing>)``."""
    ours = [r for r in rows if r["provider"] == "dgl_accel"]
    if not ours:
        print(f"summary: nothing ran ({nothing})")
        return
    print_table(rows, columns=columns)
    low = min(ours, key=lambda r: r["ratio"])
    geo = statistics.geometric_mean(r["ratio"] for r in ours)
    print(f"summary: {len(ours)} {noun} in {time.perf_counter() - started:.0f} s on {low['cpu_model']}, "
          f"{low['threads']} thread(s), torch {low['torch']}: geomean {geo:.2f}x, min {low['ratio']:.2f}x "
          f"({low['case']}); {bar}")
