"""Every drop-in's training step under CPU bf16 autocast, ours against the peer's module (issue 45).

A row per module: one training step (forward and loss under ``torch.autocast("cpu",
dtype=torch.bfloat16)``, backward, Adam step) of the peer's module and of a deep copy swapped by
dgl-accel, from the same weights, interleaved repeat by repeat, each timed step starting from the
state the warm-up left (``bench.harness.TrainingStep``).  Ratio = the best peer's median / ours (> 1:
ours is faster).

* DGL (where DGL is installed): the drop-in matrix's modules (``bench.dropin_cases``) at its defaults
  (input 128, hidden 64, attention 4 heads x 32), and the GAT paper's first layer (767 -> 8 x 8) for
  the attention modules.  DGL's ``GATConv`` and ``GATv2Conv`` raise under autocast; their peer step
  then runs in fp32, the best a DGL user has (the row says so: ``peer_precision``).
* PyG (where torch_geometric is installed): GCNConv, SAGEConv, GINConv(Linear), GATConv and GATv2Conv
  (4 heads x 32) at the same widths, through ``dgl_accel.pyg.swap``, against PyG eager and PyG under
  ``torch.compile`` (``--no-compile`` leaves the latter out); the ratio is against the faster of the two.

Graphs: the shared npz graphs (``--graphs``, default Amazon-CS), self-loops added, random features.
Rows: bench/results/autocast.jsonl (and .csv), with the CPU model, threads and precisions.

Usage: DGL_ACCEL_DATASETS=... python bench/bench_autocast.py [--graphs amazon_cs,cora]
    [--adapters dgl,pyg] [--modules graphconv,sage,gcn] [--threads 1] [--repeat 10]
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.harness import TrainingStep, cpu_model, interleaved, ratio_summary, record, warm_up  # noqa: E402

BENCH = "autocast"
DTYPE = torch.bfloat16
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
NPZ = {"cora": "planetoid_cora", "amazon_cs": "graphdata_amazon_cs", "cornell5": "fb100_Cornell5",
       "slashdot": "snap_soc-Slashdot0902", "flickr": "graphdata_flickr"}


def _time(steps: dict, warmup: int, repeat: int) -> dict:
    warm_up(steps, warmup)
    return interleaved(steps, warmup=0, repeat=repeat)


# ------------------------------------------------------------------------------------------------ DGL
def dgl_cells(graphs: list[str], modules: str | None):
    """(case, steps, facts) per DGL module: the matrix's defaults, and the GAT recipe for attention."""
    from bench.dropin_cases import MODULES, Cell, Graph, resolve, setup
    for name in graphs:
        graph = Graph(NPZ.get(name, name) if name not in ("cora", "amazon_cs") else name)
        for key in resolve(modules, MODULES, "modules"):
            spec = MODULES[key]
            cells = [Cell(key, graph.name, hidden=32 if spec.attention else 64, heads=4 if spec.attention else 1)]
            if spec.attention:
                cells.append(Cell(key, graph.name, in_feats=767, hidden=8, heads=8, axis="recipe"))
            for cell in cells:
                steps, facts = setup(cell, graph, autocast=DTYPE)
                yield f"dgl {cell.case}", {"dgl": steps["dgl"], "dgl_accel": steps["dgl_accel"]}, {
                    "adapter": "dgl", **cell.fields(), **facts}


# ------------------------------------------------------------------------------------------------ PyG
def _pyg_graph(name: str):
    """(edge_index with self-loops, num_nodes) of a shared npz graph (the GPU report's DGL-free loader)."""
    from dgl_accel.gpu_report.graphs import load_npz
    g = load_npz(Path(os.environ.get("DGL_ACCEL_DATASETS", SHARED)) / "npz" / f"{NPZ.get(name, name)}.npz", "cpu")
    loops = torch.arange(g.num_nodes)
    return torch.stack([torch.cat([g.src, loops]), torch.cat([g.dst, loops])]), g.num_nodes


