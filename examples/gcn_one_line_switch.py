"""An unmodified DGL GCN, accelerated by changing one import.

    python examples/gcn_one_line_switch.py [--dataset cora] [--epochs 200]

Trains the same model twice from the same seed, once with ``dgl.nn.GraphConv`` and once with
``dgl_accel.nn.GraphConv`` (a subclass with the same parameters and state_dict keys), and prints
accuracy and time for both: progress lines while each trains, a summary at the end.
"""
import argparse
import time

import dgl
import dgl.nn
import torch
import torch.nn.functional as F
from progress import Progress  # examples/, next to this script

import dgl_accel.nn
from dgl_accel import data


def make_model(conv_cls, in_feats, hidden, classes):
    # The user's model code; the only difference between the two runs is conv_cls.
    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = conv_cls(in_feats, hidden, activation=F.relu)
            self.conv2 = conv_cls(hidden, classes)
            self.dropout = torch.nn.Dropout(0.5)

        def forward(self, g, x):
            return self.conv2(g, self.dropout(self.conv1(g, self.dropout(x))))

    return GCN()


def run(conv_cls, g, epochs, seed, phase):
    torch.manual_seed(seed)
    x, y = g.ndata["feat"], g.ndata["label"]
    model = make_model(conv_cls, x.shape[1], 16, int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        loss = F.cross_entropy(model(g, x)[g.ndata["train_mask"]], y[g.ndata["train_mask"]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        phase.step(f"loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        pred = model(g, x).argmax(1)
    mask = g.ndata["test_mask"]
    return (pred[mask] == y[mask]).float().mean().item(), time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="cora" if data.datasets_root() else "synthetic")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    progress = Progress()
    with progress.phase(f"load {args.dataset}") as phase:
        g = dgl.add_self_loop(dgl.remove_self_loop(data.load(args.dataset)))
        phase.note = f"{g.num_nodes()} nodes, {g.num_edges()} edges"
    results = []
    for name, cls in (("dgl.nn.GraphConv", dgl.nn.GraphConv), ("dgl_accel.nn.GraphConv", dgl_accel.nn.GraphConv)):
        with progress.phase(f"train {name}", total=args.epochs) as phase:
            acc, secs = run(cls, g, args.epochs, args.seed, phase)
            phase.note = f"test accuracy {acc:.4f}"
        results.append(f"{name:24s} test accuracy {acc:.4f}  {args.epochs} epochs in {secs:.2f}s")
    progress.summary(f"GCN on {args.dataset}, one import switched", results)

if __name__ == "__main__":
    main()
