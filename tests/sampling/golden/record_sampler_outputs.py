"""Golden outputs of every public sampler of ``dgl_accel.sampling``, for a regression guard: for a
given seed every sampler's output must stay BIT-IDENTICAL across refactors of the package layout.

The calls are written once, here (``FAMILIES``); ``tests/sampling/test_golden.py`` imports this
module, reruns them against the package under test and compares with ``sampler_outputs.pt``.
Only public names are used: ``dgl_accel.sampling.X``, ``dgl_accel.use_backend``.

Modes (key prefix of the stored tensors):

``native``     native CPU path, numba loops on (the default); graphs of 300 nodes, sizes chosen so
               that both the numpy path and the compiled loops (work >= 2048) run.
``numba_off``  the same calls with ``DGL_ACCEL_NUMBA=0`` (read when the package imports, so its own
               process).
``triton``     ``DGL_ACCEL_BACKEND=triton`` set before import: the Triton kernels under the
               interpreter, on a 60-node graph, for the samplers that have kernels.

``sampler_outputs.pt`` was recorded from commit dde0920 (before the package layout refactor).
Re-record (only when a change of numbers is intended) against the code whose numbers are the
reference, e.g. a worktree of that commit::

    git worktree add /tmp/golden_base dde0920
    ln -s ../kernels /tmp/golden_base/dgl_accel/kernels   # else the editable install maps
                                                          # dgl_accel.kernels to this checkout
    cd /tmp/golden_base && PYTHONPATH=/tmp/golden_base /work/main/.venv/bin/python \\
        /work/main/tests/sampling/golden/record_sampler_outputs.py --write /work/main/tests/sampling/golden/sampler_outputs.pt

A new sampler family (a new ``fam_``/``tri_`` function) is added without re-recording the others::

    .venv/bin/python tests/sampling/golden/record_sampler_outputs.py --add-new tests/sampling/golden/sampler_outputs.pt

records every mode against this checkout and adds only the tensors of families the file lacks (the
stored ones stay as they were; a family whose outputs changed still fails the test).

``--write`` runs every mode in its own subprocess (with the mode's environment) and checks that each
subprocess imported ``dgl_accel`` (and ``dgl_accel.kernels``) from the same root as the caller.
"""
from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

GOLDEN_FILE = Path(__file__).resolve().parent / "sampler_outputs.pt"

# Environment of each mode: set before the package is imported (subprocesses).
MODE_ENV = {
    "native": {"DGL_ACCEL_BACKEND": "native", "DGL_ACCEL_NUMBA": "1"},
    "numba_off": {"DGL_ACCEL_BACKEND": "native", "DGL_ACCEL_NUMBA": "0"},
    "triton": {"DGL_ACCEL_BACKEND": "triton", "TRITON_INTERPRET": "1"},
}
MODE_BACKEND = {"native": "native", "numba_off": "native", "triton": "triton"}
MODES = tuple(MODE_ENV)


# ----------------------------------------------------------------------------------- graphs
def _random_graph(n: int, e: int, seed: int, idtype=torch.int64):
    """Seeded random directed multigraph: half the edges go to uniform destinations, half to
    destinations skewed towards low ids (node 0 gets ~e/(2 sqrt(n)) in-edges: rows heavier than
    every fanout); nodes n-20..n-11 have no in-edges, the last 10 nodes no out-edges (walk dead
    ends); ``edata['prob']`` float32 weights with ~20% exact zeros."""
    import dgl

    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 10, e)
    skewed = np.minimum((rng.random(e) ** 2 * n).astype(np.int64), n - 1)
    dst = np.where(rng.random(e) < 0.5, rng.integers(0, n, e), skewed)
    dst[(dst >= n - 20) & (dst < n - 10)] -= 20
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n, idtype=idtype)
    prob = rng.random(e).astype(np.float32) * (rng.random(e) > 0.2)
    g.edata["prob"] = torch.from_numpy(prob.astype(np.float32))
    return g


def _symmetric_graph(n: int, pairs: int, seed: int):
    """Seeded symmetric simple graph (both directions of each undirected edge, a few self-loops):
    the SAINT sampler's symmetric induced-subgraph path, the bulk sampler's in-place row reads."""
    import dgl

    rng = np.random.default_rng(seed)
    u = rng.integers(0, n, pairs)
    v = rng.integers(0, n, pairs)
    a, b = np.minimum(u, v), np.maximum(u, v)
    keys = np.unique(a * n + b)
    a, b = keys // n, keys % n
    loops = a == b
    src = np.concatenate([a, b[~loops]])
    dst = np.concatenate([b, a[~loops]])
    return dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)


@functools.cache
def graphs() -> dict:
    g = _random_graph(300, 3000, seed=0)
    g32 = _random_graph(300, 3000, seed=0, idtype=torch.int32)
    return {
        "g": g,
        "g32": g32,
        "sym": _symmetric_graph(300, 3200, seed=1),
        "tiny": _random_graph(60, 600, seed=2),
        "perm": torch.from_numpy(np.random.default_rng(7).permutation(300)),  # all 300 nodes, shuffled
    }


