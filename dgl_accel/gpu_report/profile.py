"""Where the device sampling and a minibatch step spend their time: the torch profiler's tables
(host time and device time by op) of each case, for a lease's notes.

    python -m dgl_accel.gpu_report.profile [--scale 21] [--out profile.txt]
    python -m dgl_accel.gpu_report.profile --interpret --tiny      # every code path, on the CPU

Cases, each warmed up twice, then profiled over three calls: one layer of fanout 15 from 1,024
seeds (``sample_neighbors``), the three layers [15, 10, 5] with the blocks built (``sample_layers``),
PyG's ``NodeLoader`` drawing a batch through our ``NeighborSampler`` (sample and feature gather;
its table also grouped by Python stack, since its host time is mostly outside ops), and the swapped
3-layer GraphSAGE step (forward, backward) on one batch again and again (the structure cached) and
on a new batch each call (what training does: each batch builds its structure).  Each case's
header gives its wall time per call and its host reads per call (``testing.HostReads``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile

from ..core.sampling.neighbor.sample import sample_layers, sample_neighbors
from ..testing.host_reads import HostReads
from . import graphs, training
from .cli import choose_mode
from .correctness_sampling import structure
from .timing import synchronize


def _cases(scale: int, device):
    import dgl_accel.pyg  # lazy: PyG is optional; only this tool and the training section need it

    g = graphs.rmat(scale, device)
    csr = structure(g, device, "in")
    # distinct, as a loader's batch
    seeds = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))[:1024].to(device)
    data = training.random_data(g.src, g.dst, g.num_nodes)
    batches = training.Minibatches(data, seed=0)
    it = iter(batches.loader)
    model = training.build("sage", data.num_features, 16).to(device)
    dgl_accel.pyg.swap(model)

    def draw():  # the next batch (a new sampler call: new tensors even when the seeds repeat)
        nonlocal it
        b = next(it, None)
        if b is None:
            it = iter(batches.loader)
            b = next(it)
        return b
    batch = draw()
    fresh = [draw() for _ in range(6)]  # 2 warm-up calls, 1 counted, 3 profiled

    def step(b=None):
        b = b or batch
        model(b.x, b.edge_index)[: b.batch_size].sum().backward()

    return [("one layer, fanout 15, 1,024 seeds", lambda: sample_neighbors(csr, seeds, 15, seed=1)),
            ("blocks [15, 10, 5], batch 1,024", lambda: sample_layers(csr, seeds, [15, 10, 5], seed=2)),
            ("PyG NodeLoader batch (our NeighborSampler, features gathered)", draw),
            ("swapped GraphSAGE forward + backward on one batch", step),
            ("swapped GraphSAGE forward + backward on a new batch each call", lambda: step(fresh.pop(0)))]


def profile(scale: int, device, row_limit: int = 18) -> str:
    out = []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for name, fn in _cases(scale, device):
        for _ in range(2):
            fn()
        synchronize(device)
        with HostReads() as reads:
            fn()
        synchronize(device)
        t0 = time.perf_counter()
        stacks = "NodeLoader" in name
        with torch_profile(activities=activities, with_stack=stacks) as prof:
            for _ in range(3):
                fn()
            synchronize(device)
        wall = (time.perf_counter() - t0) / 3
        events = prof.key_averages()
        out.append(f"=== {name}: {wall * 1e3:.2f} ms a call (profiled), {len(reads.events)} host reads a call "
                   f"({', '.join(sorted(set(reads.events))) or 'none'})")
        out.append(events.table(sort_by="self_cpu_time_total", row_limit=row_limit))
        if device.type == "cuda":
            out.append(events.table(sort_by="self_device_time_total", row_limit=row_limit))
        if stacks:
            out.append(prof.key_averages(group_by_stack_n=6).table(sort_by="self_cpu_time_total", row_limit=12))
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dgl_accel.gpu_report.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=21)
    p.add_argument("--interpret", action="store_true", help="the Triton interpreter on the CPU")
    p.add_argument("--tiny", action="store_true", help="R-MAT 6 (with --interpret: the test's run)")
    p.add_argument("--out", type=Path, default=None, help="also write the tables here")
    args = p.parse_args(argv)
    device = choose_mode(args)  # the report's: nothing has imported triton yet (kernels/loader.py)
    text = profile(6 if args.tiny else args.scale, device)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
