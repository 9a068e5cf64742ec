"""shaDow-GNN (Zeng et al., NeurIPS'21): a GNN deeper than its scope, per target, vs full-batch
GraphSAGE, on the splits of Shchur et al. (20 labelled nodes per class, 30 per class validation,
the rest test; random by split seed).

    python examples/shadow_gnn.py [--dataset graphdata_coauthor_cs] [--model shadow-sage]
        [--scope khop|ppr] [--layers 5] [--fanouts 20,20] [--topk 200] [--splits 5] [--repeats 3] [--epochs 200]

Models (``--model``):

* ``shadow-sage`` / ``shadow-gcn``: ``--layers`` (L' = 5) SAGE (mean) or GCN layers on each target's
  own subgraph (``dgl_accel.sampling.ShaDowKHopSampler(per_target=True)``: 2-hop scope, the paper's
  L-hop setting depth 2 budget 20 = fanouts [20, 20]; or ``ShaDowPPRSampler``: top-200 PPR, alpha
  0.15, eps 1e-5), read out at the target (``dgl_accel.nn.ShaDowReadout``, center+mean), batches
  from ``dgl.dataloading.DataLoader``;
* ``sage-fullbatch``: 2-layer GraphSAGE (mean) on the whole graph, the baseline.

The input layer's linear maps run on every node once per step (bag-of-words features stay sparse)
and the subgraphs gather the rows they need: the mean over neighbours and a linear map commute, so
this is exactly the layer on gathered features, for far less work (a node is in many scopes).
Adam, early stopping on validation accuracy (test accuracy of the best-validation state; ``--select
acc+loss`` breaks accuracy ties by validation loss; ``--repeats`` averages several seeds per split).  A
progress line per epoch, a line per split, and a closing ``summary:`` line.
"""
from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import statistics
import time

import dgl
import dgl.function as fn
import numpy as np
import torch
import torch.nn.functional as F
from coauthor_sage import split  # examples/, next to this script: the 20 / 30 per class split
from dgl.nn import GraphConv, SAGEConv  # DGL's in both models (the recorded runs); dgl_accel.nn's are the same maths
from torch import nn

from dgl_accel import data
from dgl_accel.nn import ShaDowReadout
from dgl_accel.nn.readout import MODES
from dgl_accel.sampling import ShaDowKHopSampler, ShaDowPPRSampler, shadow_index
from dgl_accel.sampling.shadow import PPR_SCORE


def load_dataset(name: str, synthetic_nodes: int = 1000, row_norm: bool = True):
    """(graph without features, features, labels): an npz of the shared datasets (its stem, or the
    stem's tail: ``coauthor_cs``; bag-of-words features as :class:`SparseFeatures`, each row scaled
    to sum 1 with ``row_norm``, as Kipf and Welling preprocess them) or ``synthetic`` (dense)."""
    if name == "synthetic":
        g = data.load("synthetic", num_nodes=synthetic_nodes, num_classes=4, feat_dim=32, seed=0)
        return g, g.ndata.pop("feat"), g.ndata["label"]
    root = data.datasets_root()
    files = sorted((root / "npz").glob(f"*{name}.npz")) if root is not None and (root / "npz").is_dir() else []
    if len(files) != 1:
        raise SystemExit(f"expected one shared dataset matching {name!r} under $DGL_ACCEL_DATASETS/npz "
                         f"(got {[f.name for f in files]}). Fix: set DGL_ACCEL_DATASETS or pass --dataset synthetic.")
    g = data.load(str(files[0]), features="none")
    a = data.load_npz_arrays(files[0])
    if "x_indptr" in a:  # bag of words: keep it sparse (coauthor_cs densifies to 500 MB)
        n, f = (int(v) for v in a["x_shape"])
        rows = np.repeat(np.arange(n), np.diff(a["x_indptr"]))
        vals = a["x_data"].astype(np.float32) if "x_data" in a else np.ones(len(rows), np.float32)
        if row_norm:
            vals = vals / np.maximum(np.bincount(rows, weights=vals, minlength=n), 1e-12)[rows].astype(np.float32)
        coo = torch.sparse_coo_tensor(np.stack([rows, a["x_indices"]]), torch.tensor(vals, dtype=torch.float32),
                                      (n, f)).coalesce()
        x = SparseFeatures(coo.to_sparse_csr(), coo.t().coalesce().to_sparse_csr())
        r, c = coo.indices().numpy()
        x.t_order = torch.from_numpy(np.lexsort((r, c)))  # X's values in X^T's CSR order
    else:
        x = torch.from_numpy(data.dense_features(a))
    return g, x, g.ndata["label"]


