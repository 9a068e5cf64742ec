"""Benchmark neighbour aggregation (copy_u / sum gspmm, forward+backward) against DGL's gspmm.

Usage: python bench/bench_aggregation.py [--quick] [--graphs a,b] [--feats 16,64,256] [--device auto|cpu|cuda]
                                        [--threads N]

CPU mode (default, always run unless ``--device cuda``): on every npz graph of the shared
datasets (``dgl_accel.data``; a synthetic graph where there are none) and F in {16, 64, 256},
time forward+backward (``out = op(g, x); out.backward(grad)``) of

* ``dgl``:       ``dgl.ops.copy_u_sum(g, x)`` (DGL's native CPU gspmm), and
* ``dgl_accel``: ``dgl_accel.functional.gspmm(g, "copy_u", "sum", x)`` under ``use_backend("native")``,

for two cases: ``copy_u_sum`` (plain) and ``gcn_both`` (``norm="both"``; the DGL baseline does
what ``dgl.nn.GraphConv(norm="both")`` does: x * out_deg^-1/2, copy_u_sum, * in_deg^-1/2, degrees
computed per call as GraphConv does).  One warm-up call each (both sides cache per-graph
structures), then the two providers alternate, in alternating order, across repeats so they share
the machine's noise; the median is reported.  ``ratio = dgl ms / dgl_accel ms`` (> 1: we are
faster); the acceptance bar is ratio >= 0.95 everywhere.  GFLOP/s (CPU) = 2*nnz*F / dgl_accel time
(forward and backward are one SpMM each).  The last line is
``cpu_min_ratio=<x> cpu_geomean_ratio=<y>``.

GPU mode (``--device cuda``; also run after the CPU mode when CUDA is available): providers
``dgl`` (``dgl.ops.copy_u_sum`` on the CUDA graph), ``torch_csr`` (``torch.sparse.mm`` with CSR
tensors of the in-adjacency and its transpose, built once outside the timer, i.e. cuSPARSE),
``dgl_accel`` (compiled Triton, ``deterministic=False``) and ``dgl_accel_det``
(``deterministic=True``), forward and forward+backward; GFLOP/s = nnz*F / time (forward;
2*nnz*F for forward+backward).  Rows go to ``bench/results/aggregation.csv`` (CPU) and
``aggregation_gpu.csv`` (GPU).

Every (graph, F) is checked before timing: dgl_accel's output and input gradient must equal DGL's
within 1e-4 (max abs error relative to the max abs reference value), else the script fails.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path


def _early_threads(argv: list[str]) -> None:
    """``--threads N`` must reach OpenMP/MKL before torch and dgl load their thread pools."""
    for i, a in enumerate(argv):
        v = a.split("=", 1)[1] if a.startswith("--threads=") else (
            argv[i + 1] if a == "--threads" and i + 1 < len(argv) else None)
        if v is not None and v.isdigit() and int(v) > 0:
            for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[k] = v


if __name__ == "__main__":
    _early_threads(sys.argv[1:])

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402
import torch  # noqa: E402

import dgl_accel  # noqa: E402
from bench.harness import record, time_fn  # noqa: E402
from dgl_accel import data as ds  # noqa: E402
from dgl_accel.functional import gspmm  # noqa: E402

FEATS = (16, 64, 256)
QUICK_FEATS = (16, 64)
QUICK_GRAPHS = ("planetoid_cora", "planetoid_citeseer", "graphdata_coauthor_cs")
CASES = ("copy_u_sum", "gcn_both")
RTOL = 1e-4
ACCEPT = 0.95


# ----------------------------------------------------------------------------- graphs
def npz_graph_names() -> list[str]:
    """Stems of the shared npz graphs (empty where there are no shared datasets)."""
    root = ds.datasets_root()
    d = root / "npz" if root is not None else None
    return sorted(p.stem for p in d.glob("*.npz")) if d is not None and d.is_dir() else []


def load_graphs(names: list[str] | None, quick: bool) -> list[tuple[str, dgl.DGLGraph]]:
    available = npz_graph_names()
    if names is None:
        if not available:
            print("no shared npz datasets found (dgl_accel.data.datasets_root() is None or has no npz/): "
                  "using dgl_accel.data.synthetic_graph(num_nodes=20000)", file=sys.stderr)
            names = ["synthetic"]
        else:
            names = ([n for n in QUICK_GRAPHS if n in available] or available[:3]) if quick else available
    out = []
    for name in names:
        if name in ("synthetic", "default"):
            g = ds.synthetic_graph(num_nodes=20000)
            for k in list(g.ndata):
                g.ndata.pop(k)
        else:
            g = ds.load(name, features="none")
        out.append((name, g))
    return out


# ----------------------------------------------------------------------------- providers
def gcn_scales(g: dgl.DGLGraph, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """GraphConv(norm="both")'s factors, computed the way it does (every call)."""
    src = torch.pow(g.out_degrees().to(dtype).clamp(min=1), -0.5)
    dst = torch.pow(g.in_degrees().to(dtype).clamp(min=1), -0.5)
    return src, dst