# ---------------------------------------------------------------------------------- helpers
def _t(x) -> torch.Tensor:
    """A compact CPU copy (views would save their whole storage)."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    return x.detach().cpu().contiguous().clone()


def _put_blocks(out: dict, key: str, res, weight=None) -> None:
    """(input_nodes, output_nodes, blocks) of a block sampler: per block its local edges in edge-id
    order, its node and edge id columns (their lengths are the block's sizes) and the ``weight``
    edge column."""
    import dgl

    input_nodes, output_nodes, blocks = res
    out[f"{key}/input_nodes"] = _t(input_nodes)
    out[f"{key}/output_nodes"] = _t(output_nodes)
    for i, b in enumerate(blocks):
        k = f"{key}/block{i}"
        s, d = b.edges(order="eid")
        out[f"{k}/src"], out[f"{k}/dst"] = _t(s), _t(d)
        out[f"{k}/src_nid"] = _t(b.srcdata[dgl.NID])
        out[f"{k}/dst_nid"] = _t(b.dstdata[dgl.NID])
        out[f"{k}/eid"] = _t(b.edata[dgl.EID])
        if weight is not None:
            out[f"{k}/{weight}"] = _t(b.edata[weight])


def _put_subgraph(out: dict, key: str, sg) -> None:
    import dgl

    s, d = sg.edges(order="eid")
    out[f"{key}/src"], out[f"{key}/dst"] = _t(s), _t(d)
    out[f"{key}/nid"] = _t(sg.ndata[dgl.NID])
    out[f"{key}/eid"] = _t(sg.edata[dgl.EID])
    if "w" in sg.edata:
        out[f"{key}/w"] = _t(sg.edata["w"])
    if "loss_w" in sg.ndata:
        out[f"{key}/loss_w"] = _t(sg.ndata["loss_w"])


def _put(out: dict, key: str, res) -> None:
    """Tensors, tuples / lists / NamedTuples of them, nested."""
    if isinstance(res, (tuple, list)):
        names = getattr(res, "_fields", None) or [str(i) for i in range(len(res))]
        for name, r in zip(names, res):
            _put(out, f"{key}/{name}", r)
    else:
        out[key] = _t(res)


def _small(n=300):
    return torch.arange(0, n, 7), torch.arange(3, n, 11)


def _batches(perm, k):
    return list(perm.split(-(-perm.numel() // k)))


# ------------------------------------------------------- native / numba_off families (300 nodes)
# Sizes: a compiled loop runs from 2048 sampled slots / gathered entries on (so those cases store
# >= 2048 edges); every other case is small, to keep the golden file under ~2 MB.

def fam_neighbor_sampler(G, out):
    from dgl_accel.sampling import NeighborSampler

    g, perm = G["g"], G["perm"]
    a, b = _small()
    s = NeighborSampler([4, 3], seed=1)  # numpy path; two calls: the call counter advances the seed
    _put_blocks(out, "uniform/call0", s.sample_blocks(g, a))
    _put_blocks(out, "uniform/call1", s.sample_blocks(g, b))
    _put_blocks(out, "replace_small", NeighborSampler([3, 3], replace=True, seed=4).sample_blocks(g, a))
    _put_blocks(out, "full_fanout", NeighborSampler([-1, 2], seed=5).sample_blocks(g, b[:15]))
    _put_blocks(out, "prob", NeighborSampler([4, 3], prob="prob", seed=6).sample_blocks(g, a))
    _put_blocks(out, "prob_replace", NeighborSampler([3, 3], prob="prob", replace=True, seed=7).sample_blocks(g, a))
    _put_blocks(out, "prob_full", NeighborSampler([-1, 3], prob="prob", seed=8).sample_blocks(g, b[:15]))
    _put_blocks(out, "exclude_small", NeighborSampler([6, 4], seed=9).sample_blocks(
        g, a, exclude_eids=torch.arange(0, g.num_edges(), 3)))
    # all 300 nodes x fanout 8 or 10: >= 2048 slots, the compiled choice and relabelling
    _put_blocks(out, "uniform_large", NeighborSampler([10], seed=2).sample_blocks(g, perm))
    _put_blocks(out, "replace_large", NeighborSampler([8], replace=True, seed=3).sample_blocks(g, perm))
    _put_blocks(out, "exclude_large", NeighborSampler([10], seed=10).sample_blocks(
        g, perm, exclude_eids=torch.arange(0, g.num_edges(), 10)))
    _put_blocks(out, "int32_large", NeighborSampler([10], seed=11).sample_blocks(G["g32"], perm.int()))
    _put_blocks(out, "int32_small", NeighborSampler([3, 3], seed=12).sample_blocks(G["g32"], a.int()))


def fam_bulk_neighbor_sampler(G, out):
    from dgl_accel.sampling import BulkNeighborSampler

    g, sym, perm = G["g"], G["sym"], G["perm"]
    small = [torch.arange(0, 300, 6), torch.arange(1, 300, 10), torch.arange(2, 300, 14)]
    for j, r in enumerate(BulkNeighborSampler([3, 2], bulk=2, seed=5).bulk_sample(g, small)):
        _put_blocks(out, f"small/batch{j}", r)
    for j, r in enumerate(BulkNeighborSampler([2, 3], bulk=3, replace=True, seed=12).bulk_sample(sym, small[1:])):
        _put_blocks(out, f"replace_small/batch{j}", r)
    for j, r in enumerate(BulkNeighborSampler([-1, 2], bulk=3, seed=8).bulk_sample(g, small[2:])):
        _put_blocks(out, f"full_fanout/batch{j}", r)
    s = BulkNeighborSampler([2, 2], bulk=3, seed=9)
    s.plan(small)
    for j, bt in enumerate(small):
        _put_blocks(out, f"planned/call{j}", s.sample_blocks(g, bt))
    s = BulkNeighborSampler([3, 2], bulk=2, seed=10)
    _put_blocks(out, "exclude", s.sample_blocks(g, small[0], exclude_eids=torch.arange(1, g.num_edges(), 4)))
    # 300 rows x fanout >= 7 per pass: the compiled ITS and extraction; on g (parallel edges) P is
    # materialised, on the simple symmetric graph rows of A are read in place (fused gather)
    for j, r in enumerate(BulkNeighborSampler([10], bulk=4, seed=6).bulk_sample(g, _batches(perm, 4))):
        _put_blocks(out, f"large_multi/batch{j}", r)
    for j, r in enumerate(BulkNeighborSampler([7], bulk=2, seed=7).bulk_sample(sym, _batches(perm, 2))):
        _put_blocks(out, f"large_simple/batch{j}", r)
    for j, r in enumerate(BulkNeighborSampler([7], bulk=2, replace=True, seed=13).bulk_sample(sym, _batches(perm, 2))):
        _put_blocks(out, f"large_simple_replace/batch{j}", r)
    for j, r in enumerate(BulkNeighborSampler([3, 2], bulk=2, seed=11).bulk_sample(G["g32"], [x.int() for x in small[:2]])):
        _put_blocks(out, f"int32/batch{j}", r)


def _saint(out, key, sampler, g, calls=1):
    norm = sampler.normalization(g) if sampler.normalize else None
    if norm is not None:
        out[f"{key}/norm/edge_w"] = _t(norm.edge_w)
        out[f"{key}/norm/loss_w"] = _t(norm.loss_w)
        out[f"{key}/norm/p_node"] = _t(norm.p_node)
        out[f"{key}/norm/num_presampled"] = torch.tensor(norm.num_presampled)
    for c in range(calls):
        _put_subgraph(out, f"{key}/call{c}", sampler.sample(g))
    out[f"{key}/sample_nodes"] = _t(sampler.sample_nodes(g))


def _train_mask(n=300):
    return torch.from_numpy(np.random.default_rng(3).random(n) < 0.6)


def fam_saint_node(G, out):
    from dgl_accel.sampling import SAINTSampler

    g, sym = G["g"], G["sym"]
    _saint(out, "norm", SAINTSampler("node", 150, seed=1, normalize=True, train_mask=_train_mask()), g)
    _saint(out, "degree_count", SAINTSampler("node", 100, seed=2, normalize=True, node_prob="degree",
                                             exact_norm=False, coverage=3, aggr_norm="right"), g)
    _saint(out, "sym", SAINTSampler("node", 100, seed=3), sym)
    _saint(out, "nocache", SAINTSampler("node", 80, seed=4, cache=False), sym)


def fam_saint_edge(G, out):
    from dgl_accel.sampling import SAINTSampler

    g, sym = G["g"], G["sym"]
    _saint(out, "plain", SAINTSampler("edge", 250, seed=1, normalize=True, train_mask=_train_mask()), g)
    _saint(out, "count", SAINTSampler("edge", 100, seed=2, normalize=True, exact_norm=False, coverage=3,
                                      aggr_norm="none"), g)
    _saint(out, "sym", SAINTSampler("edge", 60, seed=3, normalize=True, aggr_norm="right"), sym)


def fam_saint_walk(G, out):
    from dgl_accel.sampling import SAINTSampler

    g, sym = G["g"], G["sym"]
    _saint(out, "plain", SAINTSampler("walk", (100, 3), seed=1, normalize=True, coverage=3,
                                      train_mask=_train_mask()), g)
    _saint(out, "sym", SAINTSampler("walk", (40, 2), seed=2), sym)
    _saint(out, "nonorm", SAINTSampler("walk", (30, 2), seed=3), g)


def fam_saint_frontier(G, out):
    from dgl_accel.sampling import SAINTSampler

    g, sym = G["g"], G["sym"]
    _saint(out, "plain", SAINTSampler("frontier", (20, 120), seed=1, normalize=True, coverage=3), g)
    # 200 of 300 nodes: the compiled symmetric induced subgraph
    _saint(out, "sym_large", SAINTSampler("frontier", (30, 200), seed=2,
                                          frontier_options={"eta": 1.5, "degree_clip": 6}), sym)


def fam_ladies_sampler(G, out):
    from dgl_accel.sampling import LADIESSampler

    g, perm = G["g"], G["perm"]
    a, b = _small()
    s = LADIESSampler([60, 40], seed=2)
    _put_blocks(out, "both/call0", s.sample_blocks(g, a), "w")
    _put_blocks(out, "both/call1", s.sample_blocks(g, b), "w")
    _put_blocks(out, "replace_right", LADIESSampler([50, 30], replace=True, norm="right", seed=3).sample_blocks(g, a), "w")
    _put_blocks(out, "left", LADIESSampler([100], norm="left", weight="wt", seed=4).sample_blocks(g, perm[:100]), "wt")
    _put_blocks(out, "none_full", LADIESSampler([400], norm="none", seed=5).sample_blocks(g, a), "w")
    _put_blocks(out, "exclude", LADIESSampler([60, 40], seed=6).sample_blocks(
        g, a, exclude_eids=torch.arange(0, g.num_edges(), 5)), "w")
    bs = LADIESSampler([30, 20], bulk=2, seed=7)
    for j, r in enumerate(bs.bulk.bulk_sample(g, _batches(perm[:150], 3))):
        _put_blocks(out, f"bulk/batch{j}", r, "w")
    bs = LADIESSampler([40, 20], bulk=2, replace=True, seed=8)
    _put_blocks(out, "bulk_replace/call0", bs.sample_blocks(g, a), "w")
    _put_blocks(out, "int32", LADIESSampler([60, 40], seed=9).sample_blocks(G["g32"], a.int()), "w")


def fam_fastgcn_sampler(G, out):
    from dgl_accel.sampling import FastGCNSampler

    g = G["g"]
    a, b = _small()
    s = FastGCNSampler([80, 60], seed=2)
    _put_blocks(out, "both/call0", s.sample_blocks(g, a), "w")
    _put_blocks(out, "both/call1", s.sample_blocks(g, b), "w")
    _put_blocks(out, "replace_right", FastGCNSampler([70, 50], replace=True, norm="right", seed=3).sample_blocks(g, a), "w")
    _put_blocks(out, "left", FastGCNSampler([90], norm="left", seed=4).sample_blocks(g, b), "w")
    _put_blocks(out, "none_exclude", FastGCNSampler([80, 60], norm="none", seed=5).sample_blocks(
        g, a, exclude_eids=torch.arange(2, g.num_edges(), 5)), "w")
    _put_blocks(out, "int32", FastGCNSampler([80, 60], seed=6).sample_blocks(G["g32"], a.int()), "w")


def fam_random_walk(G, out):
    from dgl_accel.sampling import random_walk

    g = G["g"]
    nodes, few = torch.arange(300), torch.arange(0, 300, 3)
    _put(out, "uniform", random_walk(g, nodes, length=8, seed=1))
    _put(out, "uniform_eids", random_walk(g, few, length=8, seed=2, return_eids=True))
    _put(out, "prob_eids", random_walk(g, few, length=6, prob="prob", seed=3, return_eids=True))
    _put(out, "restart", random_walk(g, few, length=10, restart_prob=0.2, seed=4, return_eids=True))
    rp = torch.linspace(0.0, 0.5, 7)
    _put(out, "restart_tensor_prob", random_walk(g, few, length=7, prob="prob", restart_prob=rp, seed=5))
    _put(out, "int32", random_walk(G["g32"], few.int(), length=5, seed=6, return_eids=True))


def fam_node2vec_random_walk(G, out):
    from dgl_accel.sampling import node2vec_random_walk

    g = G["g"]
    few, many = torch.arange(0, 300, 3), torch.arange(300)
    _put(out, "small", node2vec_random_walk(g, few, 0.5, 2.0, 6, seed=1, return_eids=True))
    # 300 walks x >= 7 steps >= 2048: the compiled loop (unweighted only)
    _put(out, "large", node2vec_random_walk(g, many, 0.5, 2.0, 8, seed=2, return_eids=True))
    _put(out, "pq", node2vec_random_walk(g, few, 4.0, 0.25, 7, seed=3))
    _put(out, "unbiased", node2vec_random_walk(g, few, 1.0, 1.0, 5, seed=4, return_eids=True))
    _put(out, "prob", node2vec_random_walk(g, few, 2.0, 0.5, 6, prob="prob", seed=5, return_eids=True))
    _put(out, "int32", node2vec_random_walk(G["g32"], few.int(), 0.5, 2.0, 6, seed=6))


def fam_multi_dimensional_random_walk(G, out):
    from dgl_accel.sampling import multi_dimensional_random_walk

    g = G["g"]
    _put(out, "int_roots", multi_dimensional_random_walk(g, 5, 40, num_instances=4, seed=1))
    _put(out, "roots_1d", multi_dimensional_random_walk(g, torch.tensor([0, 7, 42, 299]), 30, num_instances=3, seed=2))
    roots = torch.from_numpy(np.random.default_rng(5).integers(0, 300, (6, 8)))
    _put(out, "roots_2d", multi_dimensional_random_walk(g, roots, 50, seed=3))
    _put(out, "sym", multi_dimensional_random_walk(G["sym"], 10, 60, num_instances=2, seed=4))
    _put(out, "int32", multi_dimensional_random_walk(G["g32"], 5, 40, num_instances=2, seed=5))


def _csc(g):
    indptr, indices, eids = g.adj_tensors("csc")
    return indptr, indices, eids


def fam_neighbor_choice(G, out):
    from dgl_accel.sampling import neighbor_choice

    indptr, _, _ = _csc(G["g"])
    tr = torch.arange(0, 300, 2)
    _put(out, "f5", neighbor_choice(indptr, tr, 5, seed=11, step=0, num_nodes=300))
    _put(out, "f12_step3", neighbor_choice(indptr, tr, 12, seed=12, step=3, num_nodes=300))
    _put(out, "f7_replace", neighbor_choice(indptr, tr, 7, seed=13, step=1, num_nodes=300, replace=True))
    _put(out, "full", neighbor_choice(indptr, tr[:20], -1, seed=14, step=0, num_nodes=300))
    _put(out, "perm_f40", neighbor_choice(indptr, G["perm"][:40], 40, seed=15, step=2, num_nodes=300))


def fam_weighted_neighbor_choice(G, out):
    from dgl_accel.sampling import weighted_neighbor_choice

    g = G["g"]
    indptr, _, eids = _csc(g)
    prob = g.edata["prob"]
    tr = torch.arange(0, 300, 2)
    _put(out, "f5", weighted_neighbor_choice(indptr, eids, prob, tr, 5, seed=11, step=0, num_nodes=300))
    _put(out, "f6_replace", weighted_neighbor_choice(indptr, eids, prob, tr, 6, seed=12, step=2, num_nodes=300,
                                                     replace=True))
    _put(out, "full", weighted_neighbor_choice(indptr, eids, prob, tr[:20], -1, seed=13, step=0, num_nodes=300))
    _put(out, "perm_f30", weighted_neighbor_choice(indptr, eids, prob, G["perm"][:60], 30, seed=14, step=1,
                                                   num_nodes=300))


def fam_choose_neighbors(G, out):
    from dgl_accel.sampling import choose_neighbors

    indptr, _, _ = _csc(G["g"])
    tr = torch.arange(1, 300, 2)
    _put(out, "f6", choose_neighbors(indptr, tr, 6, seed=21, step=0, num_nodes=300))
    _put(out, "f9_replace", choose_neighbors(indptr, tr, 9, seed=22, step=4, num_nodes=300, replace=True))
    _put(out, "full", choose_neighbors(indptr, tr[:20], -1, seed=23, step=0, num_nodes=300))


def fam_group_by_transit_classify(G, out):
    from dgl_accel.sampling import classify, group_by_transit

    rng = np.random.default_rng(9)
    tos = torch.from_numpy(rng.integers(0, 50, 400))
    gr = group_by_transit(tos)
    out["group/transits"], out["group/ptr"], out["group/order"] = _t(gr.transits), _t(gr.ptr), _t(gr.order)
    out["group/counts"] = _t(gr.counts)
    work = torch.from_numpy(rng.integers(0, 3000, 500))
    _put(out, "classify_default", classify(work))
    _put(out, "classify_custom", classify(work, 8, 256))


def fam_frontier_sample(G, out):
    from dgl_accel.sampling import frontier_sample

    g, sym = G["g"], G["sym"]
    _put(out, "scalar", frontier_sample(g, 5, 60, num_instances=3, seed=3))
    # > 16 instances: the loop vectorised over instances
    _put(out, "vector", frontier_sample(g, 8, 100, num_instances=20, eta=1.5, degree_clip=5, seed=4))
    _put(out, "max_steps", frontier_sample(g, 4, 200, num_instances=2, max_steps=30, seed=5))
    _put(out, "sym", frontier_sample(sym, 10, 150, num_instances=4, eta=1.1, seed=6))
    _put(out, "int32", frontier_sample(G["g32"], 5, 60, num_instances=2, seed=7))


def fam_frontier_sample_sequential(G, out):
    from dgl_accel.sampling import frontier_sample_sequential

    g = G["g"]
    _put(out, "plain", frontier_sample_sequential(g, 5, 60, num_instances=3, seed=3))
    _put(out, "clip_steps", frontier_sample_sequential(g, 6, 120, num_instances=2, degree_clip=4, max_steps=80, seed=4))
    _put(out, "sym", frontier_sample_sequential(G["sym"], 10, 150, num_instances=2, seed=5))


def fam_khop_sample(G, out):
    from dgl_accel.sampling import khop_sample

    g, perm = G["g"], G["perm"]
    _put(out, "plain", khop_sample(g, perm[:100], [5, 3], seed=1))
    _put(out, "replace", khop_sample(g, perm[:100], [4, 4], replace=True, seed=2))
    _put(out, "unique", khop_sample(g, torch.tensor([0, 5, 5, 9, 31, 299]), [6, 3, 2], unique=True, seed=3))
    _put(out, "per_sample", khop_sample(g, perm[:50], [3, 2], unique=True, seed=4).per_sample())
    _put(out, "int32", khop_sample(G["g32"], perm[:80].int(), [5, 3], seed=5))


def _put_shadow(out: dict, key: str, res) -> None:
    """(input_nodes, output_nodes, sg) of a shaDow sampler: the subgraph as ``_put_subgraph``, and
    for per-target output its subgraph index and target flags per node and its batch sizes."""
    from dgl_accel.sampling.shadow import GRAPH_ID, IS_TARGET

    input_nodes, output_nodes, sg = res
    out[f"{key}/input_nodes"], out[f"{key}/output_nodes"] = _t(input_nodes), _t(output_nodes)
    _put_subgraph(out, key, sg)
    if GRAPH_ID in sg.ndata:
        out[f"{key}/graph_id"], out[f"{key}/is_target"] = _t(sg.ndata[GRAPH_ID]), _t(sg.ndata[IS_TARGET])
        out[f"{key}/batch_num_nodes"], out[f"{key}/batch_num_edges"] = _t(sg.batch_num_nodes()), _t(sg.batch_num_edges())


def fam_shadow_khop_sampler(G, out):
    from dgl_accel.sampling import ShaDowKHopSampler

    g, sym, perm = G["g"], G["sym"], G["perm"]
    a, b = _small()
    s = ShaDowKHopSampler([4, 3], seed=1)  # merged (DGL's output); two calls: the call counter advances the seed
    _put_shadow(out, "merged/call0", s.sample(g, a))
    _put_shadow(out, "merged/call1", s.sample(g, b))
    _put_shadow(out, "merged_sym", ShaDowKHopSampler([3, 2], seed=2).sample(sym, perm[:15]))  # half-CSR path
    _put_shadow(out, "merged_prob", ShaDowKHopSampler([3, 3], prob="prob", seed=3).sample(g, a))
    _put_shadow(out, "merged_replace_excl", ShaDowKHopSampler([4, 2], replace=True, seed=4).sample(
        g, b, exclude_eids=torch.arange(0, 3000, 5)))
    # per target: 100 scopes of up to 21-25 nodes (the compiled loops), on the CSC and half-CSR paths
    _put_shadow(out, "per_target", ShaDowKHopSampler([4, 4], per_target=True, seed=5).sample(g, perm[:100]))
    _put_shadow(out, "per_target_sym", ShaDowKHopSampler([4, 4], per_target=True, seed=6).sample(sym, perm[:100]))
    _put_shadow(out, "per_target_replace_full", ShaDowKHopSampler([-1, 3], replace=True, per_target=True,
                                                                  seed=7).sample(g, a))
    _put_shadow(out, "per_target_int32", ShaDowKHopSampler([4, 4], per_target=True, seed=8).sample(
        G["g32"], perm[:80].int()))


def fam_shadow_ppr_sampler(G, out):
    from dgl_accel.sampling import ShaDowPPRSampler

    g, sym, perm = G["g"], G["sym"], G["perm"]
    _put_shadow(out, "sym_top16", ShaDowPPRSampler(topk=16, cache=False).sample(sym, perm[:60]))
    cached = ShaDowPPRSampler(topk=16)  # the table: first call computes, second serves (same sets)
    cached.sample(sym, perm[:30])
    _put_shadow(out, "sym_top16_cached", cached.sample(sym, perm[:60]))
    _put_shadow(out, "g_top8_eps", ShaDowPPRSampler(topk=8, alpha=0.25, eps=1e-4, cache=False).sample(g, perm[:100]))
    _put_shadow(out, "sym_threshold", ShaDowPPRSampler(topk=30, threshold=1e-3, cache=False).sample(sym, perm[:20]))


# ---------------------------------------------------------- triton (interpreter) families, 60 nodes
def tri_neighbor_sampler(G, out):
    from dgl_accel.sampling import NeighborSampler

    g = G["tiny"]
    seeds = torch.arange(0, 60, 3)
    _put_blocks(out, "uniform", NeighborSampler([4, 3], seed=11).sample_blocks(g, seeds))
    _put_blocks(out, "replace", NeighborSampler([3, 3], replace=True, seed=12).sample_blocks(g, seeds))


def tri_bulk_neighbor_sampler(G, out):
    from dgl_accel.sampling import BulkNeighborSampler

    batches = [torch.arange(0, 60, 3), torch.arange(1, 60, 5)]
    for j, r in enumerate(BulkNeighborSampler([3, 2], bulk=2, seed=5).bulk_sample(G["tiny"], batches)):
        _put_blocks(out, f"bulk/batch{j}", r)


def tri_ladies_sampler(G, out):
    from dgl_accel.sampling import LADIESSampler

    batches = [torch.arange(0, 60, 4), torch.arange(1, 60, 6)]
    for j, r in enumerate(LADIESSampler([12, 8], bulk=2, seed=3).bulk.bulk_sample(G["tiny"], batches)):
        _put_blocks(out, f"bulk/batch{j}", r, "w")


def tri_random_walk(G, out):
    from dgl_accel.sampling import random_walk

    g = G["tiny"]
    nodes = torch.arange(0, 60, 2)
    _put(out, "uniform", random_walk(g, nodes, length=5, seed=1, return_eids=True))
    _put(out, "prob_restart", random_walk(g, nodes, length=5, prob="prob", restart_prob=0.2, seed=2, return_eids=True))


def tri_node2vec_random_walk(G, out):
    from dgl_accel.sampling import node2vec_random_walk

    g = G["tiny"]
    nodes = torch.arange(0, 60, 2)
    _put(out, "uniform", node2vec_random_walk(g, nodes, 0.5, 2.0, 4, seed=1, return_eids=True))
    _put(out, "prob", node2vec_random_walk(g, nodes, 2.0, 0.5, 4, prob="prob", seed=2))


def tri_multi_dimensional_random_walk(G, out):
    from dgl_accel.sampling import multi_dimensional_random_walk

    _put(out, "int_roots", multi_dimensional_random_walk(G["tiny"], 3, 15, num_instances=2, seed=1))


def tri_choose_neighbors(G, out):
    from dgl_accel.sampling import choose_neighbors

    indptr, _, _ = _csc(G["tiny"])
    tr = torch.arange(0, 60, 2)
    _put(out, "f4", choose_neighbors(indptr, tr, 4, seed=21, step=0, num_nodes=60))
    _put(out, "f5_replace", choose_neighbors(indptr, tr, 5, seed=22, step=2, num_nodes=60, replace=True))


def tri_khop_sample(G, out):
    from dgl_accel.sampling import khop_sample

    _put(out, "unique", khop_sample(G["tiny"], torch.tensor([0, 5, 5, 9, 31]), [3, 2], unique=True, seed=7))


def tri_frontier_sample(G, out):
    from dgl_accel.sampling import frontier_sample

    _put(out, "plain", frontier_sample(G["tiny"], 3, 12, num_instances=3, seed=7))


def tri_saint_frontier(G, out):
    from dgl_accel.sampling import SAINTSampler

    _put_subgraph(out, "call0", SAINTSampler("frontier", (3, 15), seed=2).sample(G["tiny"]))


def tri_shadow_khop_sampler(G, out):
    from dgl_accel.sampling import ShaDowKHopSampler

    seeds = torch.arange(0, 60, 3)
    _put_shadow(out, "per_target", ShaDowKHopSampler([3, 2], per_target=True, seed=9).sample(G["tiny"], seeds))


def tri_shadow_ppr_sampler(G, out):
    from dgl_accel.sampling import ShaDowPPRSampler

    seeds = torch.arange(0, 60, 4)
    _put_shadow(out, "top6", ShaDowPPRSampler(topk=6, eps=1e-3, cache=False).sample(G["tiny"], seeds))


FAMILIES = {
    "native": {name[4:]: fn for name, fn in globals().items() if name.startswith("fam_")},
    "triton": {name[4:]: fn for name, fn in globals().items() if name.startswith("tri_")},
}
FAMILIES["numba_off"] = FAMILIES["native"]


def cases():
    """(mode, family) pairs, in a fixed order."""
    return [(mode, fam) for mode in MODES for fam in FAMILIES[mode]]


# ------------------------------------------------------------------------------------ running
def run_family(mode: str, family: str, paths: dict | None = None) -> dict:
    """The tensors of one family, keyed ``mode/family/...``, under the mode's backend.  ``paths``
    (optional) gets ``paths[family]`` = the sorted path labels of ``dgl_accel.stats()`` that the
    calls recorded (e.g. ``triton-interpreter``), where the package still has ``stats``."""
    import dgl_accel

    out: dict = {}
    has_stats = callable(getattr(dgl_accel, "stats", None)) and callable(getattr(dgl_accel, "reset_stats", None))
    if has_stats:
        dgl_accel.reset_stats()
    with dgl_accel.use_backend(MODE_BACKEND[mode]):
        FAMILIES[mode][family](graphs(), out)
    if paths is not None and has_stats:
        paths[family] = sorted({label for per_op in dgl_accel.stats().values() for label in per_op})
    for k, v in out.items():
        assert isinstance(v, torch.Tensor), k
        if v.is_floating_point():
            assert not torch.isnan(v).any(), f"{k}: NaN in a recorded output"
    return {f"{mode}/{family}/{k}": v for k, v in out.items()}


def env_matches(mode: str) -> bool:
    """Whether this process's import-time environment is the mode's (DGL_ACCEL_NUMBA is read at
    import; the backend is set per call with use_backend)."""
    numba_off = os.environ.get("DGL_ACCEL_NUMBA", "1") == "0"
    if mode == "triton":
        return os.environ.get("DGL_ACCEL_BACKEND") == "triton" and not numba_off
    return numba_off == (mode == "numba_off")


def package_root() -> Path:
    """Directory holding the imported ``dgl_accel`` (and, via the mapping, its kernels)."""
    import dgl_accel

    return Path(dgl_accel.__file__).resolve().parent.parent


def _check_root(expect: Path) -> None:
    """``dgl_accel`` imported from ``expect``, and so is ``dgl_accel.kernels`` (an editable install
    maps that name to its own checkout's kernels/, whatever PYTHONPATH says) where it exists."""
    import dgl_accel

    root = package_root()
    try:
        import dgl_accel.kernels as kernels
        kfile = kernels.__file__
    except ImportError:  # a layout without that package
        kfile = None
    kroot = root if kfile is None else Path(kfile).resolve().parent.parent
    if root != expect.resolve() or kroot != root:
        raise RuntimeError(f"imported dgl_accel from {dgl_accel.__file__} and dgl_accel.kernels from "
                           f"{kfile}, expected both under {expect}")


def run_mode(mode: str, families=None, keep_going: bool = False):
    """({key: tensor}, {family: traceback}, {family: path labels}) of the mode's families, in this
    process."""
    if not env_matches(mode):
        raise RuntimeError(f"mode {mode!r} needs the environment {MODE_ENV[mode]} at import")
    tensors, errors, paths = {}, {}, {}
    for fam in (FAMILIES[mode] if families is None else families):
        try:
            tensors.update(run_family(mode, fam, paths))
        except Exception:
            if not keep_going:
                raise
            errors[fam] = traceback.format_exc()
    return tensors, errors, paths


def subprocess_env(mode: str, root: Path) -> dict:
    env = dict(os.environ)
    env.update(MODE_ENV[mode])
    env["DGLBACKEND"] = "pytorch"
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def start_mode_subprocess(mode: str, out_path: Path, root: Path, keep_going: bool = True) -> subprocess.Popen:
    """Run ``mode`` in a fresh interpreter with its environment, importing ``dgl_accel`` from ``root``;
    it saves {"tensors": ..., "errors": ..., "paths": ...} to ``out_path``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--mode", mode, "--out", str(out_path),
           "--expect-root", str(root)]
    if keep_going:
        cmd.append("--keep-going")
    return subprocess.Popen(cmd, env=subprocess_env(mode, root), cwd=str(root), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish_mode_subprocess(proc: subprocess.Popen, out_path: Path):
    log, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"recorder subprocess failed (exit {proc.returncode}):\n{log[-6000:]}")
    res = torch.load(out_path, weights_only=False)  # our own file: holds str lists besides tensors
    return res["tensors"], res["errors"], res["paths"], log


def golden_key(golden: dict, key: str) -> str:
    """Where ``key`` is stored: a ``numba_off/...`` tensor bit-identical to its ``native/...`` twin
    (all of them, when recorded) is stored once, under the native key."""
    if key.startswith("numba_off/") and key not in golden:
        return "native/" + key[len("numba_off/"):]
    return key


def record_all(root: Path) -> dict:
    """Every mode in its own subprocess; the merged dict.  ``numba_off`` tensors identical to their
    ``native`` twin are not stored again (see :func:`golden_key`)."""
    merged = {}
    with tempfile.TemporaryDirectory() as d:
        procs = {m: start_mode_subprocess(m, Path(d) / f"{m}.pt", root, keep_going=False) for m in MODES}
        for m in MODES:
            tensors, errors, paths, log = finish_mode_subprocess(procs[m], Path(d) / f"{m}.pt")
            assert not errors, errors
            sys.stderr.write(log)
            sys.stderr.write(f"[{m}] paths: {paths}\n")
            merged.update(tensors)
    shared = 0
    for k in list(merged):
        if k.startswith("numba_off/"):
            twin = merged.get("native/" + k[len("numba_off/"):])
            if twin is not None and same_bits(twin, merged[k]):
                del merged[k]
                shared += 1
    sys.stderr.write(f"{len(merged)} tensors stored; {shared} numba_off tensors identical to native "
                     f"(stored once)\n")
    return dict(sorted(merged.items()))


def add_new_families(path: Path, root: Path) -> list[str]:
    """Record every mode and add to the golden file at ``path`` the tensors of the (mode, family)
    pairs it has none of; the stored tensors are kept as they are.  Returns the added families."""
    old = torch.load(path, weights_only=True)
    have = {"/".join(k.split("/")[:2]) for k in old}
    have |= {"numba_off/" + f.split("/", 1)[1] for f in have if f.startswith("native/")}
    new = {k: v for k, v in record_all(root).items() if "/".join(k.split("/")[:2]) not in have}
    torch.save(dict(sorted({**old, **new}.items())), path)
    return sorted({"/".join(k.split("/")[:2]) for k in new})


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bits (floats compared as their integer bit patterns)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))
    return torch.equal(a, b)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", type=Path, help="record every mode (subprocesses) into this file")
    ap.add_argument("--add-new", type=Path, help="add the families this golden file lacks (keeps the rest)")
    ap.add_argument("--mode", choices=MODES, help="run one mode in this process (needs its environment)")
    ap.add_argument("--out", type=Path, help="with --mode: where to save {'tensors', 'errors', 'paths'}")
    ap.add_argument("--expect-root", type=Path, help="fail unless dgl_accel is imported from this directory")
    ap.add_argument("--keep-going", action="store_true", help="with --mode: record a family's error and go on")
    args = ap.parse_args(argv)
    if args.mode:
        if args.expect_root is not None:
            _check_root(args.expect_root)
        import dgl_accel

        print(f"[{args.mode}] dgl_accel from {dgl_accel.__file__}", flush=True)
        tensors, errors, paths = run_mode(args.mode, keep_going=args.keep_going)
        if args.expect_root is not None:
            _check_root(args.expect_root)  # also after the run: lazily imported kernels
        torch.save({"tensors": tensors, "errors": errors, "paths": paths}, args.out)
        return 0
    if args.add_new:
        root = package_root()
        _check_root(root)
        print(f"added {add_new_families(args.add_new, root)} to {args.add_new}")
        return 0
    if args.write:
        root = package_root()
        _check_root(root)
        import dgl_accel

        print(f"recording against dgl_accel from {dgl_accel.__file__}", flush=True)
        torch.save(record_all(root), args.write)
        print(f"wrote {args.write} ({args.write.stat().st_size} bytes)")
        return 0
    ap.error("pass --write FILE or --mode MODE --out FILE")


if __name__ == "__main__":
    sys.exit(main())
