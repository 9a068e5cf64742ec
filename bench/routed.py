"""Timed steps of the benches that compare plain DGL with the same code under
``dgl_accel.enabled()`` (bench_extrema, bench_sddmm): one forward + backward per call."""
from __future__ import annotations

import argparse

import dgl_accel


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
