"""Random walks along a metapath: step ``s`` moves along the out-edges of relation ``s`` (one
:class:`~.random_walk.WalkCSR` per step), as ``dgl.sampling.random_walk(g, nodes, metapath=...)`` on a
heterograph.  DGL-free: the adapter (``dgl_accel.sampling.random_walk``) hands one CSR view per
relation of the metapath.

A relation from node type A to node type B is a CSR with one row per A node and B ids as
indices; :func:`relation_csr` pads it to a square table (``max(|A|, |B|)`` rows, the extra rows
empty) so that :class:`~.random_walk.WalkCSR`'s per-row sort and weight tables apply unchanged.

Random numbers follow :func:`.random_walk.random_walk`'s layout exactly (step ``s`` of walk ``i`` uses
word ``s * K`` of Philox block ``(i << 32) | (s * K) // 4``, K = 2 with a restart probability), so a
metapath that repeats one relation gives the same traces as :func:`.random_walk.random_walk` on that
relation with the same seed (``tests/sampling/test_walks.py`` checks it).

>>> from dgl_accel.core.csr import Structure
>>> ab = relation_csr(torch.tensor([0, 1, 2]), torch.tensor([0, 2]), torch.tensor([0, 1]), 2, 3)
>>> ba = relation_csr(torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0]), torch.tensor([0, 1]), 3, 2)
>>> metapath_walk([ab, ba], torch.tensor([0, 1]), 2, seed=0)[0].tolist()
[[0, 0, 1], [1, 2, 0]]
"""
from __future__ import annotations

import torch

from ...csr import Structure
from ..arrays import OneThread
from ..checks import expected, node_ids, resolve_seed, restart_probs
from .random_walk import TWO32, WalkCSR, edge_weights, walk_chunk

__all__ = ["relation_csr", "metapath_walk", "check_chain"]

CHUNK = 1 << 17  # walks per chunk, as random_walk's


def relation_csr(indptr: torch.Tensor, indices: torch.Tensor, eids: torch.Tensor, num_src: int,
                 num_dst: int) -> WalkCSR:
    """The :class:`~.random_walk.WalkCSR` of a relation's out-edges (``indptr`` over the ``num_src``
    source nodes, destination ids in ``indices`` below ``num_dst``), square-padded."""
    n = max(int(num_src), int(num_dst))
    indptr = indptr.to(torch.int64)
    if n > num_src:
        indptr = torch.cat([indptr, indptr[-1:].expand(n - num_src)])
    s = Structure(indptr=indptr, indices=indices, eids=eids, num_rows=n, num_cols=n, device=indptr.device)
    return WalkCSR(s)


def metapath_walk(steps: list, nodes, num_start_nodes: int, *, weights: list | None = None, restart_prob=None,
                  seed=None, return_eids: bool = False):
    """Walks that take step ``s`` along ``steps[s]`` (a :class:`~.random_walk.WalkCSR`, e.g. from
    :func:`relation_csr`), one walk per entry of ``nodes`` (ids below ``num_start_nodes``, the node
    count of the first relation's source type).

    weights : per step, one non-negative weight per edge of that relation, or None (uniform).
    restart_prob : float or tensor [len(steps)], checked before each transition (DGL's semantics).

    Returns ``(traces, eids)``: int64 [len(nodes), len(steps) + 1] node ids (each in its step's
    node type), -1 after a walk stops (dead end, zero-weight row or restart), and int64
    [len(nodes), len(steps)] edge ids of each step's relation (None unless ``return_eids``).
    Runs where the CSR views are (torch ops; the CPU or a GPU).
    """
    length = len(steps)
    device = steps[0].deg.device if length else torch.device("cpu")
    nodes = node_ids(nodes, num_start_nodes, "nodes", max_count=2**31)
    rp = restart_probs(restart_prob, length)
    seed = resolve_seed(seed)
    weights = [None] * length if weights is None else list(weights)
    if len(weights) != length:
        raise expected(f"{length} weight entries (one per step)", len(weights), "pass one tensor or None per step.")
    wts = [edge_weights(c, w) for c, w in zip(steps, weights)]
    degs = [c.deg if wt is None else wt.deg for c, wt in zip(steps, wts)]
    thresh = None if rp is None else (rp * TWO32).ceil().to(torch.int64).tolist()
    W = nodes.numel()
    traces = torch.full((W, length + 1), -1, dtype=torch.int64, device=device)
    eids = torch.full((W, length), -1, dtype=torch.int64, device=device) if return_eids else None
    nodes = nodes.to(device)
    with OneThread(work=W):
        for lo in range(0, W, CHUNK):
            hi = min(W, lo + CHUNK)
            tr, ei = walk_chunk(steps, wts, degs, nodes[lo:hi], lo, thresh, seed, return_eids)
            traces[lo:hi] = tr.t()
            if return_eids:
                eids[lo:hi] = ei.t()
    return traces, eids


def check_chain(relations: list) -> None:
    """Raise unless consecutive relations chain (the destination type of step s is the source type
    of step s + 1); ``relations`` are canonical ``(src type, edge type, dst type)`` triples."""
    for s in range(1, len(relations)):
        prev, rel = relations[s - 1], relations[s]
        if prev[2] != rel[0]:
            raise expected(f"metapath step {s} to start at node type {prev[2]!r}, where step {s - 1} {prev} ends",
                           f"{rel}, from {rel[0]!r}",
                           "list edge types whose source type is the previous one's destination type.")
