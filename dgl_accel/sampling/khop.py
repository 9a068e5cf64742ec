"""k-hop neighbourhood sampling per sample: NextDoor's k-hop application on the transit engine.

Each seed roots one *sample*.  Step k takes the vertices the sample reached at step k - 1 as its
transits and draws ``fanouts[k]`` in-neighbours of each (individual sampling).  The engine inverts
the (sample, transit) map first: pairs are sorted by transit (:func:`engine.group_by_transit`),
so every sample that shares a transit is served by the same program (Triton) or by consecutive
rows of the same pass (CPU), then the draws are scattered back to sample order.

Draws are counter-based: slot j of transit v in sample s at step k (of K) uses the Philox
counter of the neighbour-choice spec with counter id ``(s * K + k) * n + v`` (n = number of
nodes), so two samples sharing a transit draw independently, and sample s depends only on the
seed, its index and its root, never on the grouping, the batch size or the device (the CPU path
and the kernel give identical samples).

Both output forms of the paper:

* per step (``KHopSamples.steps``): step k is an [S, width_k] array of vertex ids (-1 = empty
  slot: a transit with fewer neighbours than the fanout, or an empty transit);
* per sample (``KHopSamples.per_sample()``): [S, 1 + sum of widths], the root and then every
  vertex of every step, the layout a caller that walks each sample's vertex list wants.

``unique=True`` removes repeats within each sample's step (sort + scan), packing the distinct
vertices to the left in increasing id; the next step then expands each distinct vertex once.
"""
from __future__ import annotations

from typing import List, NamedTuple

import dgl
import numpy as np
import torch

from ..core import backend
from ..graph.structure import in_csr
from .choice import _np64, check_nodes, resolve_seed, uniform_choice_np
from .engine import group_by_transit, neighbor_choice_triton

__all__ = ["khop_sample", "KHopSamples"]


class KHopSamples(NamedTuple):
    roots: torch.Tensor          # [S] the seeds, one sample each
    steps: List[torch.Tensor]    # step k: [S, width_k] vertex ids, -1 = empty slot

    def per_sample(self) -> torch.Tensor:
        """[S, 1 + sum widths]: each sample's root, then its vertices of every step (-1 padded)."""
        return torch.cat([self.roots.unsqueeze(1)] + list(self.steps), 1)


def _check_fanouts(fanouts) -> list[int]:
    if isinstance(fanouts, (int, np.integer)) or not hasattr(fanouts, "__len__") or len(fanouts) == 0:
        raise ValueError(f"expected fanouts to be a non-empty list of positive ints, one per step (got {fanouts!r}). "
                         f"Fix: pass e.g. [10, 5].")
    out = []
    for i, f in enumerate(fanouts):
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
            raise ValueError(f"expected fanouts[{i}] to be a positive int (got {f!r}). "
                             f"Fix: every step draws at least one neighbour per transit.")
        out.append(int(f))
    return out


def _unique_rows(x: torch.Tensor) -> torch.Tensor:
    """Per row: distinct non-negative values in increasing order, then -1 (sort + scan)."""
    if x.numel() == 0:
        return x
    big = torch.iinfo(torch.int64).max
    vals = torch.where(x < 0, torch.full_like(x, big), x).sort(1).values
    dup = torch.zeros_like(vals, dtype=torch.bool)
    dup[:, 1:] = vals[:, 1:] == vals[:, :-1]
    vals = torch.where(dup, torch.full_like(vals, big), vals).sort(1).values
    width = int((vals != big).sum(1).max()) if vals.shape[0] else 0
    vals = vals[:, :max(width, 0)]
    return torch.where(vals == big, torch.full_like(vals, -1), vals)


