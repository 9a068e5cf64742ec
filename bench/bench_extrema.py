"""Benchmark max/min message passing: DGL's gspmm against dgl-accel's extrema op (``enabled()``),
forward + backward, interleaved repeat by repeat (float32, the tensors' device).

Cases: ``dgl.ops.copy_u_max`` and ``dgl.ops.u_mul_e_min`` (one weight per edge) on random graphs,
and one ``dgl.nn.SAGEConv(F, F, "pool")`` training step.  CPU tensors run our native path (the
compiled loop of ``core/jit/extrema.py`` where numba is there), CUDA tensors the Triton kernel.

Usage: python bench/bench_extrema.py [--quick] [--device cpu|cuda]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402
import dgl.nn  # noqa: E402
import torch  # noqa: E402

from bench.routed import module_step, report, routed_args, time_cases  # noqa: E402


def _op_step(g, x, w, name):
    def step():
        xx = x.detach().requires_grad_()
        ww = w.detach().requires_grad_()
        out = dgl.ops.copy_u_max(g, xx) if name == "copy_u_max" else dgl.ops.u_mul_e_min(g, xx, ww)
        out = torch.where(torch.isinf(out), torch.zeros((), dtype=out.dtype, device=out.device), out)
        out.sum().backward()
    return step


def main(argv=None) -> None:
    args, warmup, repeat, sizes, dims = routed_args(argv, __doc__.splitlines()[0], [16], [16, 64])
    rows = []
    for n, e in sizes:
        gen = torch.Generator().manual_seed(0)
        g = dgl.rand_graph(n, e).to(args.device)
        w = torch.rand(e, generator=gen).to(args.device)
        for f in dims:
            x = torch.randn(n, f, generator=gen).to(args.device)
            torch.manual_seed(0)
            conv = dgl.nn.SAGEConv(f, f, "pool").to(args.device)
            cases = {"copy_u_max": _op_step(g, x, w, "copy_u_max"), "u_mul_e_min": _op_step(g, x, w, "u_mul_e_min"),
                     "sage_pool_step": module_step(g, x, conv)}
            rows += time_cases(cases, warmup, repeat, args, n, e, f)
    report(rows, "extrema", args.results_dir)


if __name__ == "__main__":
    main()
