"""k-hop neighbourhood sampling per sample: NextDoor's k-hop application on the transit engine.

Each seed roots one *sample*.  Step k takes the vertices the sample reached at step k - 1 as its
transits and draws ``fanouts[k]`` in-neighbours of each (individual sampling).  The engine inverts
the (sample, transit) map first: pairs are sorted by transit (the order of :func:`.engine.group_by_transit`),
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

from typing import NamedTuple

import torch

from ...backend import choose_path, record
from ...csr import Structure
from ..arrays import np64
from ..checks import check_below, check_fanouts, expected, node_ids, resolve_seed
from .choice import uniform_choice_np
from .launchers import neighbor_choice_triton

__all__ = ["khop_sample", "KHopSamples", "HOST_READS_PER_STEP"]

HOST_READS_PER_STEP = 1  # the occupied slots of the step's transits (unique: + the widest row)


class KHopSamples(NamedTuple):
    roots: torch.Tensor          # [S] the seeds, one sample each
    steps: list[torch.Tensor]    # step k: [S, width_k] vertex ids, -1 = empty slot

    def per_sample(self) -> torch.Tensor:
        """[S, 1 + sum widths]: each sample's root, then its vertices of every step (-1 padded)."""
        return torch.cat([self.roots.unsqueeze(1)] + list(self.steps), 1)


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
    path = choose_path(csr.indptr)
    record("neighbor_choice", path, csr.indptr.device)
    if path == "triton":
        return neighbor_choice_triton(csr.indptr, transits.to(csr.indptr.device), fanout, seed=seed, step=step,
                                      num_nodes=num_counters, replace=replace,
                                      counter_ids=cids.to(csr.indptr.device))
    pos = uniform_choice_np(np64(csr.indptr), np64(transits), fanout, seed, step, num_counters, replace,
                            counter_ids=np64(cids))
    return torch.from_numpy(pos)


def khop_sample(csr: Structure, seeds, fanouts, *, replace: bool = False, unique: bool = False,
                seed=None) -> KHopSamples:
    """Sample the k-hop in-neighbourhood of every seed independently (one sample per seed).

    csr: in-edges grouped by destination (``dgl_accel.graph.in_csr(g)``; CPU: native path, CUDA:
    the Triton neighbour-choice kernels).  seeds: 1-D node ids; fanouts: neighbours per transit
    for each step (positive ints).  replace: draw with replacement; unique: drop repeats within a
    sample's step.  Returns :class:`KHopSamples` of int64 ids on the CSR's device: on a CUDA CSR
    every step stays there, with :data:`HOST_READS_PER_STEP` host reads a step (one more with
    ``unique``) after the seeds' check.

    >>> from dgl_accel.core.csr import Structure
    >>> csr = Structure(indptr=torch.tensor([0, 1, 2, 3]), indices=torch.tensor([1, 2, 0]),
    ...                 eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
    >>> khop_sample(csr, torch.tensor([0]), [1, 1], seed=0).per_sample().tolist()   # a cycle 0 <- 1 <- 2
    [[0, 1, 2]]
    """
    fanouts = check_fanouts(fanouts, allow_all=False)
    seed = resolve_seed(seed)
    seeds = torch.as_tensor(seeds)
    if seeds.dim() != 1:
        raise expected("seeds to be a 1-D tensor of node ids", f"shape {tuple(seeds.shape)}", "pass seeds.flatten().")
    n = csr.num_rows
    seeds = node_ids(seeds, n, "seeds")
    S, K = seeds.numel(), len(fanouts)
    # counter ids (s * K + k) * n + v, times ceil(fanout / 4) words, must fit 62 bits
    check_below("samples x steps x nodes", S * K * max(n, 1), "2^60 / max(fanouts)", 2**62 // 4 // max(fanouts),
                "sample in smaller batches.")
    dev = csr.indices.device
    seeds = seeds.to(dev)
    # one -1 sentinel after the CSR ids: empty slots (-1 positions) gather it, no mask pass needed
    indices = torch.cat([csr.indices.to(torch.int64), torch.tensor([-1], device=dev)])
    E = indices.numel() - 1
    cur = seeds.unsqueeze(1)  # transits of step 0: the roots
    steps = []
    for k, f in enumerate(fanouts):
        sample, col = (cur >= 0).nonzero(as_tuple=True)  # the step's one host read (two with unique)
        v = cur[sample, col]
        # invert (sample, transit) -> transit: samples sharing v side by side (the engine's order)
        order = torch.argsort(v, stable=True)
        # counter id (s * K + k) * n + v with step 0: a sample's draws do not depend on the batch size
        cids = (sample[order] * K + k) * n + v[order]
        pos_sorted = _choose(csr, v[order], cids, f, seed, 0, S * K * n, replace).to(dev)
        pos = torch.empty_like(pos_sorted)
        pos[order] = pos_sorted  # back to pair order
        nbr = indices[torch.where(pos >= 0, pos, E)]
        out = torch.full((S, cur.shape[1] * f), -1, dtype=torch.int64, device=dev)
        slots = (col * f).unsqueeze(1) + torch.arange(f, device=dev)
        out[sample.unsqueeze(1).expand(-1, f), slots] = nbr
        if unique:
            out = _unique_rows(out)
        steps.append(out)
        cur = out
    return KHopSamples(seeds, steps)
