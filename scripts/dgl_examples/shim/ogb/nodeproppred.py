"""Stand-in for ``ogb.nodeproppred.DglNodePropPredDataset`` (scripts/dgl_examples).

Any ogbn-* name is answered with the shared dataset named by ``$DGL_EXAMPLES_DATASET`` (default
``graphdata_amazon_cs``), loaded with ``dgl_accel.data.load`` and shaped like OGB's class:
``dataset[0]`` is ``(graph with ndata["feat"], labels [N, 1])``, ``get_idx_split()`` gives
``{"train", "valid", "test"}`` and ``num_classes`` is set.  The split is the file's own
(Planetoid's public split) when it has one, else a fixed random split (seed 0, fractions from
``$DGL_EXAMPLES_SPLIT``, default ``0.2,0.1,0.7``), the same for every run and provider.
"""
from __future__ import annotations

import os

import torch

import dgl_accel.data

__all__ = ["DglNodePropPredDataset"]

DEFAULT_DATASET = "graphdata_amazon_cs"
DEFAULT_SPLIT = "0.2,0.1,0.7"


def fixed_split(num_nodes: int, fractions: tuple[float, float, float]) -> dict[str, torch.Tensor]:
    """A random train/valid/test split that depends only on ``num_nodes`` and the fractions."""
    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(0))
    n_train, n_val = int(fractions[0] * num_nodes), int(fractions[1] * num_nodes)
    n_test = min(num_nodes - n_train - n_val, int(round(fractions[2] * num_nodes)))
    return {"train": perm[:n_train].sort().values, "valid": perm[n_train:n_train + n_val].sort().values,
            "test": perm[n_train + n_val:n_train + n_val + n_test].sort().values}


class DglNodePropPredDataset:
    """OGB's node-property dataset interface over a shared dataset (the ogbn name is only recorded)."""

    def __init__(self, name: str, root: str = "dataset", meta_dict=None):
        self.requested = name
        source = os.environ.get("DGL_EXAMPLES_DATASET", DEFAULT_DATASET)
        g = dgl_accel.data.load(source)
        masks = {k: g.ndata.pop(k) for k in ("train_mask", "val_mask", "test_mask") if k in g.ndata}
        label = g.ndata.pop("label")
        if len(masks) == 3:
            split = {"train": masks["train_mask"], "valid": masks["val_mask"], "test": masks["test_mask"]}
            self.split = {k: torch.nonzero(m).flatten() for k, m in split.items()}
        else:
            fractions = tuple(float(x) for x in os.environ.get("DGL_EXAMPLES_SPLIT", DEFAULT_SPLIT).split(","))
            self.split = fixed_split(g.num_nodes(), fractions)
        self.name = f"{source}-as-{name}"
        self.graph, self.labels = g, label.view(-1, 1)
        self.num_classes = int(label.max()) + 1
        print(f"ogb shim: {name} -> {source} ({g.num_nodes()} nodes, {g.num_edges()} edges, "
              f"{self.num_classes} classes, split {[len(v) for v in self.split.values()]})", flush=True)

    def get_idx_split(self) -> dict[str, torch.Tensor]:
        return dict(self.split)

    def __getitem__(self, idx: int):
        if idx != 0:
            raise IndexError("This dataset has only one graph.")
        return self.graph, self.labels

    def __len__(self) -> int:
        return 1
