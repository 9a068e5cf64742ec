"""Matrix-based bulk neighbour sampling (Tripathy, Yelick, Buluc, MLSys'24) as a DGL block sampler.

Per layer and for ``k`` minibatches at once: ``Q`` stacks one row per (minibatch, frontier
vertex) selecting that vertex; ``P = Q @ A`` (``A``: rows = destinations, i.e. DGL's in-neighbour
CSR; see :mod:`dgl_accel.sampling.bulk_matrix`); NORM and SAMPLE draw ``fanout`` columns per row by
inverse transform sampling (:mod:`dgl_accel.sampling.bulk_its`); EXTRACT builds one DGL block per
minibatch, dropping empty columns (its source nodes).

How bulking meets DGL's one-minibatch-at-a-time ``sample_blocks`` contract
    The sampler must know the upcoming minibatches.  Three ways, all giving the *same* blocks:

    * ``dgl.dataloading.DataLoader(g, ids, BulkNeighborSampler([15, 10, 5]), batch_size=1024,
      shuffle=True)``: on a cache miss the sampler looks up the DataLoader's index iterator on the
      call stack (DGL's ``_TensorizedDatasetIter``; main process, prefetch thread or worker
      process alike), reads the next ``k - 1`` seed batches of the shuffled order and samples all
      ``k`` in one pass; the following calls are served from that bulk.  ``lookahead=False``
      turns this off.
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
so the estimated ``P`` of the bulk fits (:func:`~dgl_accel.sampling.bulk_matrix.estimate_p_bytes`).

SpGEMM: ``spgemm=None`` uses that ``Q`` only selects rows: ``P``'s rows *are* ``A``'s rows, read in
place (no product, no copy), and unweighted rows are sampled by the exact uniform shortcut of ITS.
``spgemm=callable`` (e.g. :func:`~dgl_accel.sampling.bulk_matrix.local_spgemm` or a distributed
product) materialises ``P = spgemm(Q, A)``; the samples are identical either way.

Blocks follow :class:`dgl_accel.sampling.NeighborSampler`: dst = the frontier in the given order,
src = dst first then the new sources in ascending id, ``edata[dgl.EID]`` original edge ids.  A
parallel-edge group is one entry of ``A`` (value = multiplicity, so its neighbour is drawn with
probability proportional to the multiplicity, as edge-level sampling would) and appears as one
block edge with the group's smallest edge id.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from typing import Callable, List, Optional, Sequence

import dgl
import numpy as np
import torch
from dgl.dataloading import BlockSampler

from ..core import backend
from .bulk_its import RowSet, its_sample, quantise, row_label
from .bulk_matrix import (
    adjacency_tensor, canonical_adjacency, canonical_csr, estimate_p_bytes, selection_matrix,
)
from .choice import _np64, check_fanouts, check_nodes, excluded_edge_ids, resolve_seed, single_type_seeds
from . import bulk_jit
from .neighbor import _check_homogeneous, _finish_block, _make_block
from .bulk_triton import make_block_triton
from .rng import call_seed

__all__ = ["BulkNeighborSampler", "BulkScheduler", "check_bulk", "check_spgemm"]


def check_bulk(bulk) -> int:
    if isinstance(bulk, (bool, torch.Tensor)) or not isinstance(bulk, (int, np.integer)) or int(bulk) <= 0:
        raise ValueError(f"expected bulk to be a positive int, the minibatches sampled per pass (got {bulk!r}). "
                         f"Fix: pass e.g. bulk=32.")
    return int(bulk)


def check_spgemm(spgemm):
    if spgemm is not None and not callable(spgemm):
        raise ValueError(f"expected spgemm to be a callable (Q, A) -> Q @ A or None (got {type(spgemm).__name__}). "
                         f"Fix: pass e.g. dgl_accel.sampling.bulk_matrix.local_spgemm.")
    return spgemm


def _check_budget(budget):
    if budget is None:
        return None
    if isinstance(budget, (bool, torch.Tensor)) or not isinstance(budget, (int, float, np.integer)) or budget <= 0:
        raise ValueError(f"expected memory_budget to be a positive number of bytes or None (got {budget!r}). "
                         f"Fix: pass e.g. memory_budget=2 * 2**30.")
    return int(budget)


def _seed_tensor(seed_nodes, n: int, name: str) -> torch.Tensor:
    seeds = single_type_seeds(seed_nodes)
    check_nodes(seeds, n, name)
    if seeds.numel() == 0:
        raise ValueError(f"expected a non-empty batch of {name} (got 0 ids). Fix: drop empty batches "
                         f"(batch size must be >= 1).")
    return seeds


def _upcoming_from_dgl_loader(seeds: torch.Tensor, count: int) -> List[torch.Tensor]:
    """The next ``count`` seed batches of the DGL DataLoader that is calling us, or [] if none is
    found or the current batch does not match its iterator (never guess)."""
    if count <= 0:
        return []
    try:
        from dgl.dataloading.dataloader import _TensorizedDatasetIter
    except ImportError:  # pragma: no cover - other DGL versions
        return []
    f = sys._getframe(1)
    for _ in range(40):
        if f is None:
            return []
        it = getattr(f.f_locals.get("self"), "dataset_iter", None)
        if isinstance(it, _TensorizedDatasetIter):
            if it.mapping_keys is not None:
                return []
            ds, pos, bs = it.dataset, int(it.index), int(it.batch_size)
            num = int(ds.shape[0])
            cur = ds[pos - bs:min(pos, num)]
            if cur.shape != seeds.shape or not torch.equal(cur.to(seeds.device, seeds.dtype), seeds):
                return []
            out = []
            while len(out) < count and pos < num:
                end = pos + bs
                if end > num:
                    if it.drop_last:
                        break
                    end = num
                out.append(ds[pos:end].clone())
                pos += bs
            return out
        f = f.f_back
    return []


def _positions_in_a(flat, counts, rows, p_cols, canon, n: int) -> np.ndarray:
    """Positions picked in a materialised ``P`` -> the same entries' positions in ``A`` (whose
    packed table holds source and edge ids); rejects a ``P`` with entries outside ``Q @ A``."""
    node = np.repeat(rows, counts)
    want = node * np.int64(n) + p_cols[flat]
    keys_a = canon.keys()
    pos = np.searchsorted(keys_a, want)
    if pos.size and (int(pos.max()) >= keys_a.size or not np.array_equal(keys_a[pos], want)):
        raise ValueError("expected spgemm(Q, A) to have nonzeros only where A does (got an entry of P "
                         "outside Q @ A's pattern). Fix: return the exact product Q @ A.")
    return pos


def _add_timing(timing: dict, t0: float, t1: float, t2: float) -> None:
    """Phase split of one layer: probability [t0, t1), sampling [t1, t2), extraction [t2, now)."""
    t3 = time.perf_counter()
    timing["probability"] += t1 - t0
    timing["sampling"] += t2 - t1
    timing["extraction"] += t3 - t2


class BulkScheduler:
    """Serves one-minibatch-at-a-time calls from bulks: the planned / looked-ahead batches of a
    bulk are cached with their minibatch index and handed out when asked for, in order."""

    def __init__(self, lookahead: bool = True):
        self.lookahead = bool(lookahead)
        self._plan: deque = deque()
        self._cache: deque = deque()  # (minibatch index, seeds, result) for the coming calls

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
            upcoming = _upcoming_from_dgl_loader(seeds, k - 1) if self.lookahead else []
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


class BulkNeighborSampler(BlockSampler):
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
    """

    def __init__(self, fanouts, bulk: int = 32, replace: bool = False, seed: Optional[int] = None,
                 spgemm: Optional[Callable] = None, memory_budget=None, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, lookahead: bool = True):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        self.fanouts = check_fanouts(fanouts)
        self.bulk = check_bulk(bulk)
        if not isinstance(replace, (bool, np.bool_)):
            raise ValueError(f"expected replace to be a bool (got {replace!r}). Fix: pass True or False.")
        self.replace = bool(replace)
        self.seed = resolve_seed(seed)
        self.spgemm = check_spgemm(spgemm)
        self.memory_budget = _check_budget(memory_budget)
        self.calls = 0
        self.scheduler = BulkScheduler(lookahead)
        self.last_timing = {"probability": 0.0, "sampling": 0.0, "extraction": 0.0}

    # ---------------------------------------------------------------------------------- API
    def reset(self, call_index: int = 0) -> None:
        """Rewind the minibatch counter and drop planned / cached batches."""
        self.calls = int(call_index)
        self.scheduler.clear()

    def plan(self, seed_batches: Sequence) -> None:
        """Queue the upcoming seed batches: the next ``sample_blocks`` calls asking for them (in this
        order) are served from bulks of ``k``."""
        self.scheduler.plan(seed_batches)

    def bulk_size(self, g, batch_size: int) -> int:
        """k for minibatches of ``batch_size`` seeds: ``bulk``, capped by ``memory_budget``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"expected a positive batch size (got {batch_size!r}). Fix: batch_size >= 1.")
        if self.memory_budget is None:
            return self.bulk
        per = estimate_p_bytes(g, int(batch_size), self.fanouts)
        return max(1, min(self.bulk, self.memory_budget // per))

    def bulk_sample(self, g, seed_batches: Sequence, first_index: Optional[int] = None):
        """Sample the given minibatches (in passes of at most ``bulk_size``); returns a list of
        ``(input_nodes, output_nodes, blocks)``.  Batch j gets minibatch index ``first_index + j``
        (default: the sampler's call counter, which advances by ``len(seed_batches)``)."""
        _check_homogeneous(g)
        if isinstance(seed_batches, torch.Tensor) or not isinstance(seed_batches, Sequence) or not seed_batches:
            raise ValueError(f"expected a non-empty list of seed-node tensors (got {type(seed_batches).__name__}). "
                             f"Fix: pass e.g. list(torch.randperm(n).split(1024)).")
        n = g.num_nodes()
        batches = [_seed_tensor(b, n, f"seed_batches[{i}]") for i, b in enumerate(seed_batches)]
        start = self.calls if first_index is None else int(first_index)
        out = []
        k = self.bulk_size(g, max(int(b.numel()) for b in batches))
        for i in range(0, len(batches), k):
            out.extend(self._sample_bulk(g, batches[i:i + k], start + i, None))
        if first_index is None:
            self.calls += len(batches)
        return out

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        _check_homogeneous(g)
        seeds = _seed_tensor(seed_nodes, g.num_nodes(), "seed nodes")
        idx = self.calls
        self.calls += 1
        k = self.bulk_size(g, int(seeds.numel()))
        return self.scheduler.serve(seeds, idx, k, exclude_eids is not None,
                                    lambda batches, first: self._sample_bulk(g, batches, first, exclude_eids))

    # ---------------------------------------------------------------------------------- core
    def _keys(self, first: int, k: int) -> List[int]:
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else info.id + 1
        return [call_seed(self.seed, first + j, worker) for j in range(k)]

    def _sample_bulk(self, g, batches: List[torch.Tensor], first: int, exclude_eids):
        n = g.num_nodes()
        canon = canonical_adjacency(g)
        keys = self._keys(first, len(batches))
        excl = excluded_edge_ids(exclude_eids)
        idtype = g.idtype
        dev = g.device
        path = backend.choose_path(torch.empty(0, device=dev))
        backend.record("bulk_extract", path, dev)
        frontiers = [_np64(b) for b in batches]
        per_batch: List[list] = [[] for _ in batches]
        timing = {"probability": 0.0, "sampling": 0.0, "extraction": 0.0}
        A_t = None
        for step, fanout in enumerate(reversed(self.fanouts)):
            t0 = time.perf_counter()
            sizes = np.array([f.shape[0] for f in frontiers], dtype=np.int64)
            batch_ptr = np.zeros(len(frontiers) + 1, dtype=np.int64)
            np.cumsum(sizes, out=batch_ptr[1:])
            rows = np.concatenate(frontiers)
            if self.spgemm is None and canon.unit:  # P = Q A is A's rows: read them in place
                start = canon.indptr[rows]
                deg = canon.indptr[rows + 1] - start
                prefix, p_cols = None, None
            else:
                if A_t is None:
                    A_t = adjacency_tensor(g)
                spgemm = self.spgemm
                if spgemm is None:
                    from .bulk_matrix import local_spgemm as spgemm
                p_ptr, p_cols, p_val = canonical_csr(spgemm(selection_matrix(rows, n), A_t), (rows.shape[0], n))
                start, deg = p_ptr[:-1], np.diff(p_ptr)
                w = quantise(p_ptr, p_val)
                prefix = np.cumsum(w)
            t1 = time.perf_counter()
            compiled = path != "triton" and bulk_jit.enabled()
            fused = (compiled and prefix is None and fanout >= 0
                     and rows.shape[0] * max(fanout, 1) >= bulk_jit.MIN_WORK)
            gather = fused and excl is None and bulk_jit.extract_supported(canon)
            if gather:  # compiled ITS reading A's rows in place, emitting (source, edge id) per pick
                src, eids, counts, e_offs = bulk_jit.its_uniform_rows(canon.indptr, rows, batch_ptr, keys, step, n,
                                                                      fanout, self.replace, pairs=canon.pairs)
            elif fused:  # the same picks, as positions in A
                flat, counts, _ = bulk_jit.its_uniform_rows(canon.indptr, rows, batch_ptr, keys, step, n, fanout,
                                                            self.replace)
            elif fanout == -1:  # every positive entry of every row
                rs = RowSet(start, deg, row_label(step, n, rows), keys, batch_ptr, prefix)
                s = int(rs.positives().max()) if rows.size else 0
                flat, counts = its_sample(rs, s, False, dev)
            else:
                rs = RowSet(start, deg, row_label(step, n, rows), keys, batch_ptr, prefix)
                flat, counts = its_sample(rs, fanout, self.replace, dev)
            t2 = time.perf_counter()
            if gather:
                local, news = bulk_jit.relabel_layer(src, e_offs, batch_ptr, rows, n)
            elif compiled and excl is None and bulk_jit.extract_supported(canon) and counts.sum() >= bulk_jit.MIN_WORK:
                if p_cols is not None:
                    flat = _positions_in_a(flat, counts, rows, p_cols, canon, n)
                # every minibatch's relabelling in one compiled pass (one task per minibatch)
                local, eids, news, e_offs = bulk_jit.extract(flat, counts, batch_ptr, rows, canon)
            else:
                local = None
            if local is not None:
                new_frontiers = []
                for b, front in enumerate(frontiers):
                    lo, hi = int(batch_ptr[b]), int(batch_ptr[b + 1])
                    e0, e1 = e_offs[lo], e_offs[hi]
                    block, src_ids = _finish_block(e_offs[lo:hi + 1] - e0, local[e0:e1], front, news[b],
                                                   eids[e0:e1], idtype)
                    per_batch[b].insert(0, block)
                    new_frontiers.append(src_ids)
                frontiers = new_frontiers
                _add_timing(timing, t0, t1, t2)
                continue
            if p_cols is not None:
                flat = _positions_in_a(flat, counts, rows, p_cols, canon, n)
            offs = np.zeros(counts.shape[0] + 1, dtype=np.int64)
            np.cumsum(counts, out=offs[1:])
            new_frontiers = []
            for b, front in enumerate(frontiers):
                lo, hi = int(batch_ptr[b]), int(batch_ptr[b + 1])
                if path == "triton":
                    block, src_ids = make_block_triton(flat[offs[lo]:offs[hi]], counts[lo:hi], front, canon, excl,
                                                       n, idtype, dev)
                else:
                    block, src_ids = _make_block(flat[offs[lo]:offs[hi]], counts[lo:hi], front, canon.pairs, excl, n,
                                                 idtype)
                per_batch[b].insert(0, block)
                new_frontiers.append(src_ids)
            frontiers = new_frontiers
            _add_timing(timing, t0, t1, t2)
        self.last_timing = timing
        out = []
        for seeds, blocks in zip(batches, per_batch):
            out_dev = seeds.device if self.output_device is None else torch.device(self.output_device)
            if out_dev.type != "cpu":
                blocks = [b.to(out_dev) for b in blocks]
            out.append((blocks[0].srcdata[dgl.NID], seeds, blocks))
        return out

    def __repr__(self):
        return (f"BulkNeighborSampler(fanouts={self.fanouts}, bulk={self.bulk}, replace={self.replace}, "
                f"seed={self.seed}, spgemm={getattr(self.spgemm, '__name__', self.spgemm)}, "
                f"memory_budget={self.memory_budget})")