class SparseFeatures(tuple):
    """(X, X^T) as CSR: ``x @ w`` with the backward's ``X^T @ grad`` a CSR product too (torch's own
    backward of a sparse @ dense product transposes X on every call: 3x slower here)."""

    def __new__(cls, x, xt):
        return super().__new__(cls, (x, xt))

    @property
    def shape(self):
        return self[0].shape

    def dropout(self, p: float):
        """Inverted dropout on the stored entries (the same mask in X and X^T)."""
        x, xt = self
        v = F.dropout(x.values(), p)
        return (torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), v, x.shape),
                torch.sparse_csr_tensor(xt.crow_indices(), xt.col_indices(), v[self.t_order], xt.shape))


class _SparseMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, xt, w):
        ctx.xt = xt
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        return None, None, ctx.xt @ grad


class Model(nn.Module):
    """``layers`` SAGE (mean) or GCN layers, the first split into :meth:`project` (its linear maps,
    on every node) and the aggregation in :meth:`forward`; a readout when ``readout`` is given
    (shaDow), else one output per node (full batch)."""

    def __init__(self, in_dim, hidden, classes, layers, kind="sage", readout=None, dropout=0.5, residual=False,
                 in_dropout=0.0, norm=False, jk="none", rezero=False, head="mlp"):
        super().__init__()
        self.head = head  # shaDow's classifier on the readout: "mlp" relu -> dropout -> linear, "linear" alone
        # ReZero (Bachlechner et al. 2020): each residual branch scaled by a learned scalar from 0,
        # so the deep model starts as its first layer and grows depth only where it pays
        self.gates = nn.Parameter(torch.zeros(layers - 1)) if rezero and residual else None
        self.kind, self.hidden, self.residual, self.in_dropout, self.jk = kind, hidden, residual, in_dropout, jk
        self.norms = nn.ModuleList([nn.LayerNorm(hidden) for _ in range(layers - 1)]) if norm else None
        self.inp = nn.Linear(in_dim, (2 if kind == "sage" else 1) * hidden)  # sage: [self | neighbour] maps
        conv = (lambda: SAGEConv(hidden, hidden, "mean")) if kind == "sage" else (
            lambda: GraphConv(hidden, hidden, norm="both", allow_zero_in_degree=True))
        self.convs = nn.ModuleList([conv() for _ in range(layers - 2)])
        self.readout = None if readout is None else ShaDowReadout(readout)
        width = hidden * (layers if jk == "cat" else 1)  # shaDow's "residue": the layers' outputs pooled
        last = hidden if readout is None else self.readout.out_dim(width)
        logits_last = readout is None or head == "none"  # the last layer gives the classes (the baseline's)
        self.last = conv() if not logits_last else (
            SAGEConv(hidden, classes, "mean") if kind == "sage" else GraphConv(hidden, classes, norm="both"))
        self.out = nn.Linear(last, classes) if not logits_last else None
        self.dropout = nn.Dropout(dropout)

    def project(self, x):
        """The first layer's linear maps on every node: ``x W^T + b`` (x dense or SparseFeatures)."""
        if isinstance(x, SparseFeatures):
            xs, xt = x.dropout(self.in_dropout) if self.training and self.in_dropout else x
            return _SparseMM.apply(xs, xt, self.inp.weight.t()) + self.inp.bias
        if self.training and self.in_dropout:
            x = F.dropout(x, self.in_dropout)
        return self.inp(x)

    def forward(self, g, p, index=None, weights=None):
        """``p``: :meth:`project`'s rows of ``g``'s nodes; ``index``: ``shadow_index`` of a batch;
        ``weights``: the readout pool's node weights (PPR scores) or None."""
        if self.kind == "gcn":
            g = dgl.add_self_loop(dgl.remove_self_loop(g))
        with g.local_scope():
            if self.kind == "sage":
                g.ndata["p"] = p[:, self.hidden:]
                g.update_all(fn.copy_u("p", "m"), fn.mean("m", "a"))
                h = p[:, : self.hidden] + g.ndata["a"]
            else:  # GCN: D^-1/2 (A + I) D^-1/2 (x W) + b, the bias already in p
                deg = g.in_degrees().clamp(min=1).to(p.dtype).pow(-0.5).unsqueeze(1)
                g.ndata["p"] = (p - self.inp.bias) * deg
                g.update_all(fn.copy_u("p", "m"), fn.sum("m", "a"))
                h = g.ndata["a"] * deg + self.inp.bias
        outs = [h]
        for i, conv in enumerate(self.convs):
            a = F.relu(h if self.norms is None else self.norms[i](h))
            c = conv(g, self.dropout(a))
            h = (h + (c if self.gates is None else self.gates[i] * c)) if self.residual else c
            outs.append(h)
        a = F.relu(h if self.norms is None else self.norms[-1](h))
        c = self.last(g, self.dropout(a))
        if self.residual and self.out is not None:
            h = h + (c if self.gates is None else self.gates[-1] * c)
        else:
            h = c
        if self.readout is None:
            return h
        outs.append(h)
        if self.jk == "max":
            h = torch.stack(outs).amax(0)
        elif self.jk == "cat":
            h = torch.cat(outs, 1)
        r = self.readout(h, *index, weights)
        if self.out is None:  # head "none": the last layer's rows are the logits (center readout)
            return r
        return self.out(r if self.head == "linear" else self.dropout(F.relu(r)))


