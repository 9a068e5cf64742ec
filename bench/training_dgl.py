"""DGL's front door for :mod:`bench.bench_training`: DGL's modules (and, for minibatches, DGL's
``NeighborSampler`` and ``DataLoader``) against the same model after ``dgl_accel.swap`` with our
sampler, each a :class:`~bench.harness.TrainingStep` from the same weights.  Where DGL's model
raises under autocast (``GATConv``: bf16 features, fp32 scores), DGL's step runs in fp32, the best
its user has (the row's ``peer_precision`` says so)."""
from __future__ import annotations

import copy
import time

import dgl
import dgl.nn
import torch
import torch.nn.functional as F

from bench.training_cases import BATCH, CLASSES, FANOUTS, FEATS, HIDDEN, MODELS, make_step, precision_context


class Net(torch.nn.Module):
    """Convs on a graph or on blocks, ReLU between; the GAT recipe flattens the heads of its first
    layer and averages the one head of its last."""

    def __init__(self, convs, gat: bool = False):
        super().__init__()
        self.convs, self.gat = torch.nn.ModuleList(convs), gat

    def forward(self, graphs, x):
        for i, conv in enumerate(self.convs):
            g = graphs[i] if isinstance(graphs, list) else graphs
            x = conv(g, x)
            if self.gat:
                x = x.flatten(1) if i + 1 < len(self.convs) else x.mean(1)
            elif i + 1 < len(self.convs):
                x = F.relu(x)
        return x


def build(key: str, dropout: float = 0.6) -> Net:
    """The model ``key``; ``dropout``: the GAT recipe's (0 for :func:`bench.bench_training.check_losses`)."""
    nn = dgl.nn
    if key == "gcn":
        return Net([nn.GraphConv(FEATS, HIDDEN), nn.GraphConv(HIDDEN, CLASSES)])
    if key == "sage":
        return Net([nn.SAGEConv(FEATS, HIDDEN, "mean"), nn.SAGEConv(HIDDEN, CLASSES, "mean")])
    if key == "gin":
        return Net([nn.GINConv(torch.nn.Linear(FEATS, HIDDEN), "sum"),
                    nn.GINConv(torch.nn.Linear(HIDDEN, CLASSES), "sum")])
    if key == "gat":
        return Net([nn.GATConv(FEATS, 8, 8, feat_drop=dropout, attn_drop=dropout, activation=F.elu),
                    nn.GATConv(64, CLASSES, 1, feat_drop=dropout, attn_drop=dropout)], gat=True)
    if key == "sage_mb":
        return Net([nn.SAGEConv(FEATS, HIDDEN, "mean"), nn.SAGEConv(HIDDEN, HIDDEN, "mean"),
                    nn.SAGEConv(HIDDEN, CLASSES, "mean")])
    raise ValueError(f"expected a model among gcn, sage, gin, gat, sage_mb (got {key!r})")


class Batches:
    """DGL's ``DataLoader`` over shuffled training seeds with ``sampler`` (DGL's or ours): ``next``
    returns (blocks, input features, labels), the loader's seconds (sampling) in ``parts['sample']``
    and the feature and label gather in ``parts['gather']``."""

    def __init__(self, g, x, y, train, sampler, shuffle: bool = True):
        self.x, self.y = x, y
        self.loader = dgl.dataloading.DataLoader(g, train, sampler, batch_size=BATCH, shuffle=shuffle, drop_last=False)
        self.it = None

    def next(self, parts):
        t0 = time.perf_counter()
        item = next(self.it, None) if self.it is not None else None
        if item is None:
            self.it = iter(self.loader)
            item = next(self.it)
        input_nodes, output_nodes, blocks = item
        t1 = time.perf_counter()
        x, y = self.x[input_nodes], self.y[output_nodes]
        parts.seconds["sample"] += t1 - t0
        parts.seconds["gather"] += time.perf_counter() - t1
        return blocks, x, y


def providers(graph, key: str, dtype: str, mode: str, deterministic: bool = False) -> dict:
    """{provider: TrainingStep} for DGL and for dgl-accel (``swap`` and our sampler), from one set of
    weights; ``deterministic``: no dropout, and both draw the same unshuffled batches from our
    seeded sampler (for the loss check)."""
    import dgl_accel
    from dgl_accel.sampling import NeighborSampler
    torch.manual_seed(0)
    base = build(key, dropout=0.0 if deterministic else 0.6)
    ours = copy.deepcopy(base)
    if not dgl_accel.swap(ours).swapped:
        raise RuntimeError(f"dgl_accel.swap left the {key} model alone")
    g = dgl.graph((graph.src, graph.dst), num_nodes=graph.num_nodes)
    samplers = {"dgl": NeighborSampler(FANOUTS, seed=0) if deterministic else dgl.dataloading.NeighborSampler(FANOUTS),
                "dgl_accel": NeighborSampler(FANOUTS, seed=0)}
    precision = {"dgl": dtype, "dgl_accel": dtype}
    if dtype != "fp32" and key != "sage_mb" and not _runs_under(base, g, graph.x, dtype):
        precision["dgl"] = "fp32"  # DGL raises under autocast (GATConv): its user trains in fp32
    steps = {}
    for name, model in (("dgl", base), ("dgl_accel", ours)):
        if key == "sage_mb" and mode == "train":
            batches = Batches(g, graph.x, graph.y, graph.train, samplers[name], shuffle=not deterministic)

            def call(parts, model=model, batches=batches):
                blocks, x, y = batches.next(parts)
                return model(blocks, x), y
        else:
            def call(parts, model=model):
                return model(g, graph.x)[graph.train], graph.y[graph.train]
        steps[name] = make_step(model, call, precision[name], mode)
        steps[name].precision = precision[name]
    return steps


def _runs_under(model, g, x, dtype: str) -> bool:
    """Whether DGL's model runs its forward in ``dtype`` (DGL's GATConv raises under autocast)."""
    from dgl.base import DGLError
    try:
        with torch.no_grad(), precision_context(dtype):
            model(g, x)
        return True
    except DGLError:
        return False


__all__ = ["providers", "build", "Batches", "MODELS"]
