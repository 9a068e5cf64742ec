"""GAT attention on CPU vs DGL (issue 18), measured in one run on the shared graphs
(snap_soc-Slashdot0902, hetero_tolokers, fb100_Cornell5), self-loops as DGL's GAT examples add them
(``dgl.add_self_loop(dgl.remove_self_loop(g))``):

* (a) GATConv forward + backward, in 128 -> 4 heads x 32: ``dgl.nn.GATConv`` against the same
  computation as dgl_accel.nn.GATConv runs it on the same module's parameters
  (:func:`dgl_accel.core.attention.gat.gat_layer`: fc, the attention with the score halves
  from attn_l / attn_r, and the bias in one op); bar: >= 1.5x DGL, geomean over graphs;
* (b) peak memory of one GATConv training step (forward + backward), both providers.  Method: a
  fresh subprocess per (graph, provider) with glibc's ``MALLOC_MMAP_THRESHOLD_=65536`` (every block of
  64 KiB or more, so every sizeable tensor, is its own mapping, unmapped when freed, so resident
  memory follows live memory), one untimed warm-up step (numba loads its cache, DGL builds its
  formats), then the kernel's peak-RSS counter is reset (``5 > /proc/self/clear_refs``) and one more
  step runs: peak = VmHWM after it - VmRSS before it (everything the step allocated: torch, DGL's C++
  kernels, numba's loops alike).  tracemalloc would not see torch's allocations.

Providers run interleaved repeat by repeat (bench/harness.py); rows go to bench/results/gat.jsonl
(and .csv), a bar chart of the timings to bench/results/gat.png.  The edge softmax alone:
``bench/bench_edge_softmax.py``.

Usage: DGL_ACCEL_DATASETS=... DGLBACKEND=pytorch python bench/bench_gat.py [--quick] [--graphs a,b]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402  (the DGL adapter layer: the bench compares against DGL itself)
import torch  # noqa: E402

from bench.harness import RESULTS_DIR, interleaved, print_table, record  # noqa: E402
from dgl_accel import data  # noqa: E402
from dgl_accel.core.attention.gat import gat_layer  # noqa: E402
from dgl_accel.graph.views import DGLGraphViews  # noqa: E402

GRAPHS = ("snap_soc-Slashdot0902", "hetero_tolokers", "fb100_Cornell5")
IN_FEATS, HEADS, DIM = 128, 4, 32
PROVIDERS = ("dgl", "dgl_accel")


def load_graph(name: str):
    g = data.load(name, features="none")
    return dgl.add_self_loop(dgl.remove_self_loop(g))


def gat_setup(g, seed: int = 0):
    """({provider: one training step}, max |ours - DGL| of the forward) on one module's parameters."""
    torch.manual_seed(seed)
    conv = dgl.nn.GATConv(IN_FEATS, DIM, HEADS)
    n = g.num_nodes()
    x = torch.randn(n, IN_FEATS)
    grad = torch.randn(n, HEADS, DIM)
    views = DGLGraphViews(g)

    def ours_forward():  # as dgl_accel.nn.GATConv calls it (one projection, no residual): one op
        return gat_layer(views, x, conv.fc.weight, conv.attn_l, conv.attn_r, conv.bias,
                         conv.leaky_relu.negative_slope)

    def step(forward):
        def run():
            conv.zero_grad(set_to_none=True)
            forward().backward(grad)
        return run

    with torch.no_grad():  # a sanity check that both compute one thing
        diff = float((ours_forward() - conv(g, x)).abs().max())
    return {"dgl": step(lambda: conv(g, x)), "dgl_accel": step(ours_forward)}, diff


def _status(field: str) -> int:
    """``field`` of /proc/self/status in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def memory_child(name: str, provider: str) -> None:
    """One (graph, provider) in this fresh process: print the step's peak memory as JSON."""
    g = load_graph(name)
    fns, _ = gat_setup(g)
    fns[provider]()  # warm-up: caches, formats, compiled loops
    before = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    t0 = time.perf_counter()
    fns[provider]()
    seconds = time.perf_counter() - t0
    print(json.dumps({"peak_step_bytes": _status("VmHWM") - before, "rss_before": before, "seconds": seconds}))


def measure_memory(name: str, provider: str) -> dict:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, __file__, "--memory-child", name, provider], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-memory", action="store_true", help="skip (b), the peak-memory subprocesses")
    ap.add_argument("--no-timing", action="store_true", help="skip (a), the timings: memory only")
    ap.add_argument("--memory-child", nargs=2, metavar=("GRAPH", "PROVIDER"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0
    if data.datasets_root() is None:
        print("no shared datasets here (DGL_ACCEL_DATASETS): nothing to compare on", file=sys.stderr)
        return 0
    warmup = 1 if args.quick else 2
    repeat = 2 if args.quick else 5
    rows, speedups = [], {}
    for name in args.graphs.split(","):
        g = load_graph(name)
        facts = {"graph": name, "num_nodes": g.num_nodes(), "num_edges": g.num_edges(), "heads": HEADS, "dim": DIM,
                 "loadavg_1min": os.getloadavg()[0]}  # the machine may be shared: say how busy it was
        if not args.no_timing:
            step_fns, diff = gat_setup(g)
            times = interleaved(step_fns, warmup=warmup, repeat=repeat)
            for provider in PROVIDERS:
                rows.append({"case": f"{name} GATConv fwd+bwd", "provider": provider, **times[provider], **facts,
                             "max_abs_diff": diff})
            speedups[name] = times["dgl"]["median"] / times["dgl_accel"]["median"]
            del step_fns
        if not args.no_memory:
            for provider in PROVIDERS:
                m = measure_memory(name, provider)
                rows.append({"case": f"{name} GATConv step peak memory", "provider": provider, "median": m["seconds"],
                             "min": m["seconds"], "max": m["seconds"], "repeat": 1, **facts,
                             "peak_step_mib": m["peak_step_bytes"] / 2**20, "rss_before_mib": m["rss_before"] / 2**20})
    print_table(rows, columns=["max_abs_diff", "peak_step_mib"])
    record("gat", rows)
    print("\nspeedup = DGL median / ours (ours/DGL time in brackets); bar: >= 1.5x, geomean over graphs")
    for name, s in speedups.items():
        print(f"  gatconv {name}: {s:.2f}x  ({1 / s:.3f})")
    print(f"  gatconv geomean: {geomean(speedups.values()):.2f}x")
    mem = {(r["graph"], r["provider"]): r["peak_step_mib"] for r in rows if "peak_step_mib" in r}
    for name in dict.fromkeys(n for n, _ in mem):
        print(f"  peak memory of one GATConv step on {name}: DGL {mem[(name, 'dgl')]:.0f} MiB, "
              f"ours {mem[(name, 'dgl_accel')]:.0f} MiB ({mem[(name, 'dgl_accel')] / mem[(name, 'dgl')]:.2f}x; "
              f"bar: <= 0.5x)")
    timing_rows = [r for r in rows if "peak_step_mib" not in r]
    if not timing_rows:  # --no-timing: nothing to draw
        return 0
    try:  # matplotlib is optional: the numbers are in the results file either way
        from bench.plot import plot
    except ImportError:
        return 0
    plot(timing_rows, RESULTS_DIR / "gat.png",
         "GAT attention on CPU: dgl vs dgl_accel (fwd+bwd)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
