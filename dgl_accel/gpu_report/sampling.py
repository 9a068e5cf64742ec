"""Sampling throughput on the device beside our CPU path on the same machine, DGL-free (the core's
entries in ``dgl_accel.core.sampling``):

* neighbour sampling, fanouts [15, 10, 5], batch 1,024 seeds (``sample_neighbors`` per layer, the
  next frontier = seeds + new sources): sampled edges/s;
* the same with the blocks built (``sample_layers``: every layer relabelled, a ``SamplerOutput``),
  with ``host_reads``, what one batch reads on the host (``testing.HostReads``), uniform and
  weighted (uniform random edge weights; the tables are built in the untimed first call);
* k-hop sampling, fanouts [15, 10, 5], one sample per seed of a 1,024 batch (``khop_sample``):
  sampled vertices/s;
* shaDow-GNN's k-hop extraction (DGL's ``ShaDowKHopSampler``: the merged node list of fanouts
  [10, 5] from a 1,024 batch, then the subgraph it induces; ``induced_device`` on the device,
  ``merged_khop_nodes`` and ``induced_entries`` on the CPU): targets/s, with the subgraph's size;
  and its per-target mode (each target's own scope, ``khop_node_sets``, then the batch of induced
  subgraphs: ``induced_sets_device`` on the device, ``induced_batch`` on the CPU);
* one layer, fanout 15, at 1k / 64k / 1M seeds (64 / 256 / 1,024 under ``tiny``), beside a trivial
  sampler with replacement timed in the same run (one random number per slot, a gather: what a
  sampler that only reads the CSR costs, the bound): sampled edges/s;
* DeepWalk (``random_walk``) and node2vec (p=0.5, q=2; ``node2vec_random_walk``), length 80: steps/s;
* GraphSAINT random-walk subgraphs (3,000 roots, length 2, as GraphSAINT's paper), as ``SAINTSampler``
  builds them: the walks' node set, then the subgraph it induces (``draw_walk_device`` and
  ``induced_device`` on the device, ``draw_walk`` and ``induced_entries`` on the CPU; the tables
  built once per graph): subgraphs/s;
* bulk sampling, k = 32 minibatches of 1,024 seeds at once, fanouts [15, 10, 5] (the device
  pipeline ``sample_bulk_device``; on the CPU ``sample_bulk_cpu``, the matrix formulation's layers): sampled edges/s;
* PPR extraction (shaDow-GNN's scope: ``ppr_node_sets``, the push per target then its top-K nodes),
  K = 32, 64, 200 (32 under ``tiny``), alpha 0.15, eps 1e-5 (1e-3 under ``tiny``): targets/s, and the mean subgraph size
  (``mean_size``: nodes per target); 256 targets a call on the device (the pipeline of
  ``shadow/ppr_device.py``: rounds over groups of targets, work proportional to the pushed entries), 8 on the CPU.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np
import torch

from ..core.backend import use_backend
from ..core.sampling.arrays import np64
from ..core.sampling.bulk.matrix import canonical_adjacency
from ..core.sampling.bulk.neighbor import sample_bulk_cpu
from ..core.sampling.bulk.neighbor_device import sample_bulk_device
from ..core.sampling.induced.subgraph import InCSR, induced_entries
from ..core.sampling.induced.subgraph_device import induced_device, induced_sets_device
from ..core.sampling.neighbor.choice import weight_tables
from ..core.sampling.neighbor.khop import khop_sample
from ..core.sampling.neighbor.sample import pack_pairs, sample_layers, sample_neighbors
from ..core.sampling.saint.draw import Tables, build_tables, draw_walk
from ..core.sampling.saint.draw_device import DeviceTables, draw_walk_device
from ..core.sampling.shadow.ppr import ppr_node_sets
from ..core.sampling.shadow.scope import induced_batch, khop_node_sets, merged_khop_nodes
from ..core.sampling.walks.node2vec import node2vec_random_walk
from ..core.sampling.walks.random_walk import WalkCSR, random_walk
from .correctness_sampling import structure
from .graphs import Graph
from .timing import median_seconds, synchronize

FANOUTS = (15, 10, 5)
SLOW_S = 5.0  # a first call slower than this is timed once (see run)
PPR_TOPK, PPR_ALPHA, PPR_EPS = (32, 64, 200), 0.15, 1e-5  # shaDow-GNN's alpha and eps


def neighbor_sampling(csr, seeds: torch.Tensor, fanouts=FANOUTS, seed: int = 0) -> int:
    """Multi-layer sampling from ``seeds``; returns the number of sampled edges."""
    frontier, total = seeds, 0
    for layer, fanout in enumerate(fanouts):
        src, dst, _ = sample_neighbors(csr, frontier, fanout, seed=seed, step=layer)
        total += src.numel()
        frontier = torch.unique(torch.cat([frontier, src.to(frontier.dtype)]))
    return total


def neighbor_blocks(csr, seeds: torch.Tensor, fanouts=FANOUTS, seed: int = 0, host=None, prob=None) -> int:
    """Multi-layer sampling with every layer relabelled (the blocks' arrays); the sampled edges.
    ``host``: the CPU path's numpy arrays, built once per graph as the DGL adapter caches them;
    ``prob``: edge weights (the weighted choice; tables built on the first call, then cached)."""
    tables = None if prob is None else weight_tables(csr.indptr, csr.eids, prob)
    return sum(layer.num_edges for layer in
               sample_layers(csr, seeds, list(fanouts), seed=seed, host=host, tables=tables).layers)


def _reads_once(fn):
    """``fn``, whose first call also counts what one call reads on the host (``host_reads``) and
    returns ``(count, {"host_reads": n})``; later calls (the timed ones) only run ``fn``."""
    first = [True]

    def run():
        if not first[0]:
            return fn()
        first[0] = False
        from ..testing.host_reads import HostReads  # the report's one use of the test helpers
        with HostReads() as reads:
            count = fn()
        return count, {"host_reads": len(reads.events)}
    return run


def khop_vertices(csr, seeds: torch.Tensor, fanouts=FANOUTS, seed: int = 0) -> int:
    """One k-hop sample per seed; returns the sampled vertices (occupied slots of every step)."""
    return int(sum((step >= 0).sum() for step in khop_sample(csr, seeds, list(fanouts), seed=seed).steps))


SHADOW_FANOUTS = (10, 5)


def shadow_khop(csr, seeds: torch.Tensor, host: InCSR | None) -> tuple[int, dict]:
    """One shaDow k-hop batch: merged nodes, then their induced subgraph (on the CPU: ``host``, the
    numpy CSR); returns (targets, {"nodes", "edges"} of the subgraph)."""
    seeds = torch.unique(seeds)  # DGL's sampler takes distinct seeds
    if host is None:
        nodes = sample_layers(csr, seeds, list(SHADOW_FANOUTS), seed=4).input_nodes
        ptr, _, _ = induced_device(csr, nodes)
        size, edges = nodes.numel(), int(ptr[-1])
    else:
        nodes = merged_khop_nodes(csr, seeds.numpy(), list(SHADOW_FANOUTS), seed=4)
        ptr, _, _ = induced_entries(host.indptr, host.indices, host.eids, np.sort(nodes).astype(host.indptr.dtype),
                                    host.num_nodes)
        size, edges = nodes.shape[0], int(ptr[-1])
    return seeds.numel(), {"nodes": size, "edges": edges}


def shadow_per_target(csr, seeds: torch.Tensor, host: InCSR | None) -> tuple[int, dict]:
    """One per-target shaDow k-hop batch (fanouts [10, 5], target side first): each target's own
    scope, then the batch of their induced subgraphs (on the CPU: ``host``, the numpy CSR)."""
    sets = khop_node_sets(csr, seeds, list(SHADOW_FANOUTS), seed=5)
    if host is None:
        ptr, _, _ = induced_sets_device(csr, sets.offsets, sets.nodes)
    else:
        ptr, _, _ = induced_batch(host.indptr, host.indices, host.eids, sets)
    return seeds.numel(), {"nodes": sets.nodes.numel(), "edges": int(ptr[-1])}


def one_layer(csr, seeds: torch.Tensor, fanout: int = 15) -> int:
    src, _, _ = sample_neighbors(csr, seeds, fanout, seed=1)
    return src.numel()


def trivial_with_replacement(csr, seeds: torch.Tensor, fanout: int = 15) -> int:
    """One uniform draw per (seed, slot) among the seed's in-edges, then the gather: the bound."""
    start = csr.indptr[seeds]
    deg = csr.indptr[seeds + 1] - start
    pick = start[:, None] + (torch.rand(seeds.numel(), fanout, device=seeds.device) * deg[:, None]).long()
    return csr.indices[pick[deg > 0]].numel()


def walk_steps(wcsr: WalkCSR, starts: torch.Tensor, length: int, seed: int) -> int:
    random_walk(wcsr, starts, length, seed=seed)
    return starts.numel() * length


def node2vec_steps(wcsr: WalkCSR, starts: torch.Tensor, length: int, seed: int) -> int:
    node2vec_random_walk(wcsr, starts, 0.5, 2.0, length, seed=seed)
    return starts.numel() * length


def saint_walk_subgraph(t: Tables, csr, on_device: DeviceTables | None, roots: int, length: int, seed: int) -> int:
    """One GraphSAINT walk subgraph, its node set and the edges it induces (the device pipeline
    where ``on_device`` is given, else the CPU path's); returns 1 (one subgraph)."""
    if on_device is not None:
        induced_device(csr, draw_walk_device(on_device, roots, length, seed))
    else:
        c = t.csr
        induced_entries(c.indptr, c.indices, c.eids, draw_walk(t, roots, length, seed), c.num_nodes)
    return 1


def bulk_sampling(canon, seeds: np.ndarray, k: int, path: str, device, fanouts=FANOUTS, seed: int = 0) -> int:
    """k minibatches of ``len(seeds) // k`` seeds, all layers; returns the number of sampled edges."""
    frontiers = [np.unique(b) for b in np.array_split(seeds, k)]
    keys, order = [seed * 1000 + b for b in range(k)], list(reversed(fanouts))  # fanouts[0]: the output layer
    if path == "triton":  # the device pipeline: every array stays on the device
        arrays = [canon.on_device(name, device) for name in ("indptr", "indices", "eids")]
        outs = sample_bulk_device(*arrays, canon.n, [torch.from_numpy(f).to(device) for f in frontiers], keys,
                                  order, replace=False, prefix=None if canon.unit else canon.weight_prefix(device))
    else:
        outs = sample_bulk_cpu(canon, frontiers, keys, order, replace=False)
    return sum(layer.num_edges for out in outs for layer in out.layers)


def ppr_extraction(csr, targets: torch.Tensor, topk: int, eps: float) -> tuple[int, dict]:
    """The top-``topk`` PPR node set of every target; returns (targets, {"mean_size": nodes per target})."""
    sets = ppr_node_sets(csr, targets, topk=topk, alpha=PPR_ALPHA, eps=eps)
    return targets.numel(), {"mean_size": round(sets.nodes.numel() / max(targets.numel(), 1), 2)}


def _ppr_cases(g: Graph, s_in, where: str, tiny: bool):
    """[(name, unit, fn)] of the PPR extraction at each K (the push does not depend on K, the selection does)."""
    eps = 1e-3 if tiny else PPR_EPS  # tiny: one target, few push rounds (the interpreter runs them)
    count = 1 if tiny else 256 if where == "device" else 8
    targets = torch.randint(g.num_nodes, (count,), generator=torch.Generator().manual_seed(5))
    return [(f"PPR top-{k} (alpha {PPR_ALPHA:g}, eps {eps:g})", "targets/s",
             lambda k=k: ppr_extraction(s_in, targets, k, eps)) for k in (PPR_TOPK[:1] if tiny else PPR_TOPK)]


def _cases(g: Graph, dev, sz: dict, s_in, s_out, wcsr, seeds, starts, n2v_starts, canon, bulk_seeds, path: str):
    """[(name, unit, fn)]: ``fn()`` runs one unit of work and returns its count."""
    many = {n: _seeds(g.num_nodes, n, dev) for n in sz["one_layer"]}  # drawn once: the timings are the samplers'
    prob = torch.rand(g.num_edges, generator=torch.Generator().manual_seed(6)).to(dev)  # weights in [0, 1)
    host = InCSR.from_structure(s_in) if path == "native" else None  # the CPU path's numpy CSR, built once
    # sample_layers' CPU arrays, built once (per call they cost two E-sized passes: 2.4 s a batch on R-MAT 22)
    pairs = (np64(s_in.indptr), pack_pairs(np64(s_in.indices), np64(s_in.eids))) if path == "native" else None
    saint = build_tables(host if host is not None else InCSR.from_structure(s_in), s_out)  # once per graph, as
    saint_dev = DeviceTables.on(saint, dev) if path == "triton" else None                   # the sampler does
    return [
        (f"neighbor [15,10,5] batch {sz['batch']}", "sampled edges/s", lambda: neighbor_sampling(s_in, seeds.to(dev))),
        (f"neighbor blocks [15,10,5] batch {sz['batch']}", "sampled edges/s",
         _reads_once(lambda: neighbor_blocks(s_in, seeds.to(dev), host=pairs))),
        (f"neighbor blocks weighted [15,10,5] batch {sz['batch']}", "sampled edges/s",
         _reads_once(lambda: neighbor_blocks(s_in, seeds.to(dev), host=pairs, prob=prob))),
        (f"k-hop [15,10,5] batch {sz['batch']}", "sampled vertices/s", lambda: khop_vertices(s_in, seeds.to(dev))),
        (f"shaDow k-hop [10,5] extraction batch {sz['batch']}", "targets/s",
         lambda: shadow_khop(s_in, seeds.to(dev), host)),
        (f"shaDow per-target k-hop [10,5] batch {sz['batch']}", "targets/s",
         lambda: shadow_per_target(s_in, seeds.to(dev), host)),
    ] + [
        case for n in sz["one_layer"] for case in (
            (f"one layer fanout 15, {n:,} seeds", "sampled edges/s",
             lambda n=n: one_layer(s_in, many[n])),
            (f"trivial with replacement fanout 15, {n:,} seeds (bound)", "sampled edges/s",
             lambda n=n: trivial_with_replacement(s_in, many[n])))
    ] + [
        (f"DeepWalk length {sz['length']}", "steps/s", lambda: walk_steps(wcsr, starts, sz["length"], 1)),
        (f"node2vec length {sz['length']}", "steps/s", lambda: node2vec_steps(wcsr, n2v_starts, sz["length"], 2)),
        (f"GraphSAINT walk ({sz['roots']} roots, length 2)", "subgraphs/s",
         lambda: saint_walk_subgraph(saint, s_in, saint_dev, sz["roots"], 2, 3)),
        (f"bulk k={sz['k']} [15,10,5] batch {sz['batch']}", "sampled edges/s",
         lambda: bulk_sampling(canon, bulk_seeds, sz["k"], path, dev)),
    ]


def _seeds(num_nodes: int, count: int, dev) -> torch.Tensor:
    return torch.randint(num_nodes, (count,), generator=torch.Generator().manual_seed(count)).to(dev)


def _sizes(tiny: bool) -> dict:
    return dict(one_layer=(64, 256, 1024) if tiny else (1 << 10, 1 << 16, 1 << 20),
                batch=64 if tiny else 1024, walks=32 if tiny else 100_000, cpu_walks=32 if tiny else 10_000,
                length=8 if tiny else 80, roots=16 if tiny else 3000, k=4 if tiny else 32, n2v_walks=16 if tiny
                else 50_000)


def run(results, graphs: list[Graph], device, timing: dict, tiny: bool, progress, deadline=None) -> None:
    sz = _sizes(tiny)
    for g in graphs:
        if deadline is not None and deadline.passed():
            progress(f"  sampling on {g.name}: skipped (budget spent)")
            continue
        progress(f"  sampling on {g.name} ({g.num_nodes:,} nodes, {g.num_edges:,} edges)")
        gen = torch.Generator().manual_seed(0)
        seeds = torch.randint(g.num_nodes, (sz["batch"],), generator=gen)
        bulk_seeds = torch.randint(g.num_nodes, (sz["batch"] * sz["k"],), generator=gen).numpy()
        cpu_g = Graph(g.name, g.kind, g.src.cpu(), g.dst.cpu(), g.num_nodes)
        t0 = time.perf_counter()
        s_cpu = structure(cpu_g, "cpu")
        canon = canonical_adjacency(s_cpu.indptr.numpy(), s_cpu.indices.numpy(), s_cpu.eids.numpy(), g.num_nodes)
        progress(f"    CPU structures built ({time.perf_counter() - t0:.1f} s)")
        for where, dev in (("device", device), ("cpu", torch.device("cpu"))):
            backend = "native" if where == "cpu" else None
            s_in, s_out = structure(g, dev, "in"), structure(g, dev, "out")
            wcsr = WalkCSR(s_out)
            walks = sz["walks"] if where == "device" else sz["cpu_walks"]
            starts = torch.randint(g.num_nodes, (walks,), generator=gen).to(dev)
            n2v_starts = starts[:sz["n2v_walks"] if where == "device" else sz["cpu_walks"] // 4 or 1]
            # PPR extraction first: the first lease was cut inside this section before reaching it
            path = "native" if where == "cpu" else "triton"
            cases = _ppr_cases(g, s_in, where, tiny) + _cases(g, dev, sz, s_in, s_out, wcsr, seeds, starts,
                                                              n2v_starts, canon, bulk_seeds, path)
            for name, unit, fn in cases:
                row = dict(graph=g.name, nodes=g.num_nodes, edges=g.num_edges, sampler=name, unit=unit,
                           where=where, path="native CPU" if where == "cpu" else f"triton on {dev.type}")
                if deadline is not None and deadline.passed():
                    progress(f"    {where} {name}: skipped (budget spent)")
                    continue
                try:
                    with use_backend(backend) if backend else contextlib.nullcontext():
                        t0 = time.perf_counter()
                        count = fn()  # warm-up, and the work count of one call (with more fields: PPR)
                        synchronize(dev)
                        first = time.perf_counter() - t0
                        count, extra = count if isinstance(count, tuple) else (count, {})
                        # a call slower than SLOW_S is its own figure: repeats would eat the lease
                        t = first if first > SLOW_S else median_seconds(fn, dev, **timing)
                    row.update(ok=True, ms=t * 1e3, rate=float(count) / t, count=int(count), first_call_s=first,
                               single_shot=first > SLOW_S, **extra)
                except Exception as exc:  # a failing sampler is a row, not the end of the report
                    row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
                results.add("sampling", **row)
                # one line per case: the first GPU run was stopped inside this section with no line to say where
                progress(f"    {where} {name}: " + (f"{row['rate']:.3g} {unit} (first call {row['first_call_s']:.2f} s)"
                                                    if row["ok"] else row["error"][:120]))

