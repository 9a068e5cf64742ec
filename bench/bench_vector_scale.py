"""Benchmark the toy op ``dgl_accel.functional.scale`` against plain ``x * alpha`` (float32, CPU).

Usage: python bench/bench_vector_scale.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import torch  # noqa: E402

from bench.harness import compare, print_table, record, time_fn  # noqa: E402
from dgl_accel.functional import scale  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats, for a smoke run")
    ap.add_argument("--results-dir", default=None, help="default: bench/results")
    args = ap.parse_args(argv)
    warmup, repeat = (1, 3) if args.quick else (3, 20)
    alpha = 1.5
    providers = {"torch": lambda x: x * alpha, "dgl_accel": lambda x: scale(x, alpha)}
    rows = []
    for n in (10**5, 10**6, 10**7):
        x = torch.randn(n, generator=torch.Generator().manual_seed(0))
        for name, fn in providers.items():
            t = time_fn(lambda: fn(x), warmup=warmup, repeat=repeat)
            rows.append({"case": f"n={n:.0e}", "provider": name, "n": n, "dtype": "float32",
                         "tensor_device": str(x.device), "quick": args.quick, **t})
    print_table(rows)
    for case, r in compare(rows, baseline="torch", candidate="dgl_accel").items():
        print(f"{case}: torch / dgl_accel = {r:.2f}x")
    record("scale", rows, args.results_dir)


if __name__ == "__main__":
    main()
