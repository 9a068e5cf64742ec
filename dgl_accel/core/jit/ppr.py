"""Compiled twin of the approximate personalised PageRank push and its top-K selection
(:mod:`dgl_accel.core.sampling.shadow.ppr`, which states the algorithm): bit-identical to the numpy
reference (same synchronous rounds, active nodes in increasing id, residual contributions added in
(active node, CSR entry) order, no fused multiply-add), parallel over chunks of targets.

Each chunk owns one dense workspace of the graph's size (estimate, residual, flags) and resets
only the entries a target touched, so a target costs its own push work, not a pass over the graph.
"""
from __future__ import annotations

import numpy as np

from .runtime import pick, prange, twins

__all__ = ["ppr_topk"]


def _ppr_topk_impl(indptr, indices, targets, bounds, alpha, eps, topk, threshold, n, out_nodes, out_scores,
                   counts):
    """For each target t (chunks ``bounds[c]:bounds[c+1]`` in parallel): the push, then the target
    plus the best ``topk - 1`` other nodes (score descending, ties by smaller id, score >=
    ``threshold``) in increasing id into row t of ``out_nodes`` / ``out_scores``; ``counts[t]``."""
    keep = 1.0 - alpha
    for c in prange(bounds.shape[0] - 1):
        p = np.zeros(n, dtype=np.float64)
        r = np.zeros(n, dtype=np.float64)
        seen = np.zeros(n, dtype=np.bool_)
        queued = np.zeros(n, dtype=np.bool_)
        touched = np.empty(n, dtype=np.int64)
        active = np.empty(n, dtype=np.int64)
        nxt = np.empty(n, dtype=np.int64)
        amt = np.empty(n, dtype=np.float64)
        for t in range(bounds[c], bounds[c + 1]):
            s = targets[t]
            r[s] = 1.0
            seen[s] = True
            touched[0] = s
            nt = 1
            active[0] = s
            na = 1
            while na > 0:
                active[:na].sort()
                for i in range(na):
                    u = active[i]
                    a = r[u]
                    amt[i] = a
                    r[u] = 0.0
                    p[u] += alpha * a
                nn = 0
                for i in range(na):
                    u = active[i]
                    d = indptr[u + 1] - indptr[u]
                    if d == 0:
                        continue
                    share = amt[i] * keep / d
                    for e in range(indptr[u], indptr[u + 1]):
                        v = indices[e]
                        if not seen[v]:
                            seen[v] = True
                            touched[nt] = v
                            nt += 1
                        r[v] += share
                        if not queued[v]:
                            queued[v] = True
                            nxt[nn] = v
                            nn += 1
                na = 0
                for i in range(nn):
                    v = nxt[i]
                    queued[v] = False
                    d = max(indptr[v + 1] - indptr[v], 1)
                    if r[v] >= eps * d:
                        active[na] = v
                        na += 1
            # candidates: every other node with a positive estimate (and >= threshold), by id
            cand = np.sort(touched[:nt])
            m = 0
            for i in range(nt):
                v = cand[i]
                if v != s and p[v] > 0.0 and p[v] >= threshold:
                    cand[m] = v
                    m += 1
            sc = np.empty(m, dtype=np.float64)
            for i in range(m):
                sc[i] = -p[cand[i]]
            order = np.argsort(sc, kind="mergesort")  # stable: equal scores stay in id order
            k = min(m, topk - 1)
            chosen = np.empty(k + 1, dtype=np.int64)
            chosen[0] = s
            for i in range(k):
                chosen[i + 1] = cand[order[i]]
            chosen.sort()
            for i in range(k + 1):
                out_nodes[t, i] = chosen[i]
                out_scores[t, i] = p[chosen[i]]
            counts[t] = k + 1
            for i in range(nt):
                v = touched[i]
                p[v] = 0.0
                r[v] = 0.0
                seen[v] = False


# parallel over chunks of targets (each writes its own rows: the twins are bit-identical); the
# serial twin in DataLoader workers
_ppr_topk_parallel, _ppr_topk_serial = twins(_ppr_topk_impl)


def ppr_topk(indptr: np.ndarray, indices: np.ndarray, targets: np.ndarray, alpha: float, eps: float, topk: int,
             threshold: float, chunks: int):
    """Compiled twin of :func:`dgl_accel.core.sampling.shadow.ppr.ppr_topk_np` (int64 CSR and targets):
    (nodes int64 [T, topk], scores float64 [T, topk], counts int64 [T]); row t's first counts[t]
    entries are its set in increasing id."""
    T = targets.shape[0]
    n = indptr.shape[0] - 1
    chunks = max(1, min(chunks, T))
    bounds = np.linspace(0, T, chunks + 1).astype(np.int64)
    out_nodes = np.full((T, topk), -1, dtype=np.int64)
    out_scores = np.zeros((T, topk), dtype=np.float64)
    counts = np.zeros(T, dtype=np.int64)
    run = pick(_ppr_topk_parallel, _ppr_topk_serial)
    run(indptr, indices, targets, bounds, np.float64(alpha), np.float64(eps), np.int64(topk), np.float64(threshold),
        np.int64(n), out_nodes, out_scores, counts)
    return out_nodes, out_scores, counts