def accuracy(logits, y) -> float:
    return float((logits.argmax(1) == y).float().mean()) if y.numel() else math.nan


class ShaDowRun:
    """Loaders and steps of the shaDow models: per-target batches through DGL's DataLoader."""

    def __init__(self, g, x, y, args, seed):
        self.g, self.x, self.y, self.args = g, x, y, args
        if args.scope == "ppr":
            ppr = ShaDowPPRSampler(topk=args.topk, alpha=args.alpha, eps=args.eps)  # deterministic, cached
            self.train_sampler = self.eval_sampler = ppr
        else:
            fanouts = [int(f) for f in args.fanouts.split(",")]
            self.train_sampler = ShaDowKHopSampler(fanouts, per_target=True, seed=seed)
            self.eval_sampler = ShaDowKHopSampler(fanouts, per_target=True, seed=seed + 10_000)

    def train_epoch(self, model, opt, train) -> float:
        model.train()
        loader = dgl.dataloading.DataLoader(self.g, train, self.train_sampler, batch_size=self.args.batch_size,
                                            shuffle=True)
        losses = []
        for input_nodes, output_nodes, sg in loader:
            p = model.project(self.x)  # every node once per step; the scopes gather their rows
            loss = F.cross_entropy(model(sg, p[input_nodes], shadow_index(sg), self.weights(sg)), self.y[output_nodes])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        return statistics.mean(losses)

    @torch.no_grad()
    def logits(self, model, nodes):
        model.eval()
        p = model.project(self.x)
        loader = dgl.dataloading.DataLoader(self.g, nodes, self.eval_sampler, batch_size=self.args.eval_batch_size)
        return torch.cat([model(sg, p[inp], shadow_index(sg), self.weights(sg)) for inp, _, sg in loader])

    def weights(self, sg):
        return sg.ndata[PPR_SCORE] if self.args.pool_weights == "ppr" else None


class FullBatchRun:
    """The baseline: every step on the whole graph."""

    def __init__(self, g, x, y, args, seed):
        self.g, self.x, self.y = dgl.remove_self_loop(g), x, y

    def train_epoch(self, model, opt, train) -> float:
        model.train()
        loss = F.cross_entropy(model(self.g, model.project(self.x))[train], self.y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss)

    @torch.no_grad()
    def logits(self, model, nodes):
        model.eval()
        return model(self.g, model.project(self.x))[nodes]