def dgl_op(case: str):
    if case == "copy_u_sum":
        return lambda g, x: dgl.ops.copy_u_sum(g, x)

    def gcn(g, x):  # dgl.nn.GraphConv(norm="both", weight=False) without the module overhead
        src, dst = gcn_scales(g, x.dtype)
        return dgl.ops.copy_u_sum(g, x * src[:, None]) * dst[:, None]

    return gcn


def accel_op(case: str, backend: str = "native", deterministic: bool | None = None):
    norm = "none" if case == "copy_u_sum" else "both"

    def run(g, x):
        with dgl_accel.use_backend(backend):
            return gspmm(g, "copy_u", "sum", x, norm=norm, deterministic=deterministic)

    return run


class _CSRMatmul(torch.autograd.Function):
    """out = A @ x with a prebuilt CSR A; backward A^T @ grad with a prebuilt CSR A^T (cuSPARSE)."""

    @staticmethod
    def forward(ctx, a, at, x):
        ctx.at = at
        return torch.sparse.mm(a, x)

    @staticmethod
    def backward(ctx, grad):
        return None, None, torch.sparse.mm(ctx.at, grad.contiguous())


def torch_csr_op(g: dgl.DGLGraph, case: str):
    """torch.sparse.mm on CSR tensors of the in-adjacency (rows = dst) and its transpose."""
    src, dst = g.edges(order="eid")
    n_src, n_dst = g.num_src_nodes(), g.num_dst_nodes()
    ones = torch.ones(src.numel(), dtype=torch.float32, device=g.device)
    with warnings.catch_warnings():  # sparse CSR is "beta" in torch 2.x and says so on construction
        warnings.simplefilter("ignore", UserWarning)
        a = torch.sparse_coo_tensor(torch.stack([dst.long(), src.long()]), ones, (n_dst, n_src)).coalesce()
        a_csr = a.to_sparse_csr()
        at_csr = a.t().coalesce().to_sparse_csr()
    s_scale, d_scale = gcn_scales(g, torch.float32)

    def run(g_, x):
        if case == "copy_u_sum":
            return _CSRMatmul.apply(a_csr, at_csr, x)
        return _CSRMatmul.apply(a_csr, at_csr, x * s_scale[:, None]) * d_scale[:, None]

    return run


# ----------------------------------------------------------------------------- checking / timing
def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    scale = ref.abs().max().item() if ref.numel() else 0.0
    return (a - ref).abs().max().item() / max(scale, 1e-30) if a.numel() else 0.0


def check(name: str, f: int, case: str, g, x, grad, ref_fn, fn, label: str) -> float:
    """fn's output and d(out . grad)/dx equal ref_fn's within RTOL; raise otherwise."""
    outs = []
    for op in (ref_fn, fn):
        x.grad = None
        out = op(g, x)
        out.backward(grad)
        outs.append((out.detach(), x.grad.detach().clone()))
    x.grad = None
    (ro, rg), (o, og) = outs
    err = max(rel_err(o, ro), rel_err(og, rg))
    if not (err <= RTOL):  # also catches NaN
        raise SystemExit(f"FAILED correctness: {label} on {name} F={f} case={case}: "
                         f"max relative error {err:.3g} > {RTOL} (output {rel_err(o, ro):.3g}, "
                         f"input grad {rel_err(og, rg):.3g}) vs DGL")
    return err


def make_call(fn, g, x, grad, backward: bool):
    if backward:
        def call():
            x.grad = None
            fn(g, x).backward(grad)
    else:
        def call():
            with torch.no_grad():
                fn(g, x)
    return call


def interleaved(calls: dict, warmup: int, min_repeat: int, max_repeat: int, min_time: float,
                sync: bool) -> dict:
    """Time each provider's call, alternating providers (and their order) every repeat.

    Repeats at least ``min_repeat`` times, more (up to ``max_repeat``) until every provider has
    ``min_time`` seconds of samples.  Returns ``{provider: {median, min, max, repeat}}``."""
    names = list(calls)
    for _ in range(warmup):
        for n in names:
            calls[n]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    i = 0
    while i < min_repeat or (i < max_repeat and min(sum(s) for s in samples.values()) < min_time):
        order = names if i % 2 == 0 else names[::-1]
        for n in order:
            samples[n].append(time_fn(calls[n], warmup=0, repeat=1, sync=sync)["median"])
        i += 1
    return {n: {"median": statistics.median(s), "min": min(s), "max": max(s), "repeat": len(s)}
            for n, s in samples.items()}


def fmt_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    sys.stdout.flush()