def pyg_cells(graphs: list[str], modules: str | None, width: int = 128, compiled: bool = True):
    import torch_geometric.nn as pyg_nn

    import dgl_accel.pyg

    convs = {"GCNConv": lambda: pyg_nn.GCNConv(width, 64, add_self_loops=False),
             "SAGEConv": lambda: pyg_nn.SAGEConv(width, 64),
             "GINConv": lambda: pyg_nn.GINConv(torch.nn.Linear(width, 64)),
             "GATConv": lambda: pyg_nn.GATConv(width, 32, heads=4, add_self_loops=False),
             "GATv2Conv": lambda: pyg_nn.GATv2Conv(width, 32, heads=4, add_self_loops=False)}
    if modules:
        picked = {m.strip().lower() for m in modules.split(",")}
        convs = {k: v for k, v in convs.items() if k.lower() in picked or k.lower().removesuffix("conv") in picked}
    for name in graphs if convs else []:
        edge_index, num_nodes = _pyg_graph(name)
        x = torch.randn(num_nodes, width, generator=torch.Generator().manual_seed(width))
        gen = torch.Generator().manual_seed(0)
        rows = torch.randperm(num_nodes, generator=gen)[: num_nodes // 10]
        for conv, make in convs.items():
            torch.manual_seed(0)
            theirs = make()
            ours = copy.deepcopy(theirs)
            if not dgl_accel.pyg.swap(ours).swapped:
                raise RuntimeError(f"dgl_accel.pyg.swap left {conv} alone")
            with torch.no_grad(), torch.autocast("cpu", dtype=DTYPE):
                out = theirs(x, edge_index)
                diff = float((ours(x, edge_index).float() - out.float()).abs().max())
            labels = torch.randint(0, out.shape[1], (num_nodes,), generator=gen)[rows]

            def step(model, call=None):
                opt = torch.optim.Adam(model.parameters(), lr=0.01)
                call = model if call is None else call

                def run():
                    with torch.autocast("cpu", dtype=DTYPE):
                        loss = F.cross_entropy(call(x, edge_index)[rows], labels)
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                return TrainingStep(model, opt, run)

            facts = {"adapter": "pyg", "module": conv, "graph": name, "nodes": num_nodes,
                     "edges": edge_index.shape[1], "in_feats": width, "max_abs_diff": diff,
                     "precision": "autocast bfloat16", "peer_precision": "autocast bfloat16", "peer_error": ""}
            steps = {"pyg": step(theirs)}
            if compiled:  # PyG's module under torch.compile (inductor), from the same weights
                torch._dynamo.reset()  # past its cache size limit dynamo silently runs eager
                twin = copy.deepcopy(theirs)
                steps["pyg_compiled"] = step(twin, torch.compile(twin))
            steps["dgl_accel"] = step(ours)
            yield f"pyg {conv} {name} in{width}", steps, facts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="amazon_cs", help=f"comma-separated, from {', '.join(NPZ)}")
    ap.add_argument("--adapters", default="dgl,pyg", help="dgl, pyg or both (each where installed)")
    ap.add_argument("--modules", default=None, help="comma-separated: DGL matrix keys (graphconv, sage, ...) "
                                                    "and PyG convs (gcn, sage, gin, gat, gatv2); default all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-compile", action="store_true", help="PyG rows: leave out the torch.compile'd peer")
    ap.add_argument("--repeat", type=int, default=10, help="timed steps per provider, interleaved")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--results-dir", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    graphs = [s.strip() for s in args.graphs.split(",") if s.strip()]
    adapters = args.adapters.split(",")
    sources = []
    if "dgl" in adapters:
        try:
            import dgl  # noqa: F401

            import dgl_accel
            if dgl_accel.is_enabled():
                dgl_accel.disable()
            sources.append(dgl_cells(graphs, args.modules))
        except ImportError:
            print("no DGL here: the DGL drop-ins are left out", file=sys.stderr)
    if "pyg" in adapters:
        try:
            import torch_geometric  # noqa: F401
            sources.append(pyg_cells(graphs, args.modules, compiled=not args.no_compile))
        except ImportError:
            print("no torch_geometric here: the PyG drop-ins are left out", file=sys.stderr)
    started, rows = time.perf_counter(), []
    common = {"cpu_model": cpu_model(), "threads": args.threads, "torch": torch.__version__}
    for source in sources:
        for case, steps, facts in source:
            times = _time(steps, args.warmup, args.repeat)
            peer = min((p for p in steps if p != "dgl_accel"), key=lambda p: times[p]["median"])  # the best peer
            ratio = times[peer]["median"] / times["dgl_accel"]["median"]
            cell = [{"case": case, "provider": p, **times[p], **facts, **common} for p in steps]
            cell[-1].update(ratio=ratio, best_peer=peer)
            rows += record(BENCH, cell, args.results_dir)
            note = f" (peer in fp32: {facts['peer_error'][:60]})" if facts["peer_error"] else ""
            peers = ", ".join(f"{p} {times[p]['median'] * 1e3:.1f} ms" for p in steps if p != "dgl_accel")
            print(f"{case}: {peers}, ours {times['dgl_accel']['median'] * 1e3:.1f} ms, {ratio:.2f}x the best "
                  f"({peer}){note}; {time.perf_counter() - started:.0f} s", file=sys.stderr)
    ratio_summary(rows, noun="modules", bar="bar: every module >= 1.0x", started=started,
                  columns=["ratio", "best_peer", "peer_precision"], nothing="no DGL nor torch_geometric, or no graphs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
