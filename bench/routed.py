"""Timed steps of the benches that compare plain DGL with the same code under
``dgl_accel.enabled()`` (bench_extrema, bench_sddmm): one forward + backward per call."""
from __future__ import annotations

import argparse

import torch

import dgl_accel
from bench.harness import compare, interleaved, print_table, record


def module_step(g, x, module):
    """One forward + backward of a ``dgl.nn`` module on ``(g, x)``."""
    def step():
        module.zero_grad()
        module(g, x).sum().backward()
    return step


def dgl_vs_enabled(step) -> dict:
    """``{"dgl": step, "dgl_accel": step under dgl_accel.enabled()}``, the providers of one case."""
    def ours():
        with dgl_accel.enabled():
            step()
    return {"dgl": step, "dgl_accel": ours}


def routed_args(argv, description: str, quick_dims: list, dims: list):
    """The shared command line (--quick, --device, --results-dir): (args, warmup, repeat, graph
    sizes as (nodes, edges), feature widths)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="small graphs, few repeats, for a smoke run")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--results-dir", default=None, help="default: bench/results")
    args = ap.parse_args(argv)
    warmup, repeat = (1, 3) if args.quick else (2, 10)
    sizes = [(5_000, 50_000)] if args.quick else [(20_000, 200_000), (100_000, 1_000_000)]
    return args, warmup, repeat, sizes, quick_dims if args.quick else dims


def time_cases(cases: dict, warmup: int, repeat: int, args, n: int, e: int, f: int) -> list[dict]:
    """Rows of each case's steps, plain DGL and under ``enabled()``, timed interleaved."""
    rows = []
    for case, step in cases.items():
        for provider, t in interleaved(dgl_vs_enabled(step), warmup, repeat).items():
            rows.append({"case": f"{case} n={n} e={e} F={f}", "provider": provider, "op": case, "n": n, "e": e,
                         "F": f, "dtype": "float32", "tensor_device": args.device,
                         "threads": torch.get_num_threads(), "quick": args.quick, **t})
    return rows


def report(rows: list[dict], name: str, results_dir) -> None:
    """Print the table and the DGL / dgl_accel ratios; append the rows to bench/results/<name>.*"""
    print_table(rows)
    for case, r in compare(rows).items():
        print(f"{case}: dgl / dgl_accel = {r:.2f}x")
    record(name, rows, results_dir)