def _cell(v: float, digits: int = 4) -> str:
    return f"{v:.{digits}g}"


# ----------------------------------------------------------------------------- CPU mode
def run_cpu(graphs, feats, args) -> list[dict]:
    if args.quick:
        warmup, min_rep, max_rep, min_time = 1, 3, 5, 0.05
    else:
        warmup, min_rep, max_rep, min_time = 1, args.repeat, 200, 1.0
    gen = torch.Generator().manual_seed(0)
    rows, table = [], []
    t_start = time.perf_counter()
    for name, g in graphs:
        n, e = g.num_nodes(), g.num_edges()
        for f in feats:
            x = torch.randn(n, f, generator=gen).requires_grad_()
            grad = torch.randn(n, f, generator=gen)
            for case in CASES:
                ref, ours = dgl_op(case), accel_op(case, "native")
                err = check(name, f, case, g, x, grad, ref, ours, "dgl_accel (native)")
                calls = {"dgl": make_call(ref, g, x, grad, True), "dgl_accel": make_call(ours, g, x, grad, True)}
                t = interleaved(calls, warmup, min_rep, max_rep, min_time, sync=False)
                ratio = t["dgl"]["median"] / t["dgl_accel"]["median"]
                gflops = 2 * e * f / t["dgl_accel"]["median"] / 1e9
                common = {"graph": name, "nodes": n, "edges": e, "F": f, "variant": case, "mode": "fwd+bwd",
                          "device_kind": "cpu", "threads": torch.get_num_threads(),
                          "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""), "quick": args.quick,
                          "max_rel_err": err}
                for prov in ("dgl", "dgl_accel"):
                    rows.append({"case": f"{name}/F={f}/{case}", "provider": prov, **common, **t[prov],
                                 "gflops": 2 * e * f / t[prov]["median"] / 1e9, "ratio_dgl_over_accel": ratio})
                table.append([name, str(n), str(e), str(f), case, _cell(t["dgl"]["median"] * 1e3),
                              _cell(t["dgl_accel"]["median"] * 1e3), f"{ratio:.3f}", f"{gflops:.2f}"])
                if args.verbose:
                    print(f"  {name} F={f} {case}: ratio {ratio:.3f} "
                          f"(reps {t['dgl']['repeat']}, {time.perf_counter() - t_start:.0f}s)", file=sys.stderr)
            del x, grad
    print(f"\nCPU aggregation, forward+backward (median of interleaved repeats; torch threads "
          f"{torch.get_num_threads()}; ratio = dgl / dgl_accel, > 1 is faster; GFLOP/s = 2*nnz*F / dgl_accel time)")
    fmt_table(["graph", "nodes", "edges", "F", "case", "dgl ms", "dgl_accel ms", "ratio", "GFLOP/s"], table)
    ratios = [float(r[7]) for r in table]
    # Summary from unrounded ratios.
    exact = [r["ratio_dgl_over_accel"] for r in rows if r["provider"] == "dgl"]
    mn, gm = min(exact), math.exp(sum(math.log(r) for r in exact) / len(exact))
    print(f"\n{len(ratios)} cases in {time.perf_counter() - t_start:.0f}s; ratio min {mn:.3f}, "
          f"geometric mean {gm:.3f}, max {max(exact):.3f}")
    below = [(r, row) for r, row in zip(exact, table) if r < ACCEPT]
    if below:
        print(f"cases below the {ACCEPT} bar ({len(below)}):")
        for r, row in below:
            print(f"  {row[0]} F={row[3]} {row[4]}: ratio {r:.3f} (dgl_accel {(1 / r - 1) * 100:.1f}% slower "
                  f"than dgl; {(ACCEPT - r) / ACCEPT * 100:.1f}% short of the bar)")
    else:
        print(f"all cases at ratio >= {ACCEPT}")
    record("aggregation", rows, args.results_dir)
    print(f"cpu_min_ratio={mn:.3f} cpu_geomean_ratio={gm:.3f}")
    return rows


# ----------------------------------------------------------------------------- GPU mode
GPU_PROVIDERS = ("dgl", "torch_csr", "dgl_accel", "dgl_accel_det")


