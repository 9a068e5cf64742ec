"""PyG's front door for :mod:`bench.bench_training`: PyG eager, PyG under ``torch.compile`` and
``dgl_accel.pyg.swap``, each a :class:`~bench.harness.TrainingStep` from the same weights."""
from __future__ import annotations

import copy
import time

import torch
import torch.nn.functional as F

from bench.training_cases import BATCH, CLASSES, FANOUTS, FEATS, HIDDEN, make_step
from bench.training_cases import MODELS as SHARED_MODELS


class Net(torch.nn.Module):
    """Convs with ReLU between (the GAT recipe: dropout 0.6 on the inputs of both layers, ELU);
    ``extra``: the convs' third argument (``edge_attr`` or ``edge_type``) taken from the call."""

    def __init__(self, convs, gat: bool = False, dropout: float = 0.6, extra: str | None = None):
        super().__init__()
        self.convs, self.gat, self.dropout, self.extra = torch.nn.ModuleList(convs), gat, dropout, extra

    def forward(self, x, edge_index, edge_attr=None, edge_type=None):
        more = {"edge_attr": (edge_attr,), "edge_type": (edge_type,)}.get(self.extra, ())
        for i, conv in enumerate(self.convs):
            if self.gat:
                x = F.dropout(x, self.dropout, self.training)
            x = conv(x, edge_index, *more)
            if i + 1 < len(self.convs):
                x = F.elu(x) if self.gat else F.relu(x)
        return x


class Propagated(torch.nn.Module):
    """An MLP then propagations: APPNP's model (``Linear``, ReLU, ``Linear``, ``APPNP``) or LightGCN's
    layer mean over ``LGConv`` hops of a projection (``mean=True``), then a last ``Linear``."""

    def __init__(self, first, propagations, last, mean: bool = False):
        super().__init__()
        self.first, self.props, self.last, self.mean = first, torch.nn.ModuleList(propagations), last, mean

    def forward(self, x, edge_index, edge_attr=None, edge_type=None):
        h = self.first(x)
        hops = [h]
        for prop in self.props:
            hops.append(prop(hops[-1], edge_index))
        return self.last(torch.stack(hops).mean(0) if self.mean else hops[-1])


ZOO_HIDDEN, EDGE_DIM, RELATIONS = 64, 16, 4


def build(key: str, dropout: float = 0.6) -> torch.nn.Module:
    """The model ``key``; ``dropout``: the GAT recipe's (0 for :func:`bench.bench_training.check_losses`)."""
    from torch_geometric import nn as pyg_nn
    h = ZOO_HIDDEN
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
    if key == "graphconv":
        return Net([pyg_nn.GraphConv(FEATS, HIDDEN), pyg_nn.GraphConv(HIDDEN, CLASSES)])
    if key == "gine":
        return Net([pyg_nn.GINEConv(torch.nn.Linear(FEATS, HIDDEN), edge_dim=EDGE_DIM),
                    pyg_nn.GINEConv(torch.nn.Linear(HIDDEN, CLASSES), edge_dim=EDGE_DIM)], extra="edge_attr")
    if key == "edgeconv":  # DGCNN's: an MLP on [x_i, x_j - x_i], max
        mlp = torch.nn.Sequential(torch.nn.Linear(2 * FEATS, h), torch.nn.ReLU(), torch.nn.Linear(h, h))
        return Net([pyg_nn.EdgeConv(mlp, aggr="max"), pyg_nn.EdgeConv(torch.nn.Linear(2 * h, CLASSES), aggr="max")])
    if key == "sgconv":  # SGC: one layer, K = 2
        return Net([pyg_nn.SGConv(FEATS, CLASSES, K=2)])
    if key == "appnp":
        mlp = torch.nn.Sequential(torch.nn.Linear(FEATS, h), torch.nn.ReLU())
        return Propagated(mlp, [pyg_nn.APPNP(K=10, alpha=0.1)], torch.nn.Linear(h, CLASSES))
    if key == "lgconv":
        return Propagated(torch.nn.Linear(FEATS, h), [pyg_nn.LGConv(), pyg_nn.LGConv()], torch.nn.Linear(h, CLASSES),
                          mean=True)
    if key == "transformer":  # UniMP's layer: 8 heads of 8, then one head
        return Net([pyg_nn.TransformerConv(FEATS, 8, heads=8), pyg_nn.TransformerConv(64, CLASSES, heads=1)])
    if key == "rgcn":
        return Net([pyg_nn.RGCNConv(FEATS, h, RELATIONS), pyg_nn.RGCNConv(h, CLASSES, RELATIONS)], extra="edge_type")
    raise ValueError(f"expected a model among {', '.join(MODELS)} (got {key!r})")


