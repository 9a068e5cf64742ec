"""GraphACT's redundancy-reducing rewrite: greedy pair matching, then the graph rewrite, per round.

One round on the current graph (targets = the original destination nodes, sources = the original
sources plus the pair nodes of earlier rounds):

1. count every unordered source pair shared by >= theta targets (:mod:`.pairs`);
2. greedy matching: walk the pairs heaviest first (ties: smaller ids first) and take a pair when
   neither source was taken this round, until ``max_pair_nodes`` pair nodes exist in total;
3. rewrite: each taken pair (a, b) becomes a pair node p = x_a + x_b, and every target with both
   a and b in its neighbourhood loses one a-edge and one b-edge and gains one p-edge.

Pair nodes of round r are new sources, so round r+1 can pair them again (sums of 3 or 4 inputs).

The greedy matching is computed without a Python loop over pairs.  Under a strict total order on
the pairs, sequential greedy matching equals the "locally dominant" matching: repeatedly take
every pair that is the best remaining pair of both its endpoints, then drop pairs that touch a
taken vertex.  Each pass is a few numpy operations on the remaining pairs and at least the best
remaining pair is taken per pass, so it ends; in practice after a handful of passes.  The first
K pairs that sequential greedy takes are the K best pairs of its matching, so the pair-node
budget is applied afterwards by keeping the best K.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..aggregation.views import TensorGraph
from .pairs import DEFAULT_WORK_BUDGET, count_shared_pairs
from .plan import RedundancyPlan, RoundStats

__all__ = ["greedy_match", "rewrite_round", "reduce_edges"]


def greedy_match(u: np.ndarray, w: np.ndarray, count: np.ndarray, num_vertices: int,
                 limit: int | None = None) -> np.ndarray:
    """Indices into (u, w, count) of the greedy matching, heaviest first (at most ``limit``)."""
    if u.size == 0 or (limit is not None and limit <= 0):
        return np.zeros(0, dtype=np.int64)
    # rank 0 = heaviest; ties by (u, w): a strict total order.  One int64 key sorts ~3x faster
    # than lexsort on three keys; fall back when it could overflow.
    top = int(count.max())
    if (top + 1) * num_vertices * num_vertices < 2**62:
        order = np.argsort((top - count) * (num_vertices * num_vertices) + u * num_vertices + w)
    else:
        order = np.lexsort((w, u, -count))
    au, aw, ar = u[order], w[order], np.arange(order.size, dtype=np.int64)
    taken_vertex = np.zeros(num_vertices, dtype=bool)
    best = np.empty(num_vertices, dtype=np.int64)
    chosen = []
    while ar.size:
        # Best remaining rank at each endpoint: the alive pairs are in rank order, so writing the
        # interleaved endpoint list backwards leaves each vertex's smallest rank (numpy assigns
        # repeated indices in order, the last write wins).
        ends = np.stack([au, aw], 1).ravel()
        ranks = np.repeat(ar, 2)
        best[ends[::-1]] = ranks[::-1]
        win = (best[au] == ar) & (best[aw] == ar)
        chosen.append(ar[win])
        taken_vertex[au[win]] = True
        taken_vertex[aw[win]] = True
        alive = ~(taken_vertex[au] | taken_vertex[aw])
        au, aw, ar = au[alive], aw[alive], ar[alive]
    ranks = np.sort(np.concatenate(chosen))
    if limit is not None:
        ranks = ranks[:limit]
    return order[ranks]


def rewrite_round(dst: np.ndarray, src: np.ndarray, pa: np.ndarray, pb: np.ndarray, first_id: int):
    """Rewrite edges (src -> dst) for the disjoint pairs (pa[i], pb[i]) -> pair node first_id + i.

    Returns (dst', src', rewritten targets per pair).  For each target having both pa[i] and pb[i]
    one edge of each is dropped (the first in edge order; the rest of a multi-edge stays) and one
    edge from the pair node is added.
    """
    num_pairs = pa.size
    if num_pairs == 0 or dst.size == 0:
        return dst, src, np.zeros(num_pairs, dtype=np.int64)
    n_ext = first_id  # pair node ids start after every existing source
    pid = np.full(n_ext, -1, dtype=np.int64)
    side = np.zeros(n_ext, dtype=np.int64)
    pid[pa], pid[pb] = np.arange(num_pairs), np.arange(num_pairs)
    side[pb] = 1
    hit = np.flatnonzero(pid[src] >= 0)
    key = (dst[hit] * num_pairs + pid[src[hit]]) * 2 + side[src[hit]]
    uniq, first = np.unique(key, return_index=True)  # first edge of each (target, pair, side)
    both = np.flatnonzero((uniq[:-1] >> 1) == (uniq[1:] >> 1))  # sorted: side 0 then side 1
    drop = np.concatenate([hit[first[both]], hit[first[both + 1]]])
    keys = uniq[both] >> 1
    new_dst, new_pid = keys // num_pairs, keys % num_pairs
    keep = np.ones(dst.size, dtype=bool)
    keep[drop] = False
    dst2 = np.concatenate([dst[keep], new_dst])
    src2 = np.concatenate([src[keep], first_id + new_pid])
    return dst2, src2, np.bincount(new_pid, minlength=num_pairs)


def _check_options(theta, max_pair_nodes, rounds) -> None:
    for name, value, low in (("theta", theta, 2), ("rounds", rounds, 0)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"expected {name} to be an int >= {low} (got {value!r}). "
                             f"Fix: e.g. {name}={max(low, 2) if name == 'theta' else 3}.")
    if max_pair_nodes is not None and (not isinstance(max_pair_nodes, (int, np.integer))
                                       or isinstance(max_pair_nodes, bool) or max_pair_nodes < 0):
        raise ValueError(f"expected max_pair_nodes to be None or an int >= 0 (got {max_pair_nodes!r}).")


def reduce_edges(src: torch.Tensor, dst: torch.Tensor, num_src: int, num_dst: int, *, theta: int = 2,
                 max_pair_nodes: int | None = None, rounds: int = 3,
                 work_budget: int = DEFAULT_WORK_BUDGET, make_views=None) -> RedundancyPlan:
    """GraphACT's redundancy-reduced aggregation plan of the edges ``src[e] -> dst[e]`` (edge-id
    order, any device; the rewrite runs on the host) over ``num_src`` sources and ``num_dst``
    targets.  ``theta`` (>= 2): least number of targets a pair must be shared by;
    ``max_pair_nodes``: budget on pair nodes over all rounds (None: unlimited); ``rounds``:
    matching/rewrite rounds (a round that finds no pair ends the loop early); ``work_budget``:
    multiply-adds allowed for one round's pair count (see :mod:`.pairs`); ``make_views``: see
    :class:`~.plan.RedundancyPlan`.  The inputs are not modified.

    >>> plan = reduce_edges(torch.tensor([0, 1, 0, 1]), torch.tensor([0, 0, 1, 1]), 2, 2)
    >>> plan.num_pair_nodes, plan.num_edges_rewritten, plan.gamma_read
    (1, 2, 1.0)
    """
    _check_options(theta, max_pair_nodes, rounds)
    t0 = time.perf_counter()
    src, dst = src.cpu().numpy().astype(np.int64), dst.cpu().numpy().astype(np.int64)
    num_edges = int(src.size)
    in_deg = torch.from_numpy(np.bincount(dst, minlength=num_dst).astype(np.int64))
    out_deg = torch.from_numpy(np.bincount(src, minlength=num_src).astype(np.int64))
    all_a, all_b, all_c, bounds, round_stats = [], [], [], [0], []
    next_id, budget = num_src, max_pair_nodes
    for _ in range(int(rounds)):
        if budget is not None and budget <= 0:
            break
        pc = count_shared_pairs(dst, src, num_dst, next_id, int(theta), work_budget)
        sel = greedy_match(pc.u, pc.w, pc.count, next_id, budget)
        if sel.size == 0:
            break
        pa, pb = pc.u[sel], pc.w[sel]
        dst, src, rewritten = rewrite_round(dst, src, pa, pb, next_id)
        # The counts say how many targets hold both ends; the rewrite must have found exactly those.
        assert np.array_equal(rewritten, pc.count[sel]), "pair counts and rewrite disagree"
        all_a.append(pa)
        all_b.append(pb)
        all_c.append(rewritten)
        next_id += sel.size
        bounds.append(bounds[-1] + sel.size)
        round_stats.append(RoundStats(pairs=int(sel.size), candidate_pairs=int(pc.u.size),
                                      candidate_sources=pc.candidates, restricted=pc.restricted))
        if budget is not None:
            budget -= sel.size

    def cat(xs):
        return np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)

    order = np.lexsort((src, dst))  # CSR-friendly edge order for the rewritten graph
    rewritten = TensorGraph(torch.from_numpy(src[order]), torch.from_numpy(dst[order]), num_src=next_id,
                            num_dst=num_dst)
    return RedundancyPlan(num_src=num_src, num_dst=num_dst, num_edges=num_edges,
                          pair_a=torch.from_numpy(cat(all_a)), pair_b=torch.from_numpy(cat(all_b)),
                          pair_count=torch.from_numpy(cat(all_c)), round_bounds=tuple(bounds),
                          rewritten=rewritten, in_degrees=in_deg, out_degrees=out_deg,
                          theta=int(theta), rounds=tuple(round_stats),
                          transform_seconds=time.perf_counter() - t0, make_views=make_views)