def run_gpu(graphs, feats, args, device: str = "cuda", accel_backend: str = "triton") -> list[dict]:
    """``accel_backend`` is "triton" for real runs (compiled kernels on CUDA tensors)."""
    if args.quick:
        warmup, min_rep, max_rep, min_time = 2, 5, 20, 0.02
    else:
        warmup, min_rep, max_rep, min_time = 3, args.repeat * 2, 200, 0.2
    sync = device == "cuda"
    gen = torch.Generator().manual_seed(0)
    rows, table = [], []
    for name, g_cpu in graphs:
        g = g_cpu.to(device)
        n, e = g.num_nodes(), g.num_edges()
        for f in feats:
            x = torch.randn(n, f, generator=gen).to(device).requires_grad_()
            grad = torch.randn(n, f, generator=gen).to(device)
            for case in CASES:
                fns = {"dgl": dgl_op(case), "torch_csr": torch_csr_op(g, case),
                       "dgl_accel": accel_op(case, accel_backend, deterministic=False),
                       "dgl_accel_det": accel_op(case, accel_backend, deterministic=True)}
                for prov in GPU_PROVIDERS[1:]:
                    check(name, f, case, g, x, grad, fns["dgl"], fns[prov], prov)
                for mode, backward in (("fwd", False), ("fwd+bwd", True)):
                    calls = {p: make_call(fns[p], g, x, grad, backward) for p in GPU_PROVIDERS}
                    t = interleaved(calls, warmup, min_rep, max_rep, min_time, sync=sync)
                    flops = e * f * (2 if backward else 1)
                    for p in GPU_PROVIDERS:
                        rows.append({"case": f"{name}/F={f}/{case}/{mode}", "provider": p, "graph": name,
                                     "nodes": n, "edges": e, "F": f, "variant": case, "mode": mode,
                                     "device_kind": device, "quick": args.quick, **t[p],
                                     "gflops": flops / t[p]["median"] / 1e9,
                                     "speedup_vs_dgl": t["dgl"]["median"] / t[p]["median"]})
                    table.append([name, str(e), str(f), case, mode]
                                 + [_cell(t[p]["median"] * 1e3) for p in GPU_PROVIDERS]
                                 + [f"{flops / t[p]['median'] / 1e9:.1f}" for p in GPU_PROVIDERS]
                                 + [f"{t['dgl']['median'] / t['dgl_accel']['median']:.2f}",
                                    f"{t['torch_csr']['median'] / t['dgl_accel']['median']:.2f}"])
            del x, grad
    dev_name = torch.cuda.get_device_name(0) if sync else device
    print(f"\nGPU aggregation on {dev_name} (median of interleaved repeats; GFLOP/s = nnz*F / time "
          f"forward, 2*nnz*F / time forward+backward; dgl_accel = Triton atomics, _det = deterministic)")
    fmt_table(["graph", "edges", "F", "case", "mode"] + [f"{p} ms" for p in GPU_PROVIDERS]
              + [f"{p} GF/s" for p in GPU_PROVIDERS] + ["dgl/accel", "csr/accel"], table)
    for p in GPU_PROVIDERS[1:]:
        sp = [r["speedup_vs_dgl"] for r in rows if r["provider"] == p]
        print(f"{p}: speedup vs dgl min {min(sp):.2f}, geomean {math.exp(sum(map(math.log, sp)) / len(sp)):.2f}")
    record("aggregation_gpu", rows, args.results_dir)
    return rows


# ----------------------------------------------------------------------------- main
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 small graphs, F in {16, 64}, few repeats")
    ap.add_argument("--graphs", default=None, help="comma-separated npz stems (default: all npz graphs)")
    ap.add_argument("--feats", default=None, help="comma-separated feature widths (default: 16,64,256)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="auto: CPU mode, then GPU mode if CUDA is available; cpu/cuda: only that mode")
    ap.add_argument("--repeat", type=int, default=11, help="minimum timed repeats per provider (CPU)")
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads for torch and DGL (OpenMP) alike; default: the libraries' default. "
                         "On a shared machine, --threads 1 avoids OpenMP threads waiting on a busy core")
    ap.add_argument("--results-dir", default=None, help="default: bench/results")
    ap.add_argument("--verbose", action="store_true", help="progress on stderr")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if getattr(dgl_accel, "is_enabled", lambda: False)():
        # dgl_accel.enable() routes dgl.ops.gspmm to us: the "dgl" baseline must be DGL's own.
        dgl_accel.disable()
        print("note: dgl-accel's DGL patching was enabled; disabled it so 'dgl' is DGL's own gspmm",
              file=sys.stderr)

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("expected a CUDA device (got none): torch.cuda.is_available() is False "
                         f"(torch {torch.__version__}, CUDA build {torch.version.cuda}). "
                         "Fix: run on a machine with a CUDA GPU and a CUDA build of torch and dgl, "
                         "or use --device cpu.")
    feats = tuple(int(v) for v in args.feats.split(",")) if args.feats else (QUICK_FEATS if args.quick else FEATS)
    names = [s.strip() for s in args.graphs.split(",") if s.strip()] if args.graphs else None
    graphs = load_graphs(names, args.quick)
    print(f"graphs: {', '.join(n for n, _ in graphs)}; F: {', '.join(map(str, feats))}")
    if args.device in ("auto", "cpu"):
        run_cpu(graphs, feats, args)
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        run_gpu(graphs, feats, args)


if __name__ == "__main__":
    main()
