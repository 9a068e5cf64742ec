"""GraphSAGE on Coauthor-CS with the bulk sampler vs our node-wise ``NeighborSampler``.

    python examples/bulk_sage_coauthor.py [--seeds 6] [--epochs 30] [--bulk 32]

Same protocol as issue 6's comparison (tests/test_neighbor_sampler.py, whose helpers this script
reuses: 256-d fixed projection of the bag-of-words features, 20 labelled nodes per class + 30
validation per class, the rest test; 2-layer SAGE, fanouts [10, 10], batch 64, 30 epochs, Adam,
full-neighbourhood inference), run for several seeds with both samplers inside
``dgl.dataloading.DataLoader``; the bulk sampler bulks through the DataLoader lookahead.
Prints both mean test accuracies and their difference; the acceptance is |diff| <= 1 point.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dgl_accel.sampling import BulkNeighborSampler, NeighborSampler  # noqa: E402
from tests.test_neighbor_sampler import _coauthor_cs, _split, _train_eval  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--bulk", type=int, default=32)
    args = ap.parse_args(argv)
    g = _coauthor_cs()
    train, _, test = _split(g.ndata["label"].numpy(), seed=0)
    accs = {"bulk": [], "nodewise": []}
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        accs["bulk"].append(_train_eval(g, train, test, lambda s: BulkNeighborSampler([10, 10], bulk=args.bulk, seed=s),
                                        seed, epochs=args.epochs))
        accs["nodewise"].append(_train_eval(g, train, test, lambda s: NeighborSampler([10, 10], seed=s), seed,
                                            epochs=args.epochs))
        print(f"seed {seed}: bulk {accs['bulk'][-1]:.4f} nodewise {accs['nodewise'][-1]:.4f}", flush=True)
    b, n = float(np.mean(accs["bulk"])), float(np.mean(accs["nodewise"]))
    print(f"test accuracy over {args.seeds} seeds: bulk {b:.4f} nodewise {n:.4f} diff {100 * (b - n):+.2f} points "
          f"({time.perf_counter() - t0:.0f} s)")
    print(f"bulk_acc={b:.4f} nodewise_acc={n:.4f}")


if __name__ == "__main__":
    main()