def _choose(csr, transits: torch.Tensor, cids: torch.Tensor, fanout: int, seed: int, step: int,
            num_counters: int, replace: bool) -> torch.Tensor:
    """CSR positions [P, fanout] (-1 padded) for transit/counter-id pairs, on the backend's path."""
    path = backend.choose_path(csr.indptr)
    backend.record("neighbor_choice", path, csr.indptr.device)
    if path == "triton":
        return neighbor_choice_triton(csr.indptr, transits.to(csr.indptr.device), fanout, seed=seed, step=step,
                                      num_nodes=num_counters, replace=replace,
                                      counter_ids=cids.to(csr.indptr.device))
    pos = uniform_choice_np(_np64(csr.indptr), _np64(transits), fanout, seed, step, num_counters, replace,
                            counter_ids=_np64(cids))
    return torch.from_numpy(pos)


def khop_sample(g: dgl.DGLGraph, seeds, fanouts, *, replace: bool = False, unique: bool = False,
                seed=None) -> KHopSamples:
    """Sample the k-hop in-neighbourhood of every seed independently (one sample per seed).

    g: a homogeneous graph (CPU: native path; CUDA: the Triton neighbour-choice kernels).
    seeds: 1-D node ids; fanouts: neighbours per transit for each step (positive ints).
    replace: draw with replacement; unique: drop repeats within a sample's step.
    Returns :class:`KHopSamples` (ids in ``g.idtype`` on ``g.device``).
    """
    if not isinstance(g, dgl.DGLGraph) or g.is_block or len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        raise ValueError(f"expected a homogeneous DGLGraph (got {type(g).__name__ if not isinstance(g, dgl.DGLGraph) else 'a heterograph or block'}). "
                         f"Fix: pass dgl.graph(...) or dgl.to_homogeneous(g).")
    fanouts = _check_fanouts(fanouts)
    seed = resolve_seed(seed)
    seeds = torch.as_tensor(seeds)
    if seeds.dim() != 1:
        raise ValueError(f"expected seeds to be a 1-D tensor of node ids (got shape {tuple(seeds.shape)}). "
                         f"Fix: pass seeds.flatten().")
    n = g.num_nodes()
    check_nodes(seeds, n, "seeds")
    csr = in_csr(g)
    S, K = seeds.numel(), len(fanouts)
    if S * K * max(n, 1) >= 2**62 // 4 // max(fanouts):
        raise ValueError(f"expected samples x steps x nodes x fanout < 2^60 (got {S} x {K} x {n} x {max(fanouts)}). Fix: sample in smaller batches.")
    # one -1 sentinel after the CSR ids: empty slots (-1 positions) gather it, no mask pass needed
    indices = torch.cat([csr.indices.to(torch.int64).cpu(), torch.tensor([-1])])
    E = indices.numel() - 1
    cur = seeds.to(torch.int64).cpu().unsqueeze(1)  # transits of step 0: the roots
    steps = []
    for k, f in enumerate(fanouts):
        sample, col = (cur >= 0).nonzero(as_tuple=True)
        v = cur[sample, col]
        groups = group_by_transit(v)  # invert (sample, transit) -> transit: samples sharing v side by side
        order = groups.order
        # counter id (s * K + k) * n + v with step 0: a sample's draws do not depend on the batch size
        cids = (sample[order] * K + k) * n + v[order]
        pos_sorted = _choose(csr, v[order], cids, f, seed, 0, S * K * n, replace).cpu()
        pos = torch.empty_like(pos_sorted)
        pos[order] = pos_sorted  # back to pair order
        nbr = indices[torch.where(pos >= 0, pos, E)]
        out = torch.full((S, cur.shape[1] * f), -1, dtype=torch.int64)
        slots = (col * f).unsqueeze(1) + torch.arange(f)
        out[sample.unsqueeze(1).expand(-1, f), slots] = nbr
        if unique:
            out = _unique_rows(out)
        steps.append(out)
        cur = out
    dev, it = g.device, g.idtype
    return KHopSamples(seeds.to(dev, it), [s.to(dev, it) for s in steps])
