"""Approximate personalised PageRank by the push method, one push per target, and top-K node sets
(shaDow-GNN's PPR scope): the DGL-free maths of ``dgl_accel.sampling.ShaDowPPRSampler``.  Family
``shadow``: the device pipeline :mod:`.ppr_device` (many targets per round, work proportional to the
pushed entries; its kernel ``kernels/ppr.py``), compiled twin :mod:`dgl_accel.core.jit.ppr`
(parallel over targets), numpy reference here; all three give the same estimates bit for bit.

The walk.  On a CSR whose row ``u`` lists ``u``'s neighbours (``deg(u)`` = its row length), the
personalised PageRank of target ``s`` with teleport ``alpha`` is ``pi_s = alpha * sum_k ((1 - alpha)
P)^k e_s``, ``P`` moving the mass of ``u`` evenly to its neighbours (a node without neighbours keeps
nothing: its ``(1 - alpha)`` share leaves the walk).  The samplers pass the in-CSR, so mass moves
against the edges; on the symmetric graphs shaDow-GNN uses, in- and out-neighbours are the same.

The push (Andersen, Chung and Lang, FOCS 2006), in its non-lazy form as in the shaDow-GNN and
PPRGo reference code: residual ``r = e_s``, estimate ``p = 0``; while some node has
``r[u] >= eps * max(deg(u), 1)``, push it: ``p[u] += alpha * r[u]``, every neighbour ``v`` gets
``r[v] += (1 - alpha) * r[u] / deg(u)``, ``r[u] = 0``.  Pushes run in synchronous rounds: every
node above its threshold at the start of a round pushes the residual it had then, in increasing
id (contributions added in (node, CSR entry) order), so the result is one defined value on every
path.  Invariant: ``pi_s = p + sum_u r[u] pi_u``, so ``0 <= pi_s - p`` everywhere.

Error bound at termination (every ``r[u] < eps * max(deg(u), 1)``): on a symmetric graph
(``deg(u) pi_u(v) = deg(v) pi_v(u)``), for every node ``v``::

    0 <= pi_s(v) - p(v) = sum_u r[u] pi_u(v) < eps * max(deg(v), 1)

and on any graph ``||pi_s - p||_1 <= sum_u r[u]``.  Work: a push of ``u`` removes at least
``alpha * eps * max(deg(u), 1)`` of the (at most 1) residual mass, so a target costs at most
``1 / (alpha * eps)`` CSR entries (6.7e5 for shaDow's alpha = 0.15, eps = 1e-5), whatever the graph.

Selection: the target, then the best ``topk - 1`` other nodes with a positive estimate (score
descending, equal scores by smaller node id), only those with score >= ``threshold`` when one is
given; each set in increasing node id (:class:`~dgl_accel.core.sampling.shadow.scope.NodeSets`).

>>> from dgl_accel.core.csr import Structure
>>> ring = Structure(indptr=torch.tensor([0, 2, 4, 6]), indices=torch.tensor([1, 2, 0, 2, 0, 1]),
...                  eids=torch.arange(6), num_rows=3, num_cols=3, device=torch.device("cpu"))
>>> sets = ppr_node_sets(ring, torch.tensor([0, 2]), topk=2)
>>> sets.nodes.tolist(), sets.offsets.tolist(), sets.target_pos.tolist()   # ties (1 and 2 for 0) by id
([0, 1, 0, 2], [0, 2, 4], [0, 3])
"""
from __future__ import annotations

import math
import os

import numpy as np
import torch

from ...backend import choose_path, record
from ...csr import Structure
from ...jit import ppr as jit_ppr
from ...jit import runtime
from ..arrays import np64, offsets
from ..checks import check_int, check_positive, expected, node_ids
from .ppr_device import ppr_topk_device
from .scope import NodeSets

__all__ = ["check_ppr", "ppr_push_np", "ppr_topk_np", "ppr_node_sets", "PPRTable"]


