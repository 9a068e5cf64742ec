"""Heterograph neighbour-sampling throughput (issue 17): ``sample_blocks`` seeds/s, dgl_accel's
NeighborSampler vs DGL's, per-edge-type fanouts [15, 10, 5] (a dict per layer naming every edge
type), 1024 seeds per batch (512 of each node type), providers interleaved as in
:mod:`bench.sampling_neighbor`.

The graph, built from a shared dataset (default snap_soc-Slashdot0902, the edges ``data.load``
gives): node v becomes node ``v // 2`` of type ``user`` (v even) or ``item`` (v odd); an edge
u -> v becomes ``follows`` (user -> user), ``likes`` (user -> item) or ``rated_by``
(item -> user); item -> item edges (a quarter) are dropped, so there are two node types and three
relations, two of them into ``user``.

    python -m bench.sampling_hetero [--quick] [graph ...]
"""
from __future__ import annotations

import statistics

import torch

from bench.sampling_neighbor import sampler_cli, time_samplers

DEFAULT_GRAPHS = ("snap_soc-Slashdot0902",)
FANOUTS = [15, 10, 5]
BATCH = 1024
RELATIONS = {(0, 0): ("user", "follows", "user"), (0, 1): ("user", "likes", "item"),
             (1, 0): ("item", "rated_by", "user")}


def hetero_graph(g):
    """The two-type, three-relation graph of the module docstring, from a homogeneous graph."""
    import dgl

    src, dst = g.edges()
    ts, td = src % 2, dst % 2
    data = {}
    for (a, b), rel in RELATIONS.items():
        keep = (ts == a) & (td == b)
        data[rel] = (src[keep] // 2, dst[keep] // 2)
    n = g.num_nodes()
    return dgl.heterograph(data, num_nodes_dict={"user": (n + 1) // 2, "item": n // 2}, idtype=g.idtype)


def _samplers(hg):
    import dgl

    from dgl_accel.sampling import NeighborSampler

    fanouts = [{rel: f for rel in hg.canonical_etypes} for f in FANOUTS]
    return {"dgl": dgl.dataloading.NeighborSampler(fanouts), "dgl_accel": NeighborSampler(fanouts, seed=0)}


def bench_hetero(graph_names=DEFAULT_GRAPHS, quick: bool = False, warmup: int = 3,
                 repeat: int | None = None) -> list[dict]:
    """Rows ``{case, provider, median, min, max, repeat, seeds_per_s, ...}`` per graph and provider."""
    from dgl_accel import data

    repeat = repeat or (5 if quick else 25)
    rows = []
    for name in graph_names:
        hg = hetero_graph(data.load(name, features="none"))
        samplers = _samplers(hg)
        gen = torch.Generator().manual_seed(0)
        batches = [{nt: torch.randperm(hg.num_nodes(nt), generator=gen)[:BATCH // 2] for nt in hg.ntypes}
                   for _ in range(warmup + repeat)]
        times, edges = time_samplers(samplers, hg, batches, warmup)
        for p, ts in times.items():
            med = statistics.median(ts)
            rows.append({"case": f"hetero {name} 2 ntypes 3 etypes fanouts={FANOUTS} per etype batch={BATCH}",
                         "provider": p, "median": med, "min": min(ts), "max": max(ts), "repeat": len(ts),
                         "seeds_per_s": BATCH / med, "edges_per_batch": edges[p] / len(ts), "graph": name,
                         "num_nodes": hg.num_nodes(), "num_edges": hg.num_edges(),
                         "torch_threads": torch.get_num_threads()})
    return rows


def main(argv=None):
    return sampler_cli(argv, __doc__.splitlines()[0], DEFAULT_GRAPHS, bench_hetero, "sampling_hetero")


if __name__ == "__main__":
    main()
