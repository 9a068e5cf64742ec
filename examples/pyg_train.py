"""Train PyG models as written and after ``dgl_accel.pyg.swap``, from the same initial weights, and
compare epoch times and losses: what a PyG user gains by adding two lines to their script.

    import dgl_accel.pyg
    dgl_accel.pyg.swap(model)                       # GCNConv, SAGEConv, GINConv, GATConv, GATv2Conv
    sampler = dgl_accel.pyg.NeighborSampler(data, [15, 10, 5])   # no pyg-lib needed

Models (``--models``):
* ``gcn``: full graph, 2 x GCNConv (hidden 256), cross-entropy on a 10% training set;
* ``gat``: full graph, GATConv 8 heads x 8 (ELU) then GATConv 1 head;
* ``sage``: minibatches, 3 x SAGEConv 256, fanouts [15, 10, 5], batch 1024, PyG's ``NodeLoader``
  fed by our ``NeighborSampler``; each step split into sample / gather / forward / backward.

Each model trains twice per epoch in turn (PyG's layers, then ours: interleaved), with the same
seed; the loss of every epoch must agree (``--tolerance``, relative).  Graphs (``--graph``):
``rmat:SCALE`` (Graph500 R-MAT, symmetrised, 128 random features, 16 random classes),
``tiny`` (a 300-node random graph, for the test command).  ``--device cuda`` keeps graph, features
and the sampler on the GPU (peak memory is reported there).  One JSON row per model and provider
goes to ``--results`` when given.  The training loop is :mod:`dgl_accel.gpu_report.training`'s,
the one the GPU report's ``training`` section runs.

Usage: python examples/pyg_train.py [--graph rmat:16] [--models gcn,gat,sage] [--epochs 20]
                                    [--device cpu] [--tiny] [--results rows.jsonl]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from dgl_accel.gpu_report.training import MODELS, OURS, PYG, example_graph, require_ok, train


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graph", default="rmat:14")
    p.add_argument("--models", default="gcn,gat,sage")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batches", type=int, default=8, help="minibatches per SAGE epoch")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=1e-3, help="largest relative loss gap allowed")
    p.add_argument("--tiny", action="store_true", help="the test command's run: --graph tiny, 3 epochs, 2 batches")
    p.add_argument("--results", type=Path)
    args = p.parse_args(argv)
    if args.tiny:
        args.graph, args.epochs, args.batches = "tiny", 3, 2
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad or not names:
        p.error(f"expected models among {list(MODELS)} (got {bad or names}). Fix: --models gcn,gat,sage")
    device = torch.device(args.device)
    data, classes = example_graph(args.graph, device, seed=args.seed), 16
    print(f"== {args.graph}: {data.num_nodes} nodes, {data.num_edges} edges, {data.num_features} features, "
          f"on {device}", file=sys.stderr)
    rows, ok = [], True
    for name in names:
        pair = require_ok(train(name, data, classes, [PYG, OURS], epochs=args.epochs, batches=args.batches,
                                seed=args.seed, progress=lambda msg: print(msg, file=sys.stderr)))
        pair[1]["speedup"] = pair[0]["step_s"] / pair[1]["step_s"]
        rows += [{**r, "graph": args.graph, "device": str(device)} for r in pair]
        within = pair[1]["max_relative_loss_gap"] <= args.tolerance
        ok &= within
        print(f"{name}: step PyG {pair[0]['step_s'] * 1e3:.1f} ms, ours {pair[1]['step_s'] * 1e3:.1f} ms "
              f"({pair[1]['speedup']:.2f}x); loss gap {pair[1]['max_relative_loss_gap']:.1e} "
              f"({'within' if within else 'OUTSIDE'} {args.tolerance:g})")
    if args.results:
        with open(args.results, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"summary: {len(names)} model(s), losses {'agree' if ok else 'DIFFER'} within {args.tolerance:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
