"""Benchmark gsddmm (per-edge ops from node and edge data): DGL's kernels against dgl-accel's op
(``enabled()``), forward + backward, interleaved repeat by repeat (float32, the tensors' device).

Cases: ``dgl.ops.u_add_v`` on GAT's [N, H, 1] scores, ``dgl.ops.u_dot_v`` on [N, H, D] (DotGatConv),
``dgl.ops.u_mul_v`` and ``dgl.ops.e_div_v`` on [N, F] rows, and one training step of ``dgl.nn``'s
DotGatConv, GATv2Conv and EdgeConv (batch_norm=True: both of its apply_edges).  CPU tensors run our
native path (the compiled loops of ``core/jit/sddmm.py`` where numba is there), CUDA tensors the
Triton kernels of ``kernels/sddmm.py``.

Usage: python bench/bench_sddmm.py [--quick] [--device cpu|cuda]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402
import dgl.nn  # noqa: E402
import torch  # noqa: E402

from bench.routed import module_step, report, routed_args, time_cases  # noqa: E402

HEADS = 4


def _op_step(g, name, lhs, rhs):
    def step():
        a, b = lhs.detach().requires_grad_(), rhs.detach().requires_grad_()
        getattr(dgl.ops, name)(g, a, b).sum().backward()
    return step


def _cases(g, n, f, device, gen):
    e = g.num_edges()
    x = torch.randn(n, f, generator=gen).to(device)
    torch.manual_seed(0)
    modules = {"DotGatConv": dgl.nn.DotGatConv(f, f // HEADS, HEADS),
               "GATv2Conv": dgl.nn.GATv2Conv(f, f // HEADS, HEADS),
               "EdgeConv": dgl.nn.EdgeConv(f, f, batch_norm=True)}
    scores = [torch.randn(n, HEADS, 1, generator=gen).to(device) for _ in range(2)]
    heads = [torch.randn(n, HEADS, f // HEADS, generator=gen).to(device) for _ in range(2)]
    weights = (torch.rand(e, f, generator=gen) + 0.5).to(device)
    cases = {"u_add_v[N,H,1]": _op_step(g, "u_add_v", *scores), "u_dot_v[N,H,D]": _op_step(g, "u_dot_v", *heads),
             "u_mul_v[N,F]": _op_step(g, "u_mul_v", x, x * 2),
             "e_div_v[N,F]": _op_step(g, "e_div_v", weights, x.abs() + 1)}
    cases.update({f"{name}_step": module_step(g, x, m.to(device)) for name, m in modules.items()})
    return cases


def main(argv=None) -> None:
    args, warmup, repeat, sizes, dims = routed_args(argv, __doc__.splitlines()[0], [32], [32, 128])
    rows = []
    for n, e in sizes:
        gen = torch.Generator().manual_seed(0)
        g = dgl.add_self_loop(dgl.rand_graph(n, e)).to(args.device)
        for f in dims:
            rows += time_cases(_cases(g, n, f, args.device, gen), warmup, repeat, args, n, e, f)
    report(rows, "sddmm", args.results_dir)


if __name__ == "__main__":
    main()