def run_split(g, x, y, args, split_seed: int, repeat: int = 0) -> dict:
    """Train on one split; validation and test accuracy of the best-validation state.

    ``repeat`` r draws another initialisation and shuffle order (seed split + 1000 r; r = 0 is the
    split's own seed) on the same split, so a mean over repeats averages out one draw's luck.
    """
    t0 = time.perf_counter()
    train, val, test = split(y.numpy(), split_seed)
    seed = split_seed + 1000 * repeat
    torch.manual_seed(seed)
    np.random.seed(seed)  # DGL's DataLoader shuffles with numpy's global RNG: unseeded, no run repeated
    classes = int(y.max()) + 1
    shadow = args.model.startswith("shadow")
    kind = "gcn" if args.model == "shadow-gcn" else "sage"
    model = Model(x.shape[1], args.hidden, classes, args.layers if shadow else 2, kind,
                  args.readout if shadow else None, args.dropout, args.residual and shadow,
                  args.in_dropout, args.norm == "layer" and shadow, args.jk if shadow else "none",
                  args.rezero and shadow, args.head)
    runner = (ShaDowRun if shadow else FullBatchRun)(g, x, y, args, seed)
    opt = (torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam)(
        model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    best, best_loss, best_state, since = (-1.0, 0), math.inf, None, 0
    for epoch in range(args.epochs):
        loss = runner.train_epoch(model, opt, train)
        val_logits = runner.logits(model, val)
        val_acc, val_loss = accuracy(val_logits, y[val]), float(F.cross_entropy(val_logits, y[val]))
        # "acc": a higher validation accuracy; "acc+loss": also an equal one at a lower validation loss
        # (validation accuracy moves in steps of 1 / |val|, so ties are common on small splits)
        if val_acc > best[0] or (args.select == "acc+loss" and val_acc == best[0] and val_loss < best_loss):
            best, best_loss, best_state, since = (val_acc, epoch), val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            since += 1
        if epoch % args.log_every == 0 or since == 0:
            print(f"  [split {split_seed}.{repeat}] epoch {epoch:3d} loss {loss:.4f} val {val_acc:.4f} "
                  f"best {best[0]:.4f}@{best[1]} ({time.perf_counter() - t0:.1f} s)", flush=True)
        if since >= args.patience:
            break
    model.load_state_dict(best_state)
    test_acc = accuracy(runner.logits(model, test), y[test])
    seconds = time.perf_counter() - t0
    print(f"split {split_seed}.{repeat}: val {best[0]:.4f} test {test_acc:.4f} best epoch {best[1]} of {epoch + 1} "
          f"({seconds:.1f} s)", flush=True)
    return {"split": split_seed, "repeat": repeat, "val": best[0], "test": test_acc, "best_epoch": best[1],
            "epochs": epoch + 1, "seconds": seconds}


def _mean_std(values) -> str:
    values = list(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values) * 100:.2f} +- {sd * 100:.2f}"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="graphdata_coauthor_cs", help="shared npz stem (or tail), or 'synthetic'")
    ap.add_argument("--model", choices=("shadow-sage", "shadow-gcn", "sage-fullbatch"), default="shadow-sage")
    ap.add_argument("--scope", choices=("khop", "ppr"), default="khop")
    ap.add_argument("--layers", type=int, default=5, help="L' of the shaDow models (the baseline has 2)")
    ap.add_argument("--fanouts", default="20,20", help="k-hop scope: depth 2, budget 20")
    ap.add_argument("--topk", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.15)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--readout", choices=MODES, default="center+mean")
    ap.add_argument("--rezero", action="store_true",
                    help="shaDow models with --residual: scale each residual branch by a learned scalar "
                         "starting at 0 (ReZero)")
    ap.add_argument("--head", choices=("mlp", "linear", "none"), default="mlp",
                    help="shaDow models: the classifier on the readout, relu -> dropout -> linear (mlp) or the "
                         "linear map alone; none: the last layer maps to the classes (the baseline's last layer; "
                         "readout center, no --jk)")
    ap.add_argument("--pool-weights", choices=("none", "ppr"), default="none",
                    help="ppr (PPR scope, a mean readout): the pool weighs each node by its PPR score")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--dropout", type=float, default=None, help="hidden layers (default: shaDow 0.2, full batch 0.5)")
    ap.add_argument("--norm", choices=("none", "layer"), default="none",
                    help="shaDow models: LayerNorm before each hidden layer's activation")
    ap.add_argument("--jk", choices=("none", "max", "cat"), default="none",
                    help="shaDow models: read out the max / concatenation of every layer's output (the "
                         "reference's 'residue'), not the last layer's alone")
    ap.add_argument("--in-dropout", type=float, default=0.0, help="dropout on the input features (both models)")
    ap.add_argument("--residual", action=argparse.BooleanOptionalAction, default=True,
                    help="shaDow models: h + conv(h) from the second layer on")
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--weight-decay", type=float, default=None, help="default: shaDow 1e-3, full batch 5e-4")
    ap.add_argument("--optimizer", choices=("adam", "adamw"), default="adam",
                    help="adamw: decoupled weight decay (Adam's L2 term swamps the input layer's gradient "
                         "when row-normalised features are tiny, amazon_cs: 35%% of 767 columns set)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--eval-batch-size", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--patience", type=int, default=40, help="epochs without a better validation state (--select)")
    ap.add_argument("--select", choices=("acc", "acc+loss"), default="acc",
                    help="which validation state is better (both models): a higher accuracy, or also an equal "
                         "accuracy at a lower loss (acc+loss)")
    ap.add_argument("--splits", type=int, default=1, help="run split seeds first..first+splits-1")
    ap.add_argument("--first-split", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per split (other initialisation and shuffle seeds); a split's figure is their mean")
    ap.add_argument("--log-every", type=int, default=1)
    ap.add_argument("--feature-norm", choices=("row", "none"), default="row",
                    help="bag-of-words rows scaled to sum 1 (both models)")
    ap.add_argument("--synthetic-nodes", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--results", default=None,
                    help="append one JSON row per run to this file (bench/results/shadow_accuracy.jsonl holds "
                         "the recorded runs; bench/plot_shadow_accuracy.py draws them)")
    args = ap.parse_args(argv)
    if args.head == "none" and (args.readout != "center" or args.jk != "none"):
        ap.error("--head none needs --readout center and no --jk (the last layer's rows are the logits)")
    if args.pool_weights == "ppr" and (args.scope != "ppr" or not args.readout.endswith("mean")):
        ap.error("--pool-weights ppr needs --scope ppr and a mean readout (mean or center+mean)")
    shadow = args.model.startswith("shadow")
    args.dropout = (0.2 if shadow else 0.5) if args.dropout is None else args.dropout
    args.weight_decay = (1e-3 if shadow else 5e-4) if args.weight_decay is None else args.weight_decay
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    g, x, y = load_dataset(args.dataset, args.synthetic_nodes, args.feature_norm == "row")
    what = args.model if args.model == "sage-fullbatch" else (
        f"{args.model} L'={args.layers} scope={args.scope}"
        + (f" fanouts=[{args.fanouts}]" if args.scope == "khop" else f" topk={args.topk}") + f" readout={args.readout}")
    print(f"{args.dataset}: {g.num_nodes()} nodes, {g.num_edges()} edges, {x.shape[1]} features "
          f"({'sparse' if isinstance(x, SparseFeatures) else 'dense'}), {int(y.max()) + 1} classes; {what}", flush=True)
    splits = range(args.first_split, args.first_split + args.splits)
    runs = []
    for s in splits:
        for r in range(args.repeats):
            runs.append(run_split(g, x, y, args, s, r))
            if args.results:  # one JSON row per run, as it ends: a stopped job keeps what it finished
                append_row(args.results, runs[-1], what, args)
    per_split = [per_split_mean(runs, s) for s in splits]  # the mean over a split's repeats
    print(f"summary: dataset={args.dataset} model={what} splits={list(splits)} repeats={args.repeats} "
          f"val={_mean_std(v for v, _ in per_split)} test={_mean_std(t for _, t in per_split)} "
          f"per_split_test={[round(t * 100, 2) for _, t in per_split]} "
          + (f"per_run_test_std={statistics.stdev(r['test'] for r in runs) * 100:.2f} " if len(runs) > 1 else "")
          + f"time_per_run={statistics.mean(r['seconds'] for r in runs):.1f}s total={time.perf_counter() - t0:.1f}s",
          flush=True)
    return runs


def append_row(path: str, run: dict, what: str, args) -> None:
    """Append ``run`` with the model's description, every flag and the time, as one JSON line."""
    row = {"dataset": args.dataset, "model": what, **run, "flags": vars(args),
           "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")


def per_split_mean(runs, split_seed: int) -> tuple[float, float]:
    """(validation, test) accuracy of one split, averaged over its repeats."""
    mine = [r for r in runs if r["split"] == split_seed]
    return statistics.mean(r["val"] for r in mine), statistics.mean(r["test"] for r in mine)


if __name__ == "__main__":
    main()