def check_ppr(topk, alpha, eps, threshold=None):
    """(topk, alpha, eps, threshold) checked: topk an int >= 1, alpha in (0, 1), eps > 0, threshold
    None or a finite number >= 0 (None becomes 0.0: every positive score qualifies)."""
    topk = check_int(topk, "topk", 1, fix="pass the number of nodes per target subgraph, e.g. topk=200.")
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise expected("alpha to be a number in (0, 1)", repr(alpha), "pass the teleport probability, e.g. 0.15.") \
            from None
    if not 0.0 < a < 1.0:
        raise expected("alpha (the teleport probability) in (0, 1)", repr(alpha), "pass e.g. alpha=0.15.")
    e = check_positive("eps", eps)
    if threshold is None:
        return topk, a, e, 0.0
    try:
        th = float(threshold)
    except (TypeError, ValueError):
        raise expected("threshold to be None or a number >= 0", repr(threshold), "pass e.g. threshold=1e-4.") \
            from None
    if not (th >= 0.0 and math.isfinite(th)):
        raise expected("threshold to be None or a finite number >= 0", repr(threshold),
                       "pass None (no threshold) or a score, e.g. threshold=1e-4.")
    return topk, a, e, th


def ppr_push_np(indptr: np.ndarray, indices: np.ndarray, s: int, alpha: float, eps: float) -> np.ndarray:
    """The push of the module docstring for target ``s`` (numpy reference): the estimate ``p``,
    float64 [n]."""
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    thr = eps * np.maximum(deg, 1)
    keep = 1.0 - alpha
    p = np.zeros(n, dtype=np.float64)
    r = np.zeros(n, dtype=np.float64)
    r[s] = 1.0
    active = np.array([s], dtype=np.int64)
    while active.size:
        a = r[active]
        r[active] = 0.0
        p[active] += alpha * a
        d = deg[active]
        has = d > 0
        cnt = d[has]
        share = a[has] * keep / cnt
        offs = offsets(cnt)
        pos = np.repeat(indptr[active[has]] - offs[:-1], cnt) + np.arange(int(offs[-1]), dtype=np.int64)
        nbr = indices[pos]
        np.add.at(r, nbr, np.repeat(share, cnt))  # sequential in (node, entry) order, as the loop
        recv = np.unique(nbr)
        active = recv[r[recv] >= thr[recv]]
    return p


def ppr_topk_np(indptr: np.ndarray, indices: np.ndarray, targets: np.ndarray, alpha: float, eps: float, topk: int,
                threshold: float):
    """Numpy reference of the push and the selection for every target: (nodes int64 [T, topk]
    (-1 padded), scores float64 [T, topk], counts int64 [T]), row t's set in increasing id."""
    T = targets.shape[0]
    out_nodes = np.full((T, topk), -1, dtype=np.int64)
    out_scores = np.zeros((T, topk), dtype=np.float64)
    counts = np.zeros(T, dtype=np.int64)
    for t in range(T):
        s = int(targets[t])
        p = ppr_push_np(indptr, indices, s, alpha, eps)
        cand = np.flatnonzero(p > 0)
        cand = cand[(cand != s) & (p[cand] >= threshold)]
        best = cand[np.lexsort((cand, -p[cand]))[:topk - 1]]  # score descending, then id
        chosen = np.sort(np.concatenate([np.array([s], dtype=np.int64), best]))
        k = chosen.shape[0]
        out_nodes[t, :k] = chosen
        out_scores[t, :k] = p[chosen]
        counts[t] = k
    return out_nodes, out_scores, counts


def _rows(csr: Structure, tnp, alpha, eps, topk, threshold, compiled):
    """(nodes [T, topk] -1 padded, scores, counts) of the targets ``tnp`` on the path the backend
    picks (the device pipeline, else the compiled loop or the numpy reference)."""
    path = choose_path(csr.indptr)
    record("ppr_push", path, csr.indptr.device)
    if path == "triton":  # the device pipeline; only the [T, topk] result comes to the host
        out = ppr_topk_device(csr.indptr, csr.indices, torch.from_numpy(tnp), alpha, eps, topk, threshold)[:3]
        return tuple(x.cpu().numpy() for x in out)
    indptr, indices = np64(csr.indptr), np64(csr.indices)
    if compiled is None:
        compiled = runtime.enabled()
    if compiled:
        chunks = (os.cpu_count() or 1) if runtime.parallel_allowed() else 1
        return jit_ppr.ppr_topk(indptr, indices, tnp, alpha, eps, topk, threshold, chunks)
    return ppr_topk_np(indptr, indices, tnp, alpha, eps, topk, threshold)


