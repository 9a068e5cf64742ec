"""The models and steps of :mod:`bench.bench_training` (issue 48): what users train, through the
front door they use, each provider's step split into its parts.

Models (full graph unless named ``_mb``), as DGL's and PyG's examples write them:

==========  ========================================================  ==================================
key         DGL (``dgl.nn``)                                          PyG (``torch_geometric.nn``)
==========  ========================================================  ==================================
gcn         2 x GraphConv (hidden 256, ReLU)                          2 x GCNConv (hidden 256, ReLU)
sage        2 x SAGEConv mean (hidden 256, ReLU)                      2 x SAGEConv (hidden 256, ReLU)
gin         2 x GINConv(Linear) sum (hidden 256, ReLU)                2 x GINConv(Linear) (hidden 256, ReLU)
gat         the GAT paper's model: GATConv 8 x 8 (ELU), GATConv 1 head, dropout 0.6 on the features and
            the attention (DGL: ``feat_drop``/``attn_drop``; PyG: ``F.dropout`` and ``dropout=0.6``)
sage_mb     DGL's minibatch recipe: 3 x SAGEConv mean 256, fanouts [10, 10, 10], batch 1,024, shuffled
            seeds; DGL: DGL's ``NeighborSampler`` and DataLoader for DGL, ours + swap for dgl-accel;
            PyG: ``dgl_accel.pyg.NeighborLoader`` for dgl-accel, PyG's ``NodeLoader`` fed by our
            ``NeighborSampler`` for the peers (PyG's own sampler needs pyg-lib, which its current torch
            has no wheel of)
==========  ========================================================  ==================================

The PyG front door adds the further convs ``dgl_accel.pyg`` swaps (:data:`bench.training_pyg.ZOO`), on
Amazon-CS only (``ZOO_GRAPHS``), each as its paper or PyG's example uses it: ``graphconv`` (2 x GraphConv,
hidden 256), ``gine`` (2 x GINEConv(Linear), 16 random edge features), ``edgeconv`` (DGCNN's: EdgeConv
max over an MLP 2F -> 64 -> 64, then EdgeConv(Linear)), ``sgconv`` (SGC: one SGConv, K = 2),
``appnp`` (an MLP to 64, APPNP K = 10, alpha 0.1, Linear), ``lgconv`` (a Linear to 64, two LGConv hops,
their mean, Linear), ``transformer`` (UniMP's: TransformerConv 8 heads x 8, then 1 head) and ``rgcn``
(2 x RGCNConv, hidden 64, 4 random relations).

A step (:class:`Cell`) is one of ``train`` (forward and loss under the precision, backward,
optimiser step; minibatch: one batch, sampled and gathered in the step) or ``eval`` (the whole
graph's forward under ``torch.no_grad``, the model in eval mode).  Each provider starts from the same
weights; every timed step starts from the state the warm-up left (``harness.TrainingStep``), so the
losses after the timed steps compare.
"""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.harness import TrainingStep

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
NPZ = {"cora": "planetoid_cora", "amazon_cs": "graphdata_amazon_cs", "flickr": "graphdata_flickr",
       "slashdot": "snap_soc-Slashdot0902", "cornell5": "fb100_Cornell5"}
MODELS = ("gcn", "sage", "gin", "gat", "sage_mb")
HIDDEN, FEATS, CLASSES, FANOUTS, BATCH = 256, 128, 16, [10, 10, 10], 1024
PARTS = ("sample", "gather", "forward", "backward", "optimiser")


@dataclasses.dataclass
class Graph:
    """A shared npz graph with self-loops, random features (``FEATS``) and labels, a 10% train mask."""
    name: str
    src: torch.Tensor
    dst: torch.Tensor
    num_nodes: int
    x: torch.Tensor
    y: torch.Tensor
    train: torch.Tensor  # node ids

    @classmethod
    def load(cls, name: str) -> Graph:
        from dgl_accel.gpu_report.graphs import load_npz
        root = Path(os.environ.get("DGL_ACCEL_DATASETS", SHARED))
        g = load_npz(root / "npz" / f"{NPZ.get(name, name)}.npz", "cpu")
        keep = g.src != g.dst
        loops = torch.arange(g.num_nodes)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(g.num_nodes, FEATS, generator=gen)
        y = torch.randint(0, CLASSES, (g.num_nodes,), generator=gen)
        train = torch.randperm(g.num_nodes, generator=gen)[: max(1, g.num_nodes // 10)]
        return cls(name, torch.cat([g.src[keep], loops]), torch.cat([g.dst[keep], loops]), g.num_nodes, x, y, train)

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())


class Timed:
    """A step's parts: ``with parts("forward"): ...`` adds the block's seconds to that part."""

    def __init__(self):
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self._name = None

    def __call__(self, name: str):
        self._name = name
        return self

    def __enter__(self):
        self._t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.seconds[self._name] += time.perf_counter() - self._t0


def precision_context(dtype: str):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "autocast-bf16")


def make_step(model, call, dtype: str, mode: str) -> TrainingStep:
    """A :class:`TrainingStep` whose ``parts`` holds the last call's split and ``loss`` its loss;
    ``call(parts)`` runs the model on the step's batch (a minibatch is sampled and gathered inside,
    into ``parts``) and gives (output rows, their labels)."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    step = TrainingStep(model, opt, None)

    def run():
        parts = Timed()
        if mode == "eval":
            model.eval()
            with torch.no_grad(), precision_context(dtype), parts("forward"):
                out, y = call(parts)
                step.loss = float(cross_entropy(out, y))
            model.train()
        else:
            with precision_context(dtype), parts("forward"):
                out, y = call(parts)
                loss = cross_entropy(out, y)
            with parts("backward"):
                loss.backward()
            with parts("optimiser"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            step.loss = float(loss)
        step.parts = parts.seconds

    step._run = run
    step.loss = step.parts = None
    return step


def cross_entropy(out, y):
    return F.cross_entropy(out.float(), y)


def peak_rss_during(fn) -> int:
    """Bytes the process's resident set rose above its start during ``fn()`` (Linux: the peak is
    reset through /proc/self/clear_refs; 0 where that is not possible)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status("VmRSS")
        fn()
        return max(0, _status("VmHWM") - before)
    except OSError:
        fn()
        return 0


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(field)
