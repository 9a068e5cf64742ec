"""GraphSAGE on Coauthor-CS with the bulk sampler vs our node-wise ``NeighborSampler``.

    python examples/bulk_sage_coauthor.py [--seeds 6] [--epochs 30] [--bulk 32]

Same protocol as issue 6's comparison (``examples/coauthor_sage.py``, which
tests/sampling/test_neighbor.py uses too: 256-d fixed projection of the bag-of-words features, 20
labelled nodes per class + 30 validation per class, the rest test; 2-layer SAGE, fanouts [10, 10],
batch 64, 30 epochs, Adam, full-neighbourhood inference), run for several seeds with both samplers
inside ``dgl.dataloading.DataLoader``; the bulk sampler bulks through the DataLoader lookahead.
Prints a line per epoch at most every few seconds, and ends with a summary: both mean test
accuracies and their difference (the acceptance is |diff| <= 1 point) and each phase's time.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from coauthor_sage import load_coauthor_cs, split, train_eval  # examples/, next to this script
from progress import Progress

from dgl_accel.sampling import BulkNeighborSampler, NeighborSampler


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--bulk", type=int, default=32)
    args = ap.parse_args(argv)
    progress = Progress()
    with progress.phase("load Coauthor-CS") as phase:
        g = load_coauthor_cs()
        if g is None:
            sys.exit("graphdata_coauthor_cs not available: set the datasets root (dgl_accel.data.datasets_root()).")
        phase.note = f"{g.num_nodes()} nodes, {g.num_edges()} edges"
    train, _, test = split(g.ndata["label"].numpy(), seed=0)
    samplers = {"bulk": lambda s: BulkNeighborSampler([10, 10], bulk=args.bulk, seed=s),
                "nodewise": lambda s: NeighborSampler([10, 10], seed=s)}
    accs = {name: [] for name in samplers}
    for seed in range(args.seeds):
        for name, make in samplers.items():
            with progress.phase(f"seed {seed}: train {name}", total=args.epochs) as phase:
                acc = train_eval(g, train, test, make, seed, epochs=args.epochs,
                                 on_epoch=lambda epoch, loss, phase=phase: phase.step(f"loss {loss:.4f}"))
                accs[name].append(acc)
                phase.note = f"test accuracy {acc:.4f}"
    b, n = float(np.mean(accs["bulk"])), float(np.mean(accs["nodewise"]))
    progress.summary(f"GraphSAGE on Coauthor-CS, {args.seeds} seeds x {args.epochs} epochs", [
        f"test accuracy: bulk {b:.4f} nodewise {n:.4f} diff {100 * (b - n):+.2f} points "
        f"({'within' if abs(b - n) <= 0.01 else 'OUTSIDE'} the 1-point acceptance)",
        f"bulk_acc={b:.4f} nodewise_acc={n:.4f}"])


if __name__ == "__main__":
    main()