def _assemble(nodes: np.ndarray, scores: np.ndarray, counts: np.ndarray, tnp: np.ndarray) -> NodeSets:
    valid = nodes >= 0
    offs = offsets(counts)
    rank = np.argmax(nodes == tnp[:, None], axis=1)  # the target's rank inside its own sorted row
    return NodeSets(torch.from_numpy(offs), torch.from_numpy(nodes[valid]), torch.from_numpy(offs[:-1] + rank),
                    torch.from_numpy(scores[valid]))


def _targets(csr: Structure, targets) -> np.ndarray:
    tg = node_ids(targets, int(csr.num_rows), "targets")
    if tg.dim() != 1:
        raise expected("targets to be a 1-D tensor of node ids", f"shape {tuple(tg.shape)}", "pass targets.flatten().")
    return tg.numpy()


def ppr_node_sets(csr: Structure, targets, *, topk: int = 200, alpha: float = 0.15, eps: float = 1e-5,
                  threshold=None, compiled: bool | None = None) -> NodeSets:
    """Per-target top-K personalised-PageRank node sets (the module docstring states the push, its
    error bound and the selection).

    csr: the neighbour lists the mass moves along (``dgl_accel.graph.in_csr(g)`` in the samplers);
    targets: 1-D node ids (repeats allowed: each gets its own set).  CUDA CSR (or backend "triton"):
    the device pipeline (:mod:`.ppr_device`); CPU: ``compiled`` forces the compiled loop (True) or the
    numpy reference (False), default compiled where numba is enabled.  Every path gives the same
    estimates bit for bit.
    Returns :class:`NodeSets` with ``scores`` (the push estimates of the chosen nodes), on the CPU.
    """
    topk, alpha, eps, threshold = check_ppr(topk, alpha, eps, threshold)
    tnp = _targets(csr, targets)
    rows = _rows(csr, tnp, alpha, eps, topk, threshold, compiled)
    return _assemble(*rows, tnp)


class PPRTable:
    """A memo of :func:`ppr_node_sets` for one graph and one (topk, alpha, eps, threshold): the
    push is deterministic, so each target's set is computed once, on first request, and served
    from the table afterwards (shaDow-GNN's reference precomputes them all).  Memory: 16 bytes x
    topk per target seen (rows are added as targets come; 100 MB for 30k targets at topk 200).

    >>> from dgl_accel.core.csr import Structure
    >>> c = Structure(indptr=torch.tensor([0, 1, 2]), indices=torch.tensor([1, 0]), eids=torch.arange(2),
    ...               num_rows=2, num_cols=2, device=torch.device("cpu"))
    >>> table = PPRTable(c, topk=2)
    >>> table.node_sets(c, torch.tensor([1])).nodes.tolist(), table.computed
    ([0, 1], 1)
    """

    def __init__(self, csr: Structure, *, topk: int = 200, alpha: float = 0.15, eps: float = 1e-5, threshold=None):
        self.topk, self.alpha, self.eps, self.threshold = check_ppr(topk, alpha, eps, threshold)
        self.row = np.full(int(csr.num_rows), -1, dtype=np.int64)  # target -> its row, -1: not computed
        self.nodes = np.empty((0, self.topk), dtype=np.int64)
        self.scores = np.empty((0, self.topk), dtype=np.float64)
        self.counts = np.empty(0, dtype=np.int64)
        self.computed = 0  # targets whose set the table holds (its used rows)

    def _grow(self, need: int) -> None:
        cap = self.counts.shape[0]
        if need <= cap:
            return
        cap = max(need, 2 * cap, 1024)
        for name in ("nodes", "scores", "counts"):
            old = getattr(self, name)
            new = np.empty((cap,) + old.shape[1:], dtype=old.dtype)
            new[:self.computed] = old[:self.computed]
            setattr(self, name, new)

    def node_sets(self, csr: Structure, targets, compiled: bool | None = None) -> NodeSets:
        """:func:`ppr_node_sets` of ``targets`` on ``csr`` (the graph the table was made for)."""
        tnp = _targets(csr, targets)
        miss = np.unique(tnp[self.row[tnp] < 0])
        if miss.size:
            nodes, scores, counts = _rows(csr, miss, self.alpha, self.eps, self.topk, self.threshold, compiled)
            a, b = self.computed, self.computed + miss.size
            self._grow(b)
            self.nodes[a:b], self.scores[a:b], self.counts[a:b] = nodes, scores, counts
            self.row[miss] = np.arange(a, b)
            self.computed = b
        rows = self.row[tnp]
        return _assemble(self.nodes[rows], self.scores[rows], self.counts[rows], tnp)
