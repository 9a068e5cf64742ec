"""Matrix-based bulk neighbour sampling (Tripathy, Yelick, Buluc, MLSys'24) as a DGL block sampler.

Per layer and for ``k`` minibatches at once: ``Q`` stacks one row per (minibatch, frontier
vertex) selecting that vertex; ``P = Q @ A`` (``A``: rows = destinations, i.e. DGL's in-neighbour
CSR; see :mod:`dgl_accel.core.sampling.bulk.matrix`); NORM and SAMPLE draw ``fanout`` columns per row by
inverse transform sampling (:mod:`dgl_accel.core.sampling.bulk.its`); EXTRACT builds one DGL block per
minibatch, dropping empty columns (its source nodes).

How bulking meets DGL's one-minibatch-at-a-time ``sample_blocks`` contract
    The sampler must know the upcoming minibatches.  Three ways, all giving the *same* blocks:

    * ``dgl.dataloading.DataLoader(g, ids, BulkNeighborSampler([15, 10, 5]), batch_size=1024,
      shuffle=True)``: on a cache miss the sampler asks :mod:`.lookahead` for the DataLoader's
      index iterator that handed out this batch (a hook the sampler installs on DGL's iterator;
      main process, prefetch thread or worker process alike), reads the next ``k - 1`` seed
      batches of the shuffled order and samples all ``k`` in one pass; the following calls are
      served from that bulk.  ``lookahead=False`` turns this off (and installs no hook).
    * ``sampler.plan(list_of_seed_batches)``: queue the upcoming batches explicitly (any loader).
    * ``sampler.bulk_sample(g, list_of_seed_batches)``: sample them now, get a list of
      ``(input_nodes, output_nodes, blocks)``.

    A served call must match: if the seeds asked for are not the next planned/looked-ahead batch,
    the cache is dropped and the call samples on its own.  Randomness is keyed by (sampler seed,
    minibatch index, layer, vertex, draw): the i-th ``sample_blocks`` call of a sampler (or the
    i-th batch of ``bulk_sample`` / a plan) gets minibatch index i whether it was sampled alone or
    in a bulk of any size, so bulking never changes the result; different minibatches of one bulk
    use different Philox keys and are independent.  ``exclude_eids`` (edge prediction) disables
    bulking for that call (future batches' exclusions are unknown).

Bulk size: ``bulk=k`` minibatches per pass; with ``memory_budget`` (bytes) ``k`` is further capped
so the estimated ``P`` of the bulk fits (:func:`~dgl_accel.core.sampling.bulk.matrix.estimate_p_bytes`).

SpGEMM: ``spgemm=None`` uses that ``Q`` only selects rows: ``P``'s rows *are* ``A``'s rows, read in
place (no product, no copy), and unweighted rows are sampled by the exact uniform shortcut of ITS.
``spgemm=callable`` (e.g. :func:`~dgl_accel.core.sampling.bulk.matrix.local_spgemm` or a distributed
product) materialises ``P = spgemm(Q, A)``; the samples are identical either way.

Blocks follow :class:`dgl_accel.sampling.NeighborSampler`: dst = the frontier in the given order,
src = dst first then the new sources in ascending id, ``edata[dgl.EID]`` original edge ids.  A
parallel-edge group is one entry of ``A`` (value = multiplicity, so its neighbour is drawn with
probability proportional to the multiplicity, as edge-level sampling would) and appears as one
block edge with the group's smallest edge id.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

import dgl
import numpy as np
import torch
from dgl.dataloading import BlockSampler

from ..core.backend import choose_path, record
from ..core.sampling.arrays import np64
from ..core.sampling.bulk.matrix import adjacency_tensor as adjacency_of
from ..core.sampling.bulk.neighbor import add_timing, sample_layer
from ..core.sampling.bulk.neighbor_device import sample_bulk_device
from ..core.sampling.checks import (
    check_bool,
    check_bulk,
    check_fanouts,
    check_memory_budget,
    check_spgemm,
    excluded_edge_ids,
    expected,
    seed_batch,
)
from ..core.sampling.seeds import CallSeeds
from . import lookahead as dgl_lookahead
from .blocks import blocks_from_output, check_homogeneous, finish_block
from .bulk_matrix import canonical_adjacency, estimate_p_bytes
from .errors import dgl_errors
from .neighbor import HETERO_FIX

__all__ = ["BulkNeighborSampler", "BulkScheduler"]


class BulkScheduler:
    """Serves one-minibatch-at-a-time calls from bulks: the planned / looked-ahead batches of a
    bulk are cached with their minibatch index and handed out when asked for, in order."""

    def __init__(self, lookahead: bool = True):
        self.lookahead = bool(lookahead)
        self._plan: deque = deque()
        self._cache: deque = deque()  # (minibatch index, seeds, result) for the coming calls
        if self.lookahead:
            dgl_lookahead.install()

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.lookahead:  # unpickled in a spawned DataLoader worker: hook that process's DGL too
            dgl_lookahead.install()

    def clear(self) -> None:
        self._plan.clear()
        self._cache.clear()

    def plan(self, seed_batches) -> None:
        self._plan.extend(torch.as_tensor(b) for b in seed_batches)

    def serve(self, seeds: torch.Tensor, idx: int, k: int, has_exclude: bool, run):
        """Result for minibatch ``idx`` = ``seeds``; ``run(batches, first_index)`` samples a bulk."""
        if not has_exclude and self._cache:
            j, cached_seeds, result = self._cache.popleft()
            if j == idx and cached_seeds.shape == seeds.shape and torch.equal(cached_seeds, seeds.to(cached_seeds)):
                return result
            self._cache.clear()
        if has_exclude:  # exclusions of future batches are unknown: this batch alone
            self._cache.clear()
            return run([seeds], idx)[0]
        upcoming = self._from_plan(seeds, k - 1)
        if upcoming is None:
            upcoming = dgl_lookahead.upcoming(seeds, k - 1) if self.lookahead else []
        batches = [seeds] + upcoming
        results = run(batches, idx)
        for j in range(1, len(batches)):
            self._cache.append((idx + j, batches[j], results[j]))
        return results[0]

    def _from_plan(self, seeds, count):
        if not self._plan:
            return None
        head = self._plan[0]
        if head.shape != seeds.shape or not torch.equal(head.to(seeds), seeds):
            self._plan.clear()  # the caller went off plan: forget it rather than guess
            return None
        self._plan.popleft()
        out = []
        while self._plan and len(out) < count:
            out.append(self._plan.popleft())
        return out


@dgl_errors
class BulkNeighborSampler(CallSeeds, BlockSampler):
    """Neighbour sampling of ``k`` minibatches per pass by matrix-based ITS (see module docstring).

    fanouts : list[int]
        Neighbours per destination for each layer, input layer first (as DGL); -1 = all.
    bulk : int
        Minibatches sampled in one pass (k).
    replace : bool
        With replacement (repeats kept as repeated edges, as DGL).
    seed : int, optional
        Sampler seed in [0, 2^64); default drawn from torch's global generator.
    spgemm : callable ``(Q, A) -> P``, optional
        Materialise ``P`` with this product (see module docstring); default reads ``A``'s rows.
    memory_budget : int, optional
        Bytes the bulk's ``P`` may take; caps ``k``.
    lookahead : bool
        Find upcoming batches in a calling DGL DataLoader (default True).
    prefetch_node_feats, prefetch_labels, prefetch_edge_feats, output_device :
        As ``dgl.dataloading.BlockSampler``.

    ``last_timing`` holds the seconds of the last pass split into ``probability`` (building
    ``Q``/``P`` and NORM), ``sampling`` (ITS) and ``extraction`` (blocks).

    >>> g = dgl.graph(([1, 2, 0, 2], [0, 0, 1, 1]))
    >>> out = BulkNeighborSampler([1], bulk=2, seed=0).bulk_sample(g, [torch.tensor([0]), torch.tensor([1])])
    >>> [blocks[0].num_edges() for _, _, blocks in out]      # two minibatches, one pass
    [1, 1]
    """

    def __init__(self, fanouts, bulk: int = 32, replace: bool = False, seed: int | None = None,
                 spgemm: Callable | None = None, memory_budget=None, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, lookahead: bool = True):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        self.fanouts = check_fanouts(fanouts)
        self.bulk = check_bulk(bulk)
        self.replace = check_bool(replace, "replace")
        self.init_seeds(seed)
        self.spgemm = check_spgemm(spgemm)
        self.memory_budget = check_memory_budget(memory_budget)
        self.scheduler = BulkScheduler(lookahead)
        self.last_timing = {"probability": 0.0, "sampling": 0.0, "extraction": 0.0}

    # ---------------------------------------------------------------------------------- API
    def reset(self, call_index: int = 0) -> None:
        """Rewind the minibatch counter and drop planned / cached batches."""
        super().reset(call_index)
        self.scheduler.clear()

    def plan(self, seed_batches: Sequence) -> None:
        """Queue the upcoming seed batches: the next ``sample_blocks`` calls asking for them (in this
        order) are served from bulks of ``k``."""
        self.scheduler.plan(seed_batches)

    def bulk_size(self, g, batch_size: int) -> int:
        """k for minibatches of ``batch_size`` seeds: ``bulk``, capped by ``memory_budget``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise expected("a positive batch size", repr(batch_size), "batch_size >= 1.")
        if self.memory_budget is None:
            return self.bulk
        per = estimate_p_bytes(g, int(batch_size), self.fanouts)
        return max(1, min(self.bulk, self.memory_budget // per))

    def bulk_sample(self, g, seed_batches: Sequence, first_index: int | None = None):
        """Sample the given minibatches (in passes of at most ``bulk_size``); returns a list of
        ``(input_nodes, output_nodes, blocks)``.  Batch j gets minibatch index ``first_index + j``
        (default: the sampler's call counter, which advances by ``len(seed_batches)``)."""
        check_homogeneous(g, HETERO_FIX)
        if isinstance(seed_batches, torch.Tensor) or not isinstance(seed_batches, Sequence) or not seed_batches:
            raise expected("a non-empty list of seed-node tensors", type(seed_batches).__name__,
                           "pass e.g. list(torch.randperm(n).split(1024)).")
        n = g.num_nodes()
        batches = [seed_batch(b, n, f"seed_batches[{i}]") for i, b in enumerate(seed_batches)]
        start = self.calls if first_index is None else int(first_index)
        out = []
        k = self.bulk_size(g, max(int(b.numel()) for b in batches))
        for i in range(0, len(batches), k):
            out.extend(self._sample_bulk(g, batches[i:i + k], start + i, None))
        if first_index is None:
            self.claim_calls(len(batches))
        return out

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        check_homogeneous(g, HETERO_FIX)
        seeds = seed_batch(seed_nodes, g.num_nodes(), "seed nodes")
        idx = self.claim_calls()
        k = self.bulk_size(g, int(seeds.numel()))
        return self.scheduler.serve(seeds, idx, k, exclude_eids is not None,
                                    lambda batches, first: self._sample_bulk(g, batches, first, exclude_eids))

    # ---------------------------------------------------------------------------------- core
    def _sample_bulk(self, g, batches: list[torch.Tensor], first: int, exclude_eids):
        canon = canonical_adjacency(g)
        keys = self.call_keys(first, len(batches))
        excl = excluded_edge_ids(exclude_eids)
        idtype = g.idtype
        dev = g.device
        path = choose_path(torch.empty(0, device=dev))
        record("bulk_extract", path, dev)
        if path == "triton" and self.spgemm is None:
            return self._sample_bulk_device(canon, batches, keys, excl, dev, g.idtype)
        frontiers = [np64(b) for b in batches]
        per_batch: list[list] = [[] for _ in batches]
        timing = {"probability": 0.0, "sampling": 0.0, "extraction": 0.0}
        a_tensor = []  # A as a sparse tensor, built once per pass if a layer materialises P

        def adjacency():
            if not a_tensor:
                a_tensor.append(adjacency_of(canon))
            return a_tensor[0]

        for step, fanout in enumerate(reversed(self.fanouts)):
            parts, marks = sample_layer(canon, frontiers, keys, step, fanout, replace=self.replace, spgemm=self.spgemm,
                                        excl=excl, path=path, device=dev, adjacency=adjacency)
            new_frontiers = []
            for b, (front, (indptr_b, local, new, eid)) in enumerate(zip(frontiers, parts)):
                block, src_ids = finish_block(indptr_b, local, front, new, eid, idtype)
                per_batch[b].insert(0, block)
                new_frontiers.append(src_ids)
            frontiers = new_frontiers
            add_timing(timing, *marks)
        self.last_timing = timing
        return self._outputs(batches, per_batch)

    def _sample_bulk_device(self, canon, batches, keys, excl, dev, idtype):
        """The device pipeline (:func:`~dgl_accel.core.sampling.bulk.neighbor_device.sample_bulk_device`): the
        same blocks as the path above, built from arrays that never leave ``dev``."""
        t0 = time.perf_counter()
        arrays = [canon.on_device(name, dev) for name in ("indptr", "indices", "eids")]
        outs = sample_bulk_device(*arrays, canon.n, batches, keys, self.fanouts, replace=self.replace,
                                  exclude=None if excl is None else torch.from_numpy(excl),
                                  prefix=None if canon.unit else canon.weight_prefix(dev))
        self.last_timing = {"probability": 0.0, "sampling": time.perf_counter() - t0, "extraction": 0.0}
        return self._outputs(batches, [blocks_from_output(sampled, idtype) for sampled in outs])

    def _outputs(self, batches, per_batch):
        """``(input_nodes, output_nodes, blocks)`` per minibatch, the blocks on the output device (the
        seeds' by default) wherever they were built."""
        out = []
        for seeds, blocks in zip(batches, per_batch):
            out_dev = seeds.device if self.output_device is None else torch.device(self.output_device)
            if blocks[0].device != out_dev:
                blocks = [b.to(out_dev) for b in blocks]
            out.append((blocks[0].srcdata[dgl.NID], seeds, blocks))
        return out

    def __repr__(self):
        return (f"BulkNeighborSampler(fanouts={self.fanouts}, bulk={self.bulk}, replace={self.replace}, "
                f"seed={self.seed}, spgemm={getattr(self.spgemm, '__name__', self.spgemm)}, "
                f"memory_budget={self.memory_budget})")
