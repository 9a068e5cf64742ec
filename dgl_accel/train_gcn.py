"""Main job: train a 2-layer GCN with dgl-accel's backend and report what ran.

    python -m dgl_accel.train_gcn [--dataset synthetic|cora|<npz name>] [--epochs 200] ...

Defaults follow Kipf & Welling (hidden 16, dropout 0.5, lr 0.01, weight decay 5e-4) on the
embedded synthetic graph, so it works on a machine without any dataset.
"""
from __future__ import annotations

from .core.extras import missing_extra

try:
    import dgl  # first, so that without DGL the error names the extra that brings it
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import argparse
import sys
import time

import torch
import torch.nn.functional as F

import dgl_accel
from dgl_accel import data
from dgl_accel.nn import GraphConv


class GCN(torch.nn.Module):
    def __init__(self, in_feats: int, hidden: int, num_classes: int, dropout: float, conv=GraphConv):
        super().__init__()
        self.conv1 = conv(in_feats, hidden, activation=F.relu)
        self.conv2 = conv(hidden, num_classes)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, g, x):
        return self.conv2(g, self.dropout(self.conv1(g, self.dropout(x))))


def accuracy(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> float:
    if not bool(mask.any()):
        return float("nan")
    return (logits[mask].argmax(1) == labels[mask]).float().mean().item()


def check_labelled(g) -> None:
    for key in ("feat", "label", "train_mask", "val_mask", "test_mask"):
        if key not in g.ndata:
            raise ValueError(f"expected the graph to carry ndata['{key}'] (got keys {sorted(g.ndata)}). "
                             f"Fix: pick a labelled dataset, e.g. --dataset synthetic or cora.")


def train(g, epochs: int, hidden: int, dropout: float, lr: float, weight_decay: float,
          seed: int, log_every: int = 10, log=print, conv=GraphConv) -> dict:
    """Train and evaluate; ``conv`` is the layer class (dgl-accel's GraphConv by default, or
    ``dgl.nn.GraphConv`` for the native baseline / for use under ``dgl_accel.enabled()``)."""
    check_labelled(g)
    torch.manual_seed(seed)
    g = dgl.add_self_loop(dgl.remove_self_loop(g))  # a new graph: the caller's stays as it was
    feat, labels = g.ndata["feat"].float(), g.ndata["label"]
    model = GCN(feat.shape[1], hidden, int(labels.max()) + 1, dropout, conv)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    dgl_accel.reset_stats()
    best_val, test_at_best, start = -1.0, 0.0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        logits = model(g, feat)
        loss = F.cross_entropy(logits[g.ndata["train_mask"]], labels[g.ndata["train_mask"]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(g, feat)
        val, test = accuracy(logits, labels, g.ndata["val_mask"]), accuracy(logits, labels, g.ndata["test_mask"])
        if val > best_val:
            best_val, test_at_best = val, test
        if log and (epoch % log_every == 0 or epoch == 1 or epoch == epochs):
            log(f"epoch {epoch:4d}  loss {loss.item():.4f}  val {val:.4f}  test {test:.4f}  "
                f"{time.perf_counter() - start:6.2f}s")
    return {"seconds": time.perf_counter() - start, "final_test": test, "best_val": best_val,
            "test_at_best_val": test_at_best, "paths": dgl_accel.stats()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="synthetic", help="synthetic (default), cora, citeseer, or an npz name")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=dgl_accel.BACKENDS, default=None,
                   help="force a path (default: $DGL_ACCEL_BACKEND or auto)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args(argv)
    if args.backend:
        dgl_accel.set_backend(args.backend)
    try:
        g = data.load(args.dataset).to(args.device)
        check_labelled(g)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"dataset {args.dataset}: {g.num_nodes()} nodes, {g.num_edges()} edges, "
          f"{g.ndata['feat'].shape[1]} features; backend {dgl_accel.get_backend()} on {args.device}")
    r = train(g, args.epochs, args.hidden, args.dropout, args.lr, args.weight_decay, args.seed)
    paths = ", ".join(f"{op}: " + ", ".join(f"{k} x{v}" for k, v in d.items()) for op, d in r["paths"].items())
    print(f"summary: test accuracy {r['final_test']:.4f} (at best val {r['test_at_best_val']:.4f}), "
          f"{args.epochs} epochs in {r['seconds']:.2f}s, backend {dgl_accel.get_backend()}, paths ran: {paths}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
