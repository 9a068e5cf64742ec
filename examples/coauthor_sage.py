"""Issue 6's sampler comparison protocol on Coauthor-CS, shared by ``examples/bulk_sage_coauthor.py``
and ``tests/sampling/test_neighbor.py``: 256-d fixed projection of the bag-of-words features, 20
labelled nodes per class + 30 validation per class, the rest test; 2-layer SAGE (mean), fanouts from
the sampler, batch 64, Adam, full-neighbourhood inference."""
from __future__ import annotations

import dgl
import dgl.nn
import numpy as np
import scipy.sparse as sp
import torch

from dgl_accel.data import datasets_root, load, load_npz_arrays


def load_coauthor_cs():
    """The graph with 256-d projected features and labels, or None where the dataset is absent."""
    root = datasets_root()
    path = None if root is None else root / "npz" / "graphdata_coauthor_cs.npz"
    if path is None or not path.is_file():
        return None
    a = load_npz_arrays(path)
    g = load("graphdata_coauthor_cs", features="none")
    n, f = (int(v) for v in a["x_shape"])
    x = sp.csr_matrix((a["x_data"], a["x_indices"], a["x_indptr"]), shape=(n, f))
    # The 6,805 bag-of-words columns, reduced by a fixed Gaussian projection to 256 (fast and small:
    # the dense matrix is 500 MB); every sampler sees the same features.
    proj = np.random.default_rng(0).standard_normal((f, 256)).astype(np.float32) / 16.0
    g.ndata["feat"] = torch.from_numpy(np.asarray(x @ proj, dtype=np.float32))
    return g


def split(labels, seed):
    """(train, val, test) node ids: 20 and 30 per class, the rest test."""
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        train += idx[:20].tolist()
        val += idx[20:50].tolist()
    test = np.setdiff1d(np.arange(len(labels)), train + val)
    return torch.tensor(train), torch.tensor(val), torch.from_numpy(test)


class SAGE(torch.nn.Module):
    def __init__(self, i, h, o):
        super().__init__()
        self.l1, self.l2 = dgl.nn.SAGEConv(i, h, "mean"), dgl.nn.SAGEConv(h, o, "mean")

    def forward(self, blocks, x):
        x = torch.relu(self.l1(blocks[0], x))
        return self.l2(blocks[1], x)


def train_eval(g, train, test, make_sampler, seed, epochs=30, on_epoch=None):
    """Test accuracy after ``epochs`` of minibatch training with ``make_sampler(seed)``;
    ``on_epoch(epoch, loss)`` after each epoch (progress lines)."""
    torch.manual_seed(seed)
    dgl.seed(seed)
    model = SAGE(g.ndata["feat"].shape[1], 64, int(g.ndata["label"].max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    dl = dgl.dataloading.DataLoader(g, train, make_sampler(seed), batch_size=64, shuffle=True)
    feat, label = g.ndata["feat"], g.ndata["label"]
    model.train()
    for epoch in range(epochs):
        for input_nodes, output_nodes, blocks in dl:
            loss = torch.nn.functional.cross_entropy(model(blocks, feat[input_nodes]), label[output_nodes])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if on_epoch is not None:
            on_epoch(epoch, float(loss))
    model.eval()
    with torch.no_grad():  # full-neighbourhood inference on the whole graph
        pred = model([g, g], feat).argmax(1)
    return float((pred[test] == label[test]).float().mean())
