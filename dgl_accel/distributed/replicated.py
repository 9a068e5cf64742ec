"""Graph-replicated data-parallel loading: every rank holds the whole graph and samples its share
of the global minibatch sequence; no communication for sampling.

Global batch semantics (the same for any world size W)
-------------------------------------------------------
An epoch shuffles ``train_ids`` with a permutation that depends only on (seed, epoch), cuts it into
*steps* of ``batch_size * minibatches_per_step`` seeds (the global batch) and each step into
``minibatches_per_step`` (S) minibatches of ``batch_size`` seeds (``np.array_split``; a remainder
of fewer than S seeds joins the last step, so no minibatch is empty).  Minibatch u of step s has the
global index j = s * S + u (counted across epochs) and is sampled with the sampler's call index j,
so its blocks depend only on (sampler seed, j).  Rank r trains on the minibatches u = r, r + W, ...
of each step (S % W == 0: every rank gets S / W of them) and accumulates gradients; the loss is the
*sum* of per-node losses times ``step.scale = W / (seeds in the global step)``, so after
DistributedDataParallel averages the gradients over W ranks the update is the gradient of the mean
loss over the whole global step — the same update for W = 1, 2, 4 (S fixed, e.g. 4), up to float
summation order.  The union of the
minibatches over ranks is exactly the 1-process sequence.

Samplers: keying by j needs a counter-based sampler: one with a ``calls`` counter (every dgl_accel
sampler: the core's :class:`~dgl_accel.core.sampling.seeds.CallSeeds`; set to j before each call) or
a ``bulk_sample`` method.  Other samplers work
but then sample from their own state, and the ranks' union is not the 1-process sequence.

Bulk samplers (``BulkNeighborSampler``): minibatches are grouped in bulks of k consecutive global
indices; each rank samples its share of each bulk in one ``bulk_sample`` call when the sampler
accepts explicit minibatch ``indices=``, else one pass per run of consecutive indices (the share
r, r + W, ... of a bulk is then sampled one minibatch per pass, with the same samples).  With a graph-partitioned spgemm
(:class:`PartitionedSpGEMM`), sampling is collective, so every rank samples the whole bulk (same
Q everywhere) and keeps its share.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.sampling.rng import call_seed
from .comm import world
from .fingerprint import check_same_graph
from .spgemm import PartitionedSpGEMM

__all__ = ["ReplicatedLoader", "Step", "replicated_loader", "per_rank_seed"]


def _positive_int(x, name: str, fix: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x <= 0:
        raise ValueError(f"expected {name} to be a positive int (got {x!r}). Fix: {fix}")
    return int(x)


@dataclass
class Step:
    """One optimizer step on this rank: its minibatches ``(index, input_nodes, output_nodes,
    blocks)`` and the loss scale that makes summed losses average over the global step."""

    index: int
    minibatches: list = field(default_factory=list)
    global_size: int = 0
    scale: float = 0.0


class ReplicatedLoader:
    """Iterate over :class:`Step` objects of this rank (see the module docstring)."""

    def __init__(self, g, train_ids, sampler, batch_size, minibatches_per_step=None, shuffle=True, seed=0,
                 group=None, check_graph=True):
        self.g = g
        self.sampler = sampler
        self.group = group
        self.rank, self.world_size = world(group)
        self.batch_size = _positive_int(batch_size, "batch_size",
                                        "pass the number of seed nodes per minibatch, e.g. 1024.")
        S = self.world_size if minibatches_per_step is None else minibatches_per_step
        self.S = _positive_int(S, "minibatches_per_step", "pass a multiple of the world size, e.g. 4.")
        if self.S % self.world_size:
            fix = self.world_size * max(1, self.S // self.world_size)
            raise ValueError(f"expected minibatches_per_step to be a multiple of the world size {self.world_size} "
                             f"(got {self.S}). Fix: pass minibatches_per_step={fix} "
                             f"(keep it fixed across world sizes for identical training).")
        ids = torch.as_tensor(train_ids)
        if ids.dtype == torch.bool:
            ids = torch.nonzero(ids, as_tuple=True)[0]
        if ids.dim() != 1 or ids.numel() == 0:
            raise ValueError(f"expected train_ids to be a non-empty 1-D tensor of node ids or a bool mask (got shape "
                             f"{tuple(ids.shape)}). Fix: pass e.g. g.ndata['train_mask'].nonzero().squeeze(1).")
        if ids.numel() < self.S:
            raise ValueError(f"expected at least minibatches_per_step={self.S} training ids (got {ids.numel()}). "
                             f"Fix: pass a smaller minibatches_per_step or more training ids.")
        n = g.num_nodes()
        if int(ids.min()) < 0 or int(ids.max()) >= n:
            raise ValueError(f"expected train_ids in [0, {n}) (got range [{int(ids.min())}, {int(ids.max())}]). "
                             f"Fix: pass node ids of g.")
        self.train_ids = ids.cpu().numpy().astype(np.int64)
        if np.unique(self.train_ids).size != self.train_ids.size:
            raise ValueError(f"expected unique train_ids (got {self.train_ids.size - np.unique(self.train_ids).size} "
                             f"repeats). Fix: pass torch.unique(train_ids).")
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.epoch = 0
        self.bulk = getattr(sampler, "bulk", None)
        spgemm = getattr(sampler, "spgemm", None)
        self.collective = isinstance(spgemm, PartitionedSpGEMM)
        if check_graph:
            check_same_graph(g, group)

    # --------------------------------------------------------------------------- sequencing
    @property
    def steps_per_epoch(self) -> int:
        B, N = self.batch_size * self.S, len(self.train_ids)
        return max(1, N // B + (1 if N % B >= self.S else 0))

    def __len__(self) -> int:
        return self.steps_per_epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def global_minibatches(self, epoch: int):
        """[(global index j, seed ids)] of every minibatch of ``epoch``, the same on every rank.

        Steps take ``batch_size * S`` ids each; a remainder of fewer than S ids joins the last
        full step, so every minibatch is non-empty and every rank gets S / W of each step."""
        ids = self.train_ids
        if self.shuffle:
            rng = np.random.default_rng(call_seed(self.seed, epoch) >> 1)
            ids = ids[rng.permutation(len(ids))]
        B, steps = self.batch_size * self.S, self.steps_per_epoch
        first = epoch * steps * self.S
        out = []
        for s in range(steps):
            end = len(ids) if s == steps - 1 else (s + 1) * B
            for u, part in enumerate(np.array_split(ids[s * B:end], self.S)):
                out.append((first + s * self.S + u, part))
        return out

    def _mine(self, j: int) -> bool:
        return j % self.world_size == self.rank  # S % W == 0, so u = j mod S and j agree mod W

    # ----------------------------------------------------------------------------- sampling
    def _sample(self, batches):
        """Sample [(j, seeds)] -> [(j, input_nodes, output_nodes, blocks)] keyed by global index."""
        sampler, g = self.sampler, self.g
        js = [j for j, _ in batches]
        seeds = [torch.from_numpy(s) for _, s in batches]
        bulk_sample = getattr(sampler, "bulk_sample", None)
        if bulk_sample is not None:
            if "indices" in inspect.signature(bulk_sample).parameters:
                res = bulk_sample(g, seeds, indices=js)
            else:  # only runs of consecutive indices share a pass (W > 1: one minibatch per pass)
                res, i = [], 0
                while i < len(js):
                    e = i + 1
                    while e < len(js) and js[e] == js[e - 1] + 1:
                        e += 1
                    res.extend(bulk_sample(g, seeds[i:e], first_index=js[i]))
                    i = e
            return [(j,) + tuple(r) for j, r in zip(js, res)]
        out = []
        for j, s in zip(js, seeds):
            if hasattr(sampler, "calls"):
                sampler.calls = j  # counter-based samplers: minibatch j draws the same numbers on any rank
            inp, outp, blocks = sampler.sample_blocks(g, s)
            out.append((j, inp, outp, blocks))
        return out

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        mbs = self.global_minibatches(epoch)
        sizes = {}
        for j, seeds in mbs:
            sizes[j // self.S] = sizes.get(j // self.S, 0) + len(seeds)
        k = self.bulk if self.bulk is not None else 1
        by_step = {}
        for q in range(0, len(mbs), k):
            chunk = mbs[q:q + k]
            todo = chunk if self.collective else [b for b in chunk if self._mine(b[0])]
            done = self._sample(todo) if todo else []
            for rec, (j, _seeds) in zip(done, todo):
                if self._mine(j):
                    by_step.setdefault(j // self.S, []).append(rec)
            # Yield every step whose minibatches are all sampled (bulks may straddle steps).
            last = (chunk[-1][0] + 1) // self.S
            for s in sorted(x for x in by_step if x < last):
                yield self._step(s, by_step.pop(s), sizes[s])
        for s in sorted(by_step):
            yield self._step(s, by_step.pop(s), sizes[s])

    def _step(self, s, recs, size):
        return Step(index=s, minibatches=recs, global_size=size, scale=self.world_size / max(size, 1))


def replicated_loader(g, train_ids, sampler, batch_size, *, minibatches_per_step=None, shuffle=True, seed=0,
                      group=None, check_graph=True) -> ReplicatedLoader:
    """Per-rank loader of graph-replicated data-parallel training.

    Every rank passes the same graph (checked with an all-gathered fingerprint), ``train_ids``,
    sampler (same seed) and arguments.  Iterating gives this rank's :class:`Step` objects; see the
    module docstring for the global batch semantics and :func:`dgl_accel.distributed.train_epoch`
    for the matching training loop.  ``minibatches_per_step`` (default: the world size) must be a
    multiple of the world size; keep it fixed to train identically on any number of processes.
    """
    return ReplicatedLoader(g, train_ids, sampler, batch_size, minibatches_per_step=minibatches_per_step,
                            shuffle=shuffle, seed=seed, group=group, check_graph=check_graph)


def per_rank_seed(seed: int, group=None) -> int:
    """A distinct sampler seed per rank (< 2^63), derived from ``seed`` and the rank.

    For samplers driven by ``dgl.dataloading.DataLoader(..., use_ddp=True)`` that draw from their
    own call counter rather than the loader's indices (e.g. SAINTSampler): with one shared seed
    every rank would sample the same subgraphs.  (The replicated loader does not need this: it keys
    sampling by the global minibatch index.)

    >>> per_rank_seed(7) == per_rank_seed(7) != per_rank_seed(8)  # rank 0 without a process group
    True
    """
    rank, _ = world(group)
    return call_seed(int(seed), rank, 2**32 + 1) >> 1
