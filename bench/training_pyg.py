"""PyG's front door for :mod:`bench.bench_training`: PyG eager, PyG under ``torch.compile`` and
``dgl_accel.pyg.swap``, each a :class:`~bench.harness.TrainingStep` from the same weights."""
from __future__ import annotations

import copy
import time

import torch
import torch.nn.functional as F

from bench.training_cases import BATCH, CLASSES, FANOUTS, FEATS, HIDDEN, make_step


class Net(torch.nn.Module):
    """Convs with ReLU between (the GAT recipe: dropout 0.6 on the inputs of both layers, ELU)."""

    def __init__(self, convs, gat: bool = False, dropout: float = 0.6):
        super().__init__()
        self.convs, self.gat, self.dropout = torch.nn.ModuleList(convs), gat, dropout

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            if self.gat:
                x = F.dropout(x, self.dropout, self.training)
            x = conv(x, edge_index)
            if i + 1 < len(self.convs):
                x = F.elu(x) if self.gat else F.relu(x)
        return x


def build(key: str, dropout: float = 0.6) -> Net:
    """The model ``key``; ``dropout``: the GAT recipe's (0 for :func:`bench.bench_training.check_losses`)."""
    from torch_geometric import nn as pyg_nn
    if key == "gcn":
        return Net([pyg_nn.GCNConv(FEATS, HIDDEN), pyg_nn.GCNConv(HIDDEN, CLASSES)])
    if key == "sage":
        return Net([pyg_nn.SAGEConv(FEATS, HIDDEN), pyg_nn.SAGEConv(HIDDEN, CLASSES)])
    if key == "gin":
        return Net([pyg_nn.GINConv(torch.nn.Linear(FEATS, HIDDEN)), pyg_nn.GINConv(torch.nn.Linear(HIDDEN, CLASSES))])
    if key == "gat":
        return Net([pyg_nn.GATConv(FEATS, 8, heads=8, dropout=dropout),
                    pyg_nn.GATConv(64, CLASSES, heads=1, dropout=dropout)], gat=True, dropout=dropout)
    if key == "sage_mb":
        return Net([pyg_nn.SAGEConv(FEATS, HIDDEN), pyg_nn.SAGEConv(HIDDEN, HIDDEN), pyg_nn.SAGEConv(HIDDEN, CLASSES)])
    raise ValueError(f"expected a model among gcn, sage, gin, gat, sage_mb (got {key!r})")


class Batches:
    """PyG's ``NodeLoader`` over training seeds shuffled from ``seed`` (every provider the same
    batches, step by step), fed by our ``NeighborSampler``: ``next`` returns a batch, the sampler's
    seconds in ``parts['sample']`` and the loader's rest (feature and label gather, collation) in
    ``parts['gather']``."""

    def __init__(self, data, train: torch.Tensor, seed: int, shuffle: bool = True):
        from torch_geometric.loader import NodeLoader

        import dgl_accel.pyg
        self.sampler = dgl_accel.pyg.NeighborSampler(data, FANOUTS, seed=seed)
        self.sampled, inner = 0.0, self.sampler.sample_from_nodes

        def sample_from_nodes(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner(*args, **kwargs)
            self.sampled += time.perf_counter() - t0
            return out
        self.sampler.sample_from_nodes = sample_from_nodes
        # one seeded shuffle per provider: interleaved providers draw the same batch at each step
        self.loader = NodeLoader(data, node_sampler=self.sampler, input_nodes=train, batch_size=BATCH, shuffle=shuffle,
                                 generator=torch.Generator().manual_seed(seed))
        self.it = None

    def next(self, parts):
        before, t0 = self.sampled, time.perf_counter()
        batch = next(self.it, None) if self.it is not None else None
        if batch is None:
            self.it = iter(self.loader)
            batch = next(self.it)
        parts.seconds["sample"] += self.sampled - before
        parts.seconds["gather"] += time.perf_counter() - t0 - (self.sampled - before)
        return batch


def providers(graph, key: str, dtype: str, mode: str, compiled: bool = True, deterministic: bool = False) -> dict:
    """{provider: TrainingStep} for PyG eager, PyG compiled and ours, from one set of weights;
    ``deterministic``: no dropout, batches unshuffled, no compiled peer (for the loss check)."""
    from torch_geometric.data import Data

    import dgl_accel.pyg
    # a fresh dynamo per cell: every cell's Net.forward is one code object, and past
    # torch._dynamo.config.cache_size_limit (8) compiled models it silently runs eager
    torch._dynamo.reset()
    torch.manual_seed(0)
    base = build(key, dropout=0.0 if deterministic else 0.6)
    edge_index = torch.stack([graph.src, graph.dst])
    data = Data(x=graph.x, y=graph.y, edge_index=edge_index, num_nodes=graph.num_nodes)
    models = {"pyg": base, "pyg_compiled": copy.deepcopy(base), "dgl_accel": copy.deepcopy(base)}
    if not compiled or deterministic:
        del models["pyg_compiled"]
    if not dgl_accel.pyg.swap(models["dgl_accel"]).swapped:
        raise RuntimeError(f"dgl_accel.pyg.swap left the {key} model alone")
    steps = {}
    for name, model in models.items():
        run = torch.compile(model, dynamic=key == "sage_mb") if name == "pyg_compiled" else model
        if key == "sage_mb" and mode == "train":
            batches = Batches(data, graph.train, seed=0, shuffle=not deterministic)

            def call(parts, run=run, batches=batches):
                b = batches.next(parts)
                return run(b.x, b.edge_index)[: b.batch_size], b.y[: b.batch_size]
        else:
            def call(parts, run=run):
                return run(graph.x, edge_index)[graph.train], graph.y[graph.train]
        steps[name] = make_step(model, call, dtype, mode)
    return steps


__all__ = ["providers", "build", "Batches"]
