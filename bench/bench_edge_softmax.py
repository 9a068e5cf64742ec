"""The edge softmax on CPU vs DGL (issue 18), measured in one run on the shared graphs of
``bench/bench_gat.py`` (self-loops as DGL's GAT examples add them): forward + backward on [E, 4]
scores, ``dgl.nn.functional.edge_softmax`` against
:func:`dgl_accel.core.attention.edge_softmax.edge_softmax` on the in-CSR; bar: >= 1.5x DGL.

Providers run interleaved repeat by repeat (bench/harness.py); rows go to
bench/results/edge_softmax.jsonl (and .csv), a bar chart of the timings to bench/results/edge_softmax.png.

Usage: DGL_ACCEL_DATASETS=... DGLBACKEND=pytorch python bench/bench_edge_softmax.py [--quick] [--graphs a,b]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import torch  # noqa: E402
from dgl.nn.functional import edge_softmax as dgl_edge_softmax  # noqa: E402

from bench.bench_gat import GRAPHS, HEADS, PROVIDERS, geomean, load_graph  # noqa: E402
from bench.harness import RESULTS_DIR, interleaved, print_table, record  # noqa: E402
from dgl_accel import data  # noqa: E402
from dgl_accel.core.attention.edge_softmax import edge_softmax  # noqa: E402
from dgl_accel.graph.views import DGLGraphViews  # noqa: E402


def softmax_setup(g, seed: int = 1):
    torch.manual_seed(seed)
    score = torch.randn(g.num_edges(), HEADS, requires_grad=True)
    grad = torch.randn(g.num_edges(), HEADS)
    rows = DGLGraphViews(g).csr("in")

    def step(fn):
        def run():
            score.grad = None
            fn().backward(grad)
        return run

    fns = {"dgl": step(lambda: dgl_edge_softmax(g, score)), "dgl_accel": step(lambda: edge_softmax(rows, score))}
    with torch.no_grad():
        diff = float((dgl_edge_softmax(g, score) - edge_softmax(rows, score)).abs().max())
    return fns, diff


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if data.datasets_root() is None:
        print("no shared datasets here (DGL_ACCEL_DATASETS): nothing to compare on", file=sys.stderr)
        return 0
    warmup, repeat = (1, 5) if args.quick else (2, 15)
    rows, speedups = [], {}
    for name in args.graphs.split(","):
        g = load_graph(name)
        facts = {"graph": name, "num_nodes": g.num_nodes(), "num_edges": g.num_edges(), "heads": HEADS,
                 "loadavg_1min": os.getloadavg()[0]}  # the machine may be shared: say how busy it was
        step_fns, diff = softmax_setup(g)
        times = interleaved(step_fns, warmup=warmup, repeat=repeat)
        for provider in PROVIDERS:
            rows.append({"case": f"{name} edge_softmax fwd+bwd", "provider": provider, **times[provider], **facts,
                         "max_abs_diff": diff})
        speedups[name] = times["dgl"]["median"] / times["dgl_accel"]["median"]
        del step_fns
    print_table(rows, columns=["max_abs_diff"])
    record("edge_softmax", rows)
    print("\nspeedup = DGL median / ours (ours/DGL time in brackets); bar: >= 1.5x, geomean over graphs")
    for name, s in speedups.items():
        print(f"  edge_softmax {name}: {s:.2f}x  ({1 / s:.3f})")
    print(f"  edge_softmax geomean: {geomean(speedups.values()):.2f}x")
    try:  # matplotlib is optional: the numbers are in the results file either way
        from bench.plot import plot
    except ImportError:
        return 0
    plot(rows, RESULTS_DIR / "edge_softmax.png", "edge softmax on CPU: dgl vs dgl_accel (fwd+bwd)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
