"""Multi-dimensional random walk (MDRW: Ribeiro & Towsley; GraphSAINT's frontier sampler as a
walk, family ``walks``: kernel ``_mdrw_kernel`` of ``kernels/walks.py``, launched by
:func:`.launchers.mdrw_triton`; the Philox counter layout is in :mod:`.random_walk`).

Why there are two frontier samplers: this walk runs a fixed number of steps (``walk_budget - m``),
records every traversed edge and revisit, pops a frontier vertex by an exact cumulative sum of the
frontier's degrees, and its roots may repeat: the walk itself, for callers that want its edges
(DGL-style ``multi_dimensional_random_walk``).  :func:`..saint.frontier.frontier_sample` is
GraphSAINT's subgraph sampler: roots distinct, runs until ``budget`` distinct vertices, optional
degree clip, and pops through the parallel dashboard (IPDPS'19), which pays off for the large
frontiers of GraphSAINT (m = 1000) and is only the node set.  Their random numbers, stopping
rules and outputs differ, so they keep separate kernels (``kernels/walks.py`` and
``kernels/saint_frontier.py``).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..arrays import OneThread
from ..checks import expected, node_ids, resolve_seed
from .launchers import mdrw_triton
from .random_walk import TWO32, WalkCSR, pick_index, walk_path, walk_words

__all__ = ["MDRWResult", "multi_dimensional_random_walk"]


class MDRWResult(NamedTuple):
    """Output of :func:`multi_dimensional_random_walk` (leading dim = instance; -1 = padding
    after an instance whose frontier has no out-edges left).

    nodes: [I, walk_budget]: the m roots, then the node reached at each step (repeats possible).
    src, dst, eids: [I, walk_budget - m]: the edge traversed at each step (src popped from the
    frontier, dst its replacement).
    """
    nodes: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    eids: torch.Tensor


def multi_dimensional_random_walk(csr: WalkCSR, num_roots_or_roots, walk_budget, *, num_instances=None,
                                  seed=None) -> MDRWResult:
    """GraphSAINT's frontier sampler (Ribeiro & Towsley's multi-dimensional random walk),
    vectorised over independent instances (module docstring: how it differs from
    :func:`..saint.frontier.frontier_sample`).

    Each instance keeps a frontier of m vertices.  Per step it pops frontier vertex u with
    probability out_deg(u) / sum of the frontier's out-degrees, moves to a uniform random
    out-neighbour v of u, records (u, v) and v, and puts v in u's slot.  It runs
    ``walk_budget - m`` steps, so each instance visits ``walk_budget`` vertices (roots included).

    ``num_roots_or_roots``: an int m (roots drawn uniformly from all nodes per instance), a 1-D
    tensor [m] of roots (shared by all instances) or a 2-D tensor [I, m].  ``num_instances``
    defaults to 1 (or to I for 2-D roots).  Returns :class:`MDRWResult` (int64).

    >>> from dgl_accel.core.csr import Structure
    >>> from dgl_accel.core.sampling.walks.random_walk import WalkCSR
    >>> ring = Structure(indptr=torch.tensor([0, 1, 2, 3]), indices=torch.tensor([1, 2, 0]),
    ...                  eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
    >>> multi_dimensional_random_walk(WalkCSR(ring), torch.tensor([0]), 3, seed=0).nodes.tolist()
    [[0, 1, 2]]
    """
    path = walk_path(csr.deg.device, "multi_dimensional_random_walk")
    seed = resolve_seed(seed)
    n = csr.num_nodes
    if isinstance(num_roots_or_roots, int) and not isinstance(num_roots_or_roots, bool):
        m = num_roots_or_roots
        if m < 1:
            raise expected("num_roots >= 1", m, "pass a positive frontier size or a tensor of roots.")
        if n == 0:
            raise expected("a graph with nodes", "0 nodes", "sample from a non-empty graph.")
        if m >= 2 ** 20:
            raise expected("num_roots < 2^20", m, "use a smaller frontier.")
        n_inst = 1 if num_instances is None else int(num_instances)
        if n_inst < 1:
            raise expected("num_instances >= 1", n_inst, "pass a positive number of instances.")
        inst = torch.arange(n_inst, dtype=torch.int64)
        cols = []
        for b in range((m + 3) // 4):
            cols.extend(walk_words(seed, inst, b))
        roots = pick_index(torch.stack(cols[:m], 1), torch.tensor(n, dtype=torch.int64))
    else:
        roots = num_roots_or_roots
        if not isinstance(roots, torch.Tensor) or roots.dim() not in (1, 2) or roots.numel() == 0:
            raise expected("an int or a non-empty 1-D/2-D tensor of roots", type(roots).__name__ if
                       not isinstance(roots, torch.Tensor) else f"shape {tuple(roots.shape)}",
                       "pass the frontier size m or roots of shape [m] / [num_instances, m].")
        flat = node_ids(roots.reshape(-1), n, "roots", max_count=2**31)
        roots = flat.reshape(roots.shape)
        if roots.dim() == 1:
            n_inst = 1 if num_instances is None else int(num_instances)
            roots = roots.unsqueeze(0).expand(n_inst, -1)
        elif num_instances is not None and int(num_instances) != roots.shape[0]:
            raise expected(f"num_instances == roots.shape[0] ({roots.shape[0]})", num_instances,
                       "drop num_instances or make them agree.")
        n_inst, m = roots.shape
    if isinstance(walk_budget, bool) or not isinstance(walk_budget, int) or walk_budget < m:
        raise expected(f"walk_budget to be an int >= the frontier size {m}", repr(walk_budget),
                   "pass the number of vertices to visit (roots included).")
    if path == "triton":
        return MDRWResult(*mdrw_triton(csr, roots, walk_budget, seed))
    with OneThread(work=roots.numel()):
        return _mdrw(csr, roots, walk_budget, m, n_inst, seed)


def _mdrw(csr, roots, walk_budget, m, n_inst, seed):
    steps = walk_budget - m
    frontier = roots.to(torch.int64).clone().contiguous()
    nodes_out = torch.full((n_inst, walk_budget), -1, dtype=torch.int64)
    nodes_out[:, :m] = frontier
    src = torch.full((n_inst, steps), -1, dtype=torch.int64)
    dst = src.clone()
    eid = src.clone()
    inst = torch.arange(n_inst, dtype=torch.int64)
    fdeg = csr.deg[frontier].to(torch.float64)          # [I, m]
    rows = inst
    for s in range(steps):
        w = walk_words(seed, inst, (1 << 31) | s)
        cum = torch.cumsum(fdeg, 1)
        tot = cum[:, -1]
        live = tot > 0
        if not bool(live.all()):
            keep = live.nonzero().squeeze(1)
            inst, fdeg, frontier, cum, tot, rows = (a[keep] for a in (inst, fdeg, frontier, cum, tot, rows))
            w = tuple(a[keep] for a in w)
            if inst.numel() == 0:
                break
        u = w[0].to(torch.float64) / TWO32 * tot
        slot = torch.searchsorted(cum, u.unsqueeze(1), right=True).squeeze(1).clamp_(max=m - 1)
        r = torch.arange(inst.numel(), dtype=torch.int64)
        src_v = frontier[r, slot]
        e = csr.start[src_v] + pick_index(w[1], csr.deg[src_v])
        v = csr.indices[e]
        frontier[r, slot] = v
        fdeg[r, slot] = csr.deg[v].to(torch.float64)
        nodes_out[rows, m + s] = v
        src[rows, s] = src_v
        dst[rows, s] = v
        eid[rows, s] = csr.eids[e]
    return MDRWResult(nodes_out, src, dst, eid)
