"""Data-parallel training of a swapped PyG GraphSAGE with dgl-accel's ``NeighborLoader``: each rank
samples its own shard of the training seeds, ``DistributedDataParallel`` averages the gradients of
the swapped model (gloo on the CPU, nccl on GPUs).

    torchrun --nproc_per_node 2 examples/pyg_ddp.py --graph tiny --epochs 3

What a PyG user writes, two imports changed::

    from dgl_accel.pyg import NeighborLoader           # was torch_geometric.loader.NeighborLoader
    dgl_accel.pyg.swap(model)                          # SAGEConv -> ours, same parameters
    model = DistributedDataParallel(model)
    loader = NeighborLoader(data, [10, 5], input_nodes=my_shard, batch_size=256, shuffle=True, seed=rank)

Every rank keeps the whole graph (as PyG's single-machine DDP example does) and the same number of
seeds (the training seeds are cut to a multiple of the world size, then dealt out round-robin), so
the ranks step together.  After every step the ranks' parameters are gathered and compared: DDP
keeps them equal, and the script fails if they ever differ.  Rank 0 prints each epoch's loss,
averaged over the ranks, and a summary line.

Usage: torchrun --nproc_per_node N examples/pyg_ddp.py [--graph tiny|rmat:SCALE] [--epochs 3]
           [--batch-size 64] [--fanouts 10,5] [--seed 0]
(without torchrun it runs as one rank.)
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import dgl_accel.pyg
from dgl_accel.gpu_report.training import example_graph


def graph(spec: str, seed: int):
    """The examples' graph (``tiny`` or ``rmat:SCALE``, 128 random features) with 16 classes that
    depend on the features, and half the tiny graph's nodes as training seeds."""
    data = example_graph(spec, seed=seed)
    data.y = data.x[:, :16].argmax(1)  # learnable labels, so the loss has somewhere to go
    if spec == "tiny":
        data.train_mask = torch.rand(data.num_nodes, generator=torch.Generator().manual_seed(seed)) < 0.5
    return data


class SAGE(torch.nn.Module):
    def __init__(self, feats: int, hidden: int, classes: int):
        super().__init__()
        from torch_geometric.nn import SAGEConv
        self.convs = torch.nn.ModuleList([SAGEConv(feats, hidden), SAGEConv(hidden, classes)])

    def forward(self, x, edge_index):
        x = self.convs[0](x, edge_index).relu()
        return self.convs[1](x, edge_index)


def same_weights_everywhere(model) -> bool:
    """Whether every rank holds exactly rank 0's parameters."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return all(torch.equal(gathered[0], g) for g in gathered)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="tiny")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--fanouts", default="10,5")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    if "RANK" not in os.environ:  # one rank without torchrun
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(29500 + os.getpid() % 1000))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    try:
        torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
        data = graph(args.graph, args.seed)
        train = data.train_mask.nonzero().flatten()
        train = train[: len(train) // world * world]
        shard = train[rank::world]  # round-robin: every rank the same number of seeds
        model = SAGE(data.num_features, 64, 16)
        report = dgl_accel.pyg.swap(model)
        model = DistributedDataParallel(model.to(device))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        loader = dgl_accel.pyg.NeighborLoader(data, [int(f) for f in args.fanouts.split(",")], input_nodes=shard,
                                              batch_size=args.batch_size, shuffle=True, seed=args.seed + rank)
        if rank == 0:
            print(f"{world} rank(s), {'nccl' if cuda else 'gloo'}, {len(shard)} seeds each; swapped: "
                  f"{len(report.swapped)} layer(s)", flush=True)
        losses, steps, equal, started = [], 0, True, time.perf_counter()
        for epoch in range(args.epochs):
            total = torch.zeros(2, device=device)
            for batch in loader:
                batch = batch.to(device)
                out = model(batch.x, batch.edge_index)[: batch.batch_size]
                loss = F.cross_entropy(out, batch.y[: batch.batch_size])
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
                equal = equal and same_weights_everywhere(model)
                total += torch.stack([loss.detach() * batch.batch_size, torch.tensor(batch.batch_size, device=device)])
            dist.all_reduce(total)
            losses.append(float(total[0] / total[1]))
            if rank == 0:
                print(f"epoch {epoch + 1}/{args.epochs}: loss {losses[-1]:.4f} "
                      f"({time.perf_counter() - started:.1f} s)", flush=True)
        if rank == 0:
            print(f"summary: {world} rank(s), {args.epochs} epoch(s), {steps} step(s) a rank, loss {losses[0]:.4f} -> "
                  f"{losses[-1]:.4f}, weights {'equal on every rank after every step' if equal else 'DIFFERED'}",
                  flush=True)
        return 0 if equal else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
