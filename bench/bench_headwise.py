"""Benchmark multi-head message passing: DGL's gspmm against dgl-accel's head-wise op (``enabled()``),
forward + backward, interleaved repeat by repeat (float32, the tensors' device).

Cases on the shared graphs (``DGL_ACCEL_DATASETS``; snap_soc-Slashdot0902, fb100_Cornell5, a
self-loop per node; random graphs where they are absent), H = 4 heads of D = 32:
``dgl.ops.u_mul_e_sum`` with [E, H, 1] weights on [N, H, D] features (GAT's aggregation;
gradients for both), ``dgl.ops.copy_e_sum`` of [E, H, D] edge features, and one
``dgl.nn.GATConv(H * D, D, num_heads=H)`` training step (its edge softmax and attention scores run
on the other routes too).  CPU tensors run our native path (the compiled loop of
``core/jit/headwise.py`` where numba is there), CUDA tensors the Triton kernel.  ``--quick``: one
random graph (5k nodes, 50k edges).

Usage: python bench/bench_headwise.py [--quick] [--device cpu|cuda] [--graphs NAME ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402
import dgl.nn  # noqa: E402
import torch  # noqa: E402

import dgl_accel.data  # noqa: E402
from bench.routed import module_step, report, routed_args, time_cases  # noqa: E402

HEADS, HEAD_DIM = 4, 32
GRAPHS = ["snap_soc-Slashdot0902", "fb100_Cornell5"]


def _step(g, run, inputs, grad_out):
    def step():
        leaves = [t.detach().requires_grad_() for t in inputs]
        run(g, *leaves).backward(grad_out)
    return step


def _cases(g, device) -> dict:
    gen = torch.Generator().manual_seed(0)
    n, e = g.num_src_nodes(), g.num_edges()
    ft = torch.randn(n, HEADS, HEAD_DIM, generator=gen).to(device)
    a = torch.rand(e, HEADS, 1, generator=gen).to(device)
    ef = torch.randn(e, HEADS, HEAD_DIM, generator=gen).to(device)
    grad_out = torch.randn(g.num_dst_nodes(), HEADS, HEAD_DIM, generator=gen).to(device)
    torch.manual_seed(0)
    conv = dgl.nn.GATConv(HEADS * HEAD_DIM, HEAD_DIM, num_heads=HEADS, allow_zero_in_degree=True).to(device)
    return {"u_mul_e_sum [E,H,1]x[N,H,D]": _step(g, dgl.ops.u_mul_e_sum, (ft, a), grad_out),
            "copy_e_sum [E,H,D]": _step(g, dgl.ops.copy_e_sum, (ef,), grad_out),
            "gatconv_step": module_step(g, ft.reshape(n, HEADS * HEAD_DIM), conv)}


def _shared_graphs(names, sizes) -> list:
    """(name, graph with one self-loop per node) of each shared graph; random graphs of ``sizes``
    where the shared datasets are not there (``DGL_ACCEL_DATASETS`` unset)."""
    try:
        return [(name, dgl.add_self_loop(dgl.remove_self_loop(dgl_accel.data.load(name, features="none"))))
                for name in names]
    except ValueError as err:
        print(f"shared graphs not found, random graphs instead: {err}")
        return [(f"random{n}", dgl.rand_graph(n, e)) for n, e in sizes]


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = GRAPHS
    if "--graphs" in argv:
        at = argv.index("--graphs")
        names, argv = argv[at + 1:], argv[:at]
    args, warmup, repeat, sizes, _ = routed_args(argv, __doc__.splitlines()[0], [HEADS * HEAD_DIM], [HEADS * HEAD_DIM])
    warmup, repeat = (1, 3) if args.quick else (1, 5)
    graphs = [("random", dgl.rand_graph(*sizes[0]))] if args.quick else _shared_graphs(names, sizes)
    rows = []
    for name, g in graphs:
        g = g.to(args.device)
        for row in time_cases(_cases(g, args.device), warmup, repeat, args, g.num_nodes(), g.num_edges(),
                              HEADS * HEAD_DIM):
            rows.append({**row, "case": f"{name} {row['case']}", "graph": name, "heads": HEADS, "head_dim": HEAD_DIM})
    report(rows, "headwise", args.results_dir)


if __name__ == "__main__":
    main()