# the PyG front door's models: the shared ones and the convs dgl_accel.pyg adds (ZOO: on ZOO_GRAPHS only)
ZOO = ("graphconv", "gine", "edgeconv", "sgconv", "appnp", "lgconv", "transformer", "rgcn")
ZOO_GRAPHS = ("amazon_cs",)
MODELS = (*SHARED_MODELS, *ZOO)


def extras(graph, key: str) -> tuple:
    """The edge inputs a model takes besides ``edge_index``, drawn once from a fixed seed:
    ``edge_attr`` [E, EDGE_DIM] (GINE) or ``edge_type`` [E] in [0, RELATIONS) (RGCN)."""
    gen = torch.Generator().manual_seed(1)
    if key == "gine":
        return torch.randn(graph.num_edges, EDGE_DIM, generator=gen), None
    if key == "rgcn":
        return None, torch.randint(0, RELATIONS, (graph.num_edges,), generator=gen)
    return None, None


class Batches:
    """Minibatches over training seeds shuffled from ``seed`` (every provider the same batches, step
    by step), drawn by our ``NeighborSampler``: through ``dgl_accel.pyg.NeighborLoader`` (PyG's
    signature, what a user of ours writes: ``ours``) or PyG's ``NodeLoader`` fed by it (the peers:
    PyG's own ``NeighborLoader`` needs pyg-lib or torch-sparse, which this torch has no wheel of).
    ``next`` returns a batch, the sampler's seconds in ``parts['sample']`` and the loader's rest
    (feature and label gather, collation) in ``parts['gather']``."""

    def __init__(self, data, train: torch.Tensor, seed: int, shuffle: bool = True, ours: bool = False):
        from torch_geometric.loader import NodeLoader

        import dgl_accel.pyg
        # one seeded shuffle per provider: interleaved providers draw the same batch at each step
        order = {"input_nodes": train, "batch_size": BATCH, "shuffle": shuffle,
                 "generator": torch.Generator().manual_seed(seed)}
        if ours:
            self.loader = dgl_accel.pyg.NeighborLoader(data, FANOUTS, seed=seed, **order)
            self.sampler = self.loader.node_sampler
        else:
            self.sampler = dgl_accel.pyg.NeighborSampler(data, FANOUTS, seed=seed)
            self.loader = NodeLoader(data, node_sampler=self.sampler, **order)
        self.sampled, inner = 0.0, self.sampler.sample_from_nodes

        def sample_from_nodes(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner(*args, **kwargs)
            self.sampled += time.perf_counter() - t0
            return out
        self.sampler.sample_from_nodes = sample_from_nodes
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
    steps, more = {}, extras(graph, key)
    for name, model in models.items():
        run = torch.compile(model, dynamic=key == "sage_mb") if name == "pyg_compiled" else model
        if key == "sage_mb" and mode == "train":
            batches = Batches(data, graph.train, seed=0, shuffle=not deterministic, ours=name == "dgl_accel")

            def call(parts, run=run, batches=batches):
                b = batches.next(parts)
                return run(b.x, b.edge_index)[: b.batch_size], b.y[: b.batch_size]
        else:
            def call(parts, run=run):
                return run(graph.x, edge_index, *more)[graph.train], graph.y[graph.train]
        steps[name] = make_step(model, call, dtype, mode)
    return steps


__all__ = ["providers", "build", "Batches", "MODELS", "ZOO", "ZOO_GRAPHS"]
