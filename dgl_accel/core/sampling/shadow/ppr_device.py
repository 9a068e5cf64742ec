"""PPR push and top-K selection on the CSR's device for many targets at once (family ``shadow``): the
estimates and sets of the CPU reference (:func:`.ppr.ppr_push_np`, :func:`.ppr.ppr_topk_np`) bit for
bit, with work proportional to the pushed entries, not to the graph.

A group of targets shares flat residual and estimate rows ``r``, ``p`` (float64 [g * n], key
``t * n + v``; zeroed once per group, never scanned).  Each synchronous round, as the reference:
the active keys (increasing, so by target, then node) move ``alpha * r`` to ``p`` and zero ``r``;
their CSR rows give the contributions ``(key, r * (1 - alpha) / deg)`` in (pusher, entry) order; a
stable sort by key makes each receiving key's contributions one segment in that order, which
``_ppr_spread_kernel`` adds sequentially (:mod:`.launchers`); the next active keys are the
received ones at or above ``eps * max(deg, 1)``.  The selection sorts the positive estimates by
(target, score descending, node) and keeps each target's best ``topk - 1`` beside the target.

Host reads: :data:`HOST_READS_PER_ROUND` per round (the pushed entries, the receiving keys, the
next active keys) and :data:`HOST_READS_PER_GROUP` per group of targets (the positive estimates,
the candidates, the chosen).  Memory: 16 bytes x n per target of a group, groups bounded by
:data:`WORKSPACE_BYTES`.  This module imports no numpy (an import-linter contract).
"""
from __future__ import annotations

import torch

from ...csr import row_positions
from ..arrays import index_counts
from .launchers import ppr_spread_triton

__all__ = ["ppr_topk_device", "HOST_READS_PER_ROUND", "HOST_READS_PER_GROUP", "WORKSPACE_BYTES"]

HOST_READS_PER_ROUND = 3
HOST_READS_PER_GROUP = 3
WORKSPACE_BYTES = 1 << 31  # r and p rows of a group: 16 bytes x n per target


def _push(indptr, indices, deg, thr, targets, n: int, alpha: float, keep: float):
    """(estimates p float64 [g * n], rounds) of the targets of one group."""
    g = targets.numel()
    r = torch.zeros(g * n, dtype=torch.float64, device=indptr.device)
    p = torch.zeros_like(r)
    ak = torch.arange(g, device=indptr.device) * n + targets
    r[ak] = 1.0
    rounds = 0
    while ak.numel():
        rounds += 1
        a = r[ak]
        r[ak] = 0.0
        p[ak] = p[ak] + alpha * a
        v = torch.remainder(ak, n)
        share = a * keep / deg[v].to(torch.float64)  # the reference's order: (a * keep) / deg; deg 0: no entries
        pos, cnt = row_positions(indptr, v)  # read: the pushed entries
        ck = torch.repeat_interleave(ak - v, cnt, output_size=pos.numel()) + indices[pos]
        cv = torch.repeat_interleave(share, cnt, output_size=pos.numel())
        ck, order = torch.sort(ck, stable=True)  # by key, each key's contributions in (pusher, entry) order
        keys, per_key = torch.unique_consecutive(ck, return_counts=True)  # read: the receiving keys
        seg = torch.zeros(keys.numel() + 1, dtype=torch.int64, device=indptr.device)
        torch.cumsum(per_key, 0, out=seg[1:])
        ppr_spread_triton(r, keys, seg, cv[order])
        ak = keys[r[keys] >= thr[torch.remainder(keys, n)]]  # read: the next active keys
    return p, rounds


def _select(p, targets, n: int, topk: int, threshold: float):
    """(nodes [g, topk] -1 padded, scores [g, topk], counts [g]) of one group's estimates."""
    dev, g = p.device, targets.numel()
    keys = torch.nonzero(p > 0).flatten()  # read: the positive estimates
    t, v, score = torch.div(keys, n, rounding_mode="floor"), torch.remainder(keys, n), p[keys]
    ok = torch.nonzero((v != targets[t]) & (score >= threshold)).flatten()  # read: the candidates
    keys, t, score = keys[ok], t[ok], score[ok]
    order = torch.sort(-score, stable=True).indices  # score descending; equal: smaller key (node) first
    order = order[torch.sort(t[order], stable=True).indices]  # then by target
    ts = t[order]
    rank = torch.arange(ts.numel(), device=dev) - torch.searchsorted(ts, ts)
    best = keys[order[torch.nonzero(rank < topk - 1).flatten()]]  # read: the chosen
    chosen = torch.sort(torch.cat([torch.arange(g, device=dev) * n + targets, best])).values
    ct = torch.div(chosen, n, rounding_mode="floor")
    counts = index_counts(ct, g)
    slot = torch.arange(chosen.numel(), device=dev) - (torch.cumsum(counts, 0) - counts)[ct]
    nodes = torch.full((g, topk), -1, dtype=torch.int64, device=dev)
    scores = torch.zeros((g, topk), dtype=torch.float64, device=dev)
    nodes[ct, slot] = torch.remainder(chosen, n)
    scores[ct, slot] = p[chosen]
    return nodes, scores, counts


def ppr_topk_device(indptr: torch.Tensor, indices: torch.Tensor, targets: torch.Tensor, alpha: float, eps: float,
                    topk: int, threshold: float):
    """:func:`.ppr.ppr_topk_np`'s ``(nodes [T, topk] -1 padded, scores float64, counts)`` for checked
    arguments, as int64 / float64 tensors on the CSR's device, and the number of push rounds run."""
    dev = indptr.device
    n = indptr.numel() - 1
    indptr = indptr.to(torch.int64)
    indices = indices.to(torch.int64)
    deg = indptr[1:] - indptr[:-1]
    thr = eps * deg.clamp(min=1).to(torch.float64)  # the reference's eps * max(deg, 1), one rounding
    targets = targets.to(device=dev, dtype=torch.int64)
    group = max(1, WORKSPACE_BYTES // max(16 * n, 1))
    parts, rounds = [], 0
    for a in range(0, targets.numel(), group):
        tg = targets[a:a + group]
        p, k = _push(indptr, indices, deg, thr, tg, n, float(alpha), 1.0 - float(alpha))
        rounds += k
        parts.append(_select(p, tg, n, topk, float(threshold)))
        del p
    if not parts:
        return (torch.empty((0, topk), dtype=torch.int64, device=dev),
                torch.empty((0, topk), dtype=torch.float64, device=dev), torch.empty(0, dtype=torch.int64, device=dev),
                0)
    return (*(torch.cat(x) for x in zip(*parts)), rounds)
