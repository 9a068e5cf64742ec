"""Data-parallel GraphSAGE with bulk sampling on torch.distributed (gloo on CPU, nccl with CUDA).

    torchrun --nproc_per_node=2 examples/distributed_sage.py --dataset graphdata_coauthor_cs --epochs 10
    torchrun --nproc_per_node=4 examples/distributed_sage.py --partitioned --c 2   # 1.5D SpGEMM sampling
    python examples/distributed_sage.py                                            # one process

Graph-replicated by default: every rank loads the whole graph and samples its share of each bulk
of minibatches (no communication for sampling); DistributedDataParallel syncs the gradients.
``--partitioned --c C`` samples with :class:`dgl_accel.distributed.PartitionedSpGEMM`: A split
into (world / C) block rows over a (world / C) x C process grid; the samples are the same.

Global batch: each optimizer step uses ``--minibatches-per-step`` (S, default 4) minibatches of
``--batch-size`` seeds, spread over the ranks (S must be a multiple of the world size), so 1, 2
and 4 processes make the same updates and reach the same accuracy (up to float rounding).

Dataset: ``--dataset`` (default graphdata_coauthor_cs; falls back to the embedded synthetic graph
when that dataset is not available).  Graphs without splits get a seeded 60/20/20 split.
Rank 0 prints a line per epoch (loss; validation accuracy every 5 epochs) and a summary; its last
line is ``RESULT world=... test_acc=... seconds=...``.
"""
import argparse
import contextlib
import os
import time
import warnings

import torch
from progress import Progress  # examples/, next to this script

from dgl_accel import data
from dgl_accel import distributed as D
from dgl_accel.sampling import BulkNeighborSampler

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def load_graph(name: str, seed: int):
    try:
        g = data.load(name)
    except (ValueError, OSError) as e:
        print(f"dataset {name!r} unavailable ({str(e)[:120]}...); using the synthetic graph", flush=True)
        g = data.synthetic_graph(num_nodes=3000, seed=seed)
    if "train_mask" not in g.ndata:
        # Seeded 60/20/20 split of the labelled nodes (same on every rank).
        lab = torch.nonzero(g.ndata["label"] >= 0, as_tuple=True)[0]
        perm = lab[torch.randperm(len(lab), generator=torch.Generator().manual_seed(seed))]
        a, b = int(0.6 * len(perm)), int(0.8 * len(perm))
        for key, ids in (("train_mask", perm[:a]), ("val_mask", perm[a:b]), ("test_mask", perm[b:])):
            m = torch.zeros(g.num_nodes(), dtype=torch.bool)
            m[ids] = True
            g.ndata[key] = m
    return g


def with_progress(loader, phase, note):
    """The loader's steps, with ``phase.step`` after each (a progress line at most every few seconds)."""
    for step in loader:
        yield step
        phase.step(note)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="graphdata_coauthor_cs")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=256, help="seeds per minibatch")
    p.add_argument("--minibatches-per-step", type=int, default=4, help="S: minibatches per optimizer step")
    p.add_argument("--fanouts", default="10,5", help="per layer, input layer first")
    p.add_argument("--bulk", type=int, default=4, help="k: minibatches sampled per pass")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partitioned", action="store_true", help="sample with the 1.5D PartitionedSpGEMM")
    p.add_argument("--c", type=int, default=1, help="replication factor of --partitioned")
    p.add_argument("--timeout", type=float, default=300, help="collective timeout (s)")
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: cores / world)")
    args = p.parse_args(argv)

    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        D.init(timeout=args.timeout)
    rank, world = D.world()
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    dev = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    log = print if rank == 0 else (lambda *a, **k: None)

    progress = Progress()
    with progress.phase(f"load {args.dataset}") if rank == 0 else contextlib.nullcontext():
        g = load_graph(args.dataset, args.seed)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    spgemm = D.PartitionedSpGEMM(g, c=args.c) if args.partitioned else None
    sampler = BulkNeighborSampler(fanouts, bulk=args.bulk, seed=args.seed, spgemm=spgemm)
    loader = D.replicated_loader(g, g.ndata["train_mask"], sampler, args.batch_size,
                                 minibatches_per_step=args.minibatches_per_step, seed=args.seed)
    feat, label = g.ndata["feat"].to(dev), g.ndata["label"].to(dev)
    torch.manual_seed(args.seed)
    model = D.SAGE(feat.shape[1], args.hidden, int(label.max()) + 1, len(fanouts), args.dropout).to(dev)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    log(f"world={world} mode={'partitioned c=' + str(args.c) if args.partitioned else 'replicated'} "
        f"nodes={g.num_nodes()} edges={g.num_edges()} train={int(g.ndata['train_mask'].sum())} "
        f"steps/epoch={len(loader)} global batch={args.batch_size * args.minibatches_per_step}", flush=True)

    t0 = time.perf_counter()
    with progress.phase("train", total=args.epochs * len(loader)) if rank == 0 else contextlib.nullcontext() as phase:
        for epoch in range(args.epochs):
            steps = loader if rank != 0 else with_progress(loader, phase, f"epoch {epoch}")
            loss = D.train_epoch(model, steps, opt, feat, label, dropout_seed=args.seed)
            if rank == 0:
                note = f"epoch {epoch:3d} loss {loss:.4f}"
                if epoch % 5 == 4 or epoch == args.epochs - 1:
                    note += f" val_acc {D.evaluate(model, g, g.ndata['val_mask'], feat, label, len(fanouts)):.4f}"
                log(note, f"({time.perf_counter() - t0:.1f}s)", flush=True)
                phase.note = note
    seconds = time.perf_counter() - t0
    if rank == 0:
        with progress.phase("test (full-neighbourhood inference)") as phase:
            test = D.evaluate(model, g, g.ndata["test_mask"], feat, label, len(fanouts))
            phase.note = f"test_acc {test:.4f}"
        progress.summary(f"GraphSAGE, world={world}, {args.epochs} epochs")
        log(f"RESULT world={world} partitioned={args.partitioned} c={args.c} test_acc={test:.4f} "
            f"seconds={seconds:.1f}", flush=True)
    if distributed:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
