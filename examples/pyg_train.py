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
goes to ``--results`` when given.

Usage: python examples/pyg_train.py [--graph rmat:16] [--models gcn,gat,sage] [--epochs 20]
                                    [--device cpu] [--tiny] [--results rows.jsonl]
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import dgl_accel.pyg  # noqa: E402
from dgl_accel.gpu_report.rmat import rmat_graph  # noqa: E402  (DGL-free graph generator)

MODELS = ("gcn", "gat", "sage")


def graph(spec: str, device, feats: int = 128, classes: int = 16, seed: int = 0):
    """A PyG ``Data`` with features, labels and a 10% training mask, on ``device``."""
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(seed)
    if spec == "tiny":
        n = 300
        src, dst = torch.randint(0, n, (2, 3000), generator=gen)
    elif spec.startswith("rmat:"):
        src, dst, n = rmat_graph(int(spec.split(":")[1]), seed=seed)
    else:
        raise ValueError(f"expected --graph tiny or rmat:SCALE (got {spec!r}). Fix: --graph rmat:16")
    data = Data(x=torch.randn(n, feats, generator=gen), edge_index=torch.stack([src, dst]),
                y=torch.randint(0, classes, (n,), generator=gen), train_mask=torch.rand(n, generator=gen) < 0.1)
    return data.to(device), classes


def build(name: str, feats: int, classes: int) -> torch.nn.Module:
    """The model as a PyG user writes it (PyG's classes)."""
    from torch_geometric import nn as pyg_nn

    class Net(torch.nn.Module):
        def __init__(self, convs, act):
            super().__init__()
            self.convs, self.act = torch.nn.ModuleList(convs), act

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                x = self.act(x) if i + 1 < len(self.convs) else x
            return x

    if name == "gcn":
        return Net([pyg_nn.GCNConv(feats, 256), pyg_nn.GCNConv(256, classes)], F.relu)
    if name == "gat":
        return Net([pyg_nn.GATConv(feats, 8, heads=8), pyg_nn.GATConv(64, classes, heads=1)], F.elu)
    return Net([pyg_nn.SAGEConv(feats, 256), pyg_nn.SAGEConv(256, 256), pyg_nn.SAGEConv(256, classes)], F.relu)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def full_epoch(model, opt, data, device) -> tuple[float, dict]:
    sync(device)
    start = time.perf_counter()
    opt.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    opt.step()
    sync(device)
    return float(loss), {"step": time.perf_counter() - start}


def sage_epoch(model, opt, data, device, batches: int, sampler) -> tuple[float, dict]:
    from torch_geometric.loader import NodeLoader

    seeds = data.train_mask.nonzero().flatten()
    loader = NodeLoader(data, node_sampler=sampler, input_nodes=seeds, batch_size=1024)
    parts, losses = dict.fromkeys(("sample", "gather", "forward", "backward"), 0.0), []
    it = iter(loader)
    for _ in range(batches):
        t0 = time.perf_counter()
        batch = next(it, None)
        if batch is None:
            break
        sync(device)
        t1 = time.perf_counter()
        x, ei, y = batch.x.to(device), batch.edge_index.to(device), batch.y[: batch.batch_size].to(device)
        sync(device)
        t2 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[: batch.batch_size], y)
        sync(device)
        t3 = time.perf_counter()
        loss.backward()
        opt.step()
        sync(device)
        t4 = time.perf_counter()
        for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            parts[key] += dt
        losses.append(float(loss))
    return statistics.fmean(losses), {**parts, "step": sum(parts.values())}


def train(name: str, data, classes: int, args, device) -> list[dict]:
    """Both providers, epoch by epoch in turn, from one set of initial weights."""
    torch.manual_seed(args.seed)
    theirs = build(name, data.num_features, classes).to(device)
    ours = copy.deepcopy(theirs)
    report = dgl_accel.pyg.swap(ours)
    models = {"pyg": theirs, "dgl_accel": ours}
    opts = {k: torch.optim.Adam(m.parameters(), lr=0.01) for k, m in models.items()}
    # one sampler per provider, one seed: both see the same batches (the graph is read once each)
    samplers = {k: dgl_accel.pyg.NeighborSampler(data, [15, 10, 5], seed=args.seed) for k in models
                } if name == "sage" else {}
    times = {k: [] for k in models}
    losses = {k: [] for k in models}
    for epoch in range(args.epochs):
        for key, model in models.items():
            torch.manual_seed(args.seed + epoch)  # the same dropout / sampling stream for both
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            if name == "sage":
                loss, parts = sage_epoch(model, opts[key], data, device, args.batches, samplers[key])
            else:
                loss, parts = full_epoch(model, opts[key], data, device)
            times[key].append(parts)
            losses[key].append(loss)
        print(f"  {name} epoch {epoch}: loss PyG {losses['pyg'][-1]:.4f}, ours {losses['dgl_accel'][-1]:.4f}; "
              f"step PyG {times['pyg'][-1]['step'] * 1e3:.1f} ms, ours {times['dgl_accel'][-1]['step'] * 1e3:.1f} ms",
              file=sys.stderr)
    rows = []
    for key in models:
        later = times[key][1:] or times[key]  # the first epoch builds caches and compiles
        row = {"model": name, "provider": key, "graph": args.graph, "device": str(device), "epochs": args.epochs,
               "swapped": len(report.swapped) if key == "dgl_accel" else 0, "final_loss": losses[key][-1],
               "losses": losses[key], "step_times": [t["step"] for t in later],
               **{f"{p}_s": statistics.median(t[p] for t in later) for p in later[0]}}
        if device.type == "cuda":
            row["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
        rows.append(row)
    gap = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(losses["pyg"], losses["dgl_accel"]))
    rows[1].update(speedup=rows[0]["step_s"] / rows[1]["step_s"], max_relative_loss_gap=gap)
    return rows


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
    data, classes = graph(args.graph, device, seed=args.seed)
    print(f"== {args.graph}: {data.num_nodes} nodes, {data.num_edges} edges, {data.num_features} features, "
          f"on {device}", file=sys.stderr)
    rows, ok = [], True
    for name in names:
        pair = train(name, data, classes, args, device)
        rows += pair
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
