"""Accuracy parity of the drop-in layers against DGL's own, paired by seed (issue 31).

For each dataset, model and seed, one model is built with DGL's layers (``dgl.nn``); a deep copy of
it (the same initial weights) is swapped to dgl-accel's layers with ``dgl_accel.swap``.  Both train
from the same torch seed on the same split, so they differ only in the layers' code: feature
dropout draws the same torch stream, attention dropout (GAT) draws its own mask.

    python examples/dropin_parity.py [--datasets cora,citeseer,amazon_cs,coauthor_cs]
        [--models gat,gcn,sage] [--seeds 10] [--epochs 200] [--results bench/results/dropin_accuracy.jsonl]

Models (the recipes their papers and DGL's examples use):

* ``gat``: GAT paper: 8 heads x 8 features, ELU, 1 output head, feature and attention dropout 0.6,
  Adam lr 0.005, weight decay 5e-4 (``--attn-drop`` / ``--feat-drop`` override the two dropouts);
* ``gcn``: Kipf and Welling: hidden 16, ReLU, dropout 0.5, lr 0.01, weight decay 5e-4;
* ``sage``: GraphSAGE mean, hidden 16, ReLU, dropout 0.5, lr 0.01, weight decay 5e-4.

Splits: 20 labelled nodes per class, 30 per class validation, the rest test, random by seed
(Shchur et al.), for every dataset.  Features: row-normalised bag of words, self-loops added.
Early stopping as the GAT paper: the test accuracy of the epoch with the best validation accuracy
(the first such epoch).  A line per run, a table of paired differences at the end, and a ``summary:``
line; ``--results`` appends one JSON row per (dataset, model, seed, provider).
"""
from __future__ import annotations

import argparse
import copy
import datetime
import json
import statistics
import time

import dgl
import numpy as np
import torch
import torch.nn.functional as F
from coauthor_sage import split  # examples/, next to this script: the 20 / 30 per class split
from torch import nn

import dgl_accel
from dgl_accel import data

PROVIDERS = ("dgl", "dgl_accel")


def load(name: str):
    """(graph with self-loops, row-normalised features, labels) of a shared dataset or ``synthetic``."""
    if name == "synthetic":
        g = data.load("synthetic", num_nodes=600, num_classes=4, feat_dim=48, seed=0)
    else:
        g = data.load(name)
    x, y = g.ndata.pop("feat").float(), g.ndata["label"]
    x = x / x.sum(1, keepdim=True).clamp_min(1e-12) if bool((x >= 0).all()) else x
    g = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph(g.edges(), num_nodes=g.num_nodes())))
    return g, x.contiguous(), y


class GAT(nn.Module):
    def __init__(self, i, c, feat_drop=0.6, attn_drop=0.6):
        super().__init__()
        self.l1 = dgl.nn.GATConv(i, 8, 8, feat_drop=feat_drop, attn_drop=attn_drop, activation=F.elu)
        self.l2 = dgl.nn.GATConv(64, c, 1, feat_drop=feat_drop, attn_drop=attn_drop)

    def forward(self, g, x):
        return self.l2(g, self.l1(g, x).flatten(1)).mean(1)


class GCN(nn.Module):
    def __init__(self, i, c, hidden=16, dropout=0.5):
        super().__init__()
        self.l1, self.l2 = dgl.nn.GraphConv(i, hidden, activation=F.relu), dgl.nn.GraphConv(hidden, c)
        self.drop = nn.Dropout(dropout)

    def forward(self, g, x):
        return self.l2(g, self.drop(self.l1(g, self.drop(x))))


class SAGE(nn.Module):
    def __init__(self, i, c, hidden=16, dropout=0.5):
        super().__init__()
        self.l1, self.l2 = dgl.nn.SAGEConv(i, hidden, "mean"), dgl.nn.SAGEConv(hidden, c, "mean")
        self.drop = nn.Dropout(dropout)

    def forward(self, g, x):
        return self.l2(g, self.drop(torch.relu(self.l1(g, self.drop(x)))))


RECIPES = {"gat": (GAT, 0.005), "gcn": (GCN, 0.01), "sage": (SAGE, 0.01)}


def build(model: str, in_dim: int, classes: int, args) -> nn.Module:
    cls = RECIPES[model][0]
    if model == "gat":
        return cls(in_dim, classes, feat_drop=args.feat_drop, attn_drop=args.attn_drop)
    return cls(in_dim, classes)


def train(net, g, x, y, masks, lr: float, epochs: int, seed: int) -> dict:
    """Train from ``seed``; the test accuracy at the first epoch of best validation accuracy."""
    train_idx, val_idx, test_idx = masks
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=5e-4)
    torch.manual_seed(seed)
    best = (-1.0, 0.0, 0)
    start = time.perf_counter()
    for epoch in range(epochs):
        net.train()
        loss = F.cross_entropy(net(g, x)[train_idx], y[train_idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        net.eval()
        with torch.no_grad():
            pred = net(g, x).argmax(1)
        val = (pred[val_idx] == y[val_idx]).float().mean().item()
        if val > best[0]:
            best = (val, (pred[test_idx] == y[test_idx]).float().mean().item(), epoch)
    return {"val_acc": best[0], "test_acc": best[1], "best_epoch": best[2],
            "seconds_per_epoch": (time.perf_counter() - start) / epochs}


def run_pair(name: str, model: str, seed: int, loaded, args) -> dict:
    """Both providers on one (dataset, model, seed): {provider: row}."""
    g, x, y = loaded
    masks = split(y.numpy(), seed)
    torch.manual_seed(seed)
    theirs = build(model, x.shape[1], int(y.max()) + 1, args)
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    out = {}
    for provider, net in zip(PROVIDERS, (theirs, ours)):
        out[provider] = dict(dataset=name, model=model, seed=seed, provider=provider, epochs=args.epochs,
                             attn_drop=args.attn_drop if model == "gat" else None,
                             feat_drop=args.feat_drop if model == "gat" else None,
                             **train(net, g, x, y, masks, RECIPES[model][1], args.epochs, seed))
    return out


def sd(values) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="cora,citeseer,amazon_cs,coauthor_cs")
    p.add_argument("--models", default="gat,gcn,sage")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1 (split and initialisation)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--attn-drop", type=float, default=0.6)
    p.add_argument("--feat-drop", type=float, default=0.6)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--results", default=None, help="append one JSON row per run to this file")
    args = p.parse_args(argv)
    for m in args.models.split(","):
        if m not in RECIPES:
            raise SystemExit(f"expected models among {sorted(RECIPES)} (got {m!r}). Fix: --models gat,gcn,sage")
    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    diffs = {}
    started = datetime.datetime.now().isoformat(timespec="seconds")
    for name in args.datasets.split(","):
        loaded = load(name)
        print(f"== {name}: {loaded[0].num_nodes()} nodes, {loaded[0].num_edges()} edges with self-loops, "
              f"{loaded[1].shape[1]} features", flush=True)
        for model in args.models.split(","):
            for seed in seeds:
                rows = run_pair(name, model, seed, loaded, args)
                d = 100 * (rows["dgl_accel"]["test_acc"] - rows["dgl"]["test_acc"])
                accs = (rows["dgl"]["test_acc"], rows["dgl_accel"]["test_acc"])
                diffs.setdefault((name, model), []).append((seed, *accs))
                print(f"  {model} seed {seed}: DGL {100 * rows['dgl']['test_acc']:.2f} "
                      f"(epoch {rows['dgl']['best_epoch']}, {1e3 * rows['dgl']['seconds_per_epoch']:.0f} ms/epoch), "
                      f"ours {100 * rows['dgl_accel']['test_acc']:.2f} (epoch {rows['dgl_accel']['best_epoch']}, "
                      f"{1e3 * rows['dgl_accel']['seconds_per_epoch']:.0f} ms/epoch), difference {d:+.2f}", flush=True)
                if args.results:
                    with open(args.results, "a") as f:
                        for r in rows.values():
                            f.write(json.dumps({**r, "started": started, "torch": torch.__version__,
                                                "dgl": dgl.__version__, "threads": torch.get_num_threads()}) + "\n")
    print("\ndataset      model  seeds  DGL             dgl-accel       paired difference (points)")
    summary = {}
    for (name, model), runs in diffs.items():
        ours = [100 * o for _, _, o in runs]
        theirs = [100 * t for _, t, _ in runs]
        d = [a - b for a, b in zip(ours, theirs)]
        summary[(name, model)] = statistics.mean(d)
        print(f"{name:12s} {model:5s}  {len(runs):5d}  {statistics.mean(theirs):5.2f} +- {sd(theirs):4.2f}  "
              f"{statistics.mean(ours):5.2f} +- {sd(ours):4.2f}  {statistics.mean(d):+.2f} "
              f"({', '.join(f'{v:+.1f}' for v in d)})")
    worst = min(summary.values()) if summary else float("nan")
    print(f"summary: {len(summary)} dataset x model pairs, worst mean paired difference {worst:+.2f} points "
          f"({'within' if worst >= -0.5 else 'outside'} the 0.5 bar)")
    return summary


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
