"""One layer of matrix-based bulk neighbour sampling for ``k`` minibatches at once (Tripathy,
Yelick, Buluc, MLSys'24): the DGL-free pass behind :class:`dgl_accel.sampling.BulkNeighborSampler`
(family ``bulk``; the ITS rules are in :mod:`.its`, the matrices in
:mod:`.matrix`).

Per layer: ``Q`` stacks one row per (minibatch, frontier vertex); ``P = Q @ A`` (``A``: rows =
destinations, :func:`.matrix.canonical_adjacency`); NORM and SAMPLE draw ``fanout`` columns
per row; EXTRACT relabels each minibatch's picks into a block's CSC arrays.  With ``spgemm=None``
and an adjacency without parallel edges, ``P``'s rows *are* ``A``'s rows, read in place (no product,
no copy) and sampled by the exact uniform shortcut of ITS, compiled where numba is available.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ...jit import runtime
from ..arrays import offsets
from ..checks import expected
from ..neighbor.sample import relabel_block
from ..output import SampledLayer, SamplerOutput
from .its import (
    RowSet,
    extract,
    extract_compiled,
    its_sample,
    its_uniform_rows,
    quantise,
    relabel_layer,
    row_label,
)
from .launchers import relabel_triton
from .matrix import adjacency_tensor, canonical_csr, local_spgemm, selection_matrix

__all__ = ["sample_layer", "sample_bulk_cpu", "positions_in_a", "add_timing"]


def positions_in_a(flat, counts, rows, p_cols, canon, n: int) -> np.ndarray:
    """Positions picked in a materialised ``P`` -> the same entries' positions in ``A`` (whose
    packed table holds source and edge ids); rejects a ``P`` with entries outside ``Q @ A``."""
    node = np.repeat(rows, counts)
    want = node * np.int64(n) + p_cols[flat]
    keys_a = canon.keys()
    pos = np.searchsorted(keys_a, want)
    if pos.size and (int(pos.max()) >= keys_a.size or not np.array_equal(keys_a[pos], want)):
        raise expected("spgemm(Q, A) to have nonzeros only where A does", "an entry of P outside Q @ A's pattern",
                       "return the exact product Q @ A.")
    return pos


def add_timing(timing: dict, t0: float, t1: float, t2: float) -> None:
    """Phase split of one layer: probability [t0, t1), sampling [t1, t2), extraction [t2, now)."""
    t3 = time.perf_counter()
    timing["probability"] += t1 - t0
    timing["sampling"] += t2 - t1
    timing["extraction"] += t3 - t2


def sample_layer(canon, frontiers, keys, step: int, fanout: int, *, replace: bool, spgemm, excl, path: str,
                 device, adjacency):
    """Sample layer ``step`` (0 = nearest the output) of every minibatch: ``frontiers[b]`` (int64
    destination ids of minibatch b, keyed by ``keys[b]``) draws ``fanout`` in-neighbours per
    destination (-1: all), minus the edge ids ``excl``.

    ``path``: "triton" (kernels on ``device``) or "native"; ``adjacency()``: ``A`` as a sparse
    tensor (called only when ``P`` is materialised).  Returns ``(parts, marks)``: per minibatch the
    arrays of :func:`..neighbor.sample.relabel_block` ``(indptr, local sources, new sources, edge ids)``,
    and the phase times ``(t0, t1, t2)`` for :func:`add_timing`."""
    n = canon.n
    t0 = time.perf_counter()
    batch_ptr = offsets(np.array([f.shape[0] for f in frontiers], dtype=np.int64))
    rows = np.concatenate(frontiers)
    if spgemm is None and canon.unit:  # P = Q A is A's rows: read them in place
        start = canon.indptr[rows]
        deg = canon.indptr[rows + 1] - start
        prefix, p_cols = None, None
    else:
        product = local_spgemm if spgemm is None else spgemm
        p_ptr, p_cols, p_val = canonical_csr(product(selection_matrix(rows, n), adjacency()), (rows.shape[0], n))
        start, deg = p_ptr[:-1], np.diff(p_ptr)
        prefix = np.cumsum(quantise(p_ptr, p_val))
    t1 = time.perf_counter()
    compiled = path != "triton" and runtime.enabled()
    fused = compiled and prefix is None and fanout >= 0 and runtime.worth(rows.shape[0] * max(fanout, 1))
    gather = fused and excl is None and extract_compiled(canon)
    if gather:  # compiled ITS reading A's rows in place, emitting (source, edge id) per pick
        src, eids, counts, e_offs = its_uniform_rows(canon.indptr, rows, batch_ptr, keys, step, n, fanout, replace,
                                                     pairs=canon.pairs)
    elif fused:  # the same picks, as positions in A
        flat, counts, _ = its_uniform_rows(canon.indptr, rows, batch_ptr, keys, step, n, fanout, replace)
    else:
        rs = RowSet(start, deg, row_label(step, n, rows), keys, batch_ptr, prefix)
        if fanout == -1:  # every positive entry of every row
            flat, counts = its_sample(rs, int(rs.positives().max()) if rows.size else 0, False, device)
        else:
            flat, counts = its_sample(rs, fanout, replace, device)
    t2 = time.perf_counter()
    local = None
    if gather:
        local, news = relabel_layer(src, e_offs, batch_ptr, rows, n)
    elif compiled and excl is None and extract_compiled(canon) and runtime.worth(int(counts.sum())):
        if p_cols is not None:
            flat = positions_in_a(flat, counts, rows, p_cols, canon, n)
        # every minibatch's relabelling in one compiled pass (one task per minibatch)
        local, eids, news, e_offs = extract(flat, counts, batch_ptr, rows, canon)
    parts = []
    if local is not None:
        for b in range(len(frontiers)):
            lo, hi = int(batch_ptr[b]), int(batch_ptr[b + 1])
            e0, e1 = e_offs[lo], e_offs[hi]
            parts.append((e_offs[lo:hi + 1] - e0, local[e0:e1], news[b], eids[e0:e1]))
        return parts, (t0, t1, t2)
    if p_cols is not None:
        flat = positions_in_a(flat, counts, rows, p_cols, canon, n)
    offs = offsets(counts)
    for b, front in enumerate(frontiers):
        lo, hi = int(batch_ptr[b]), int(batch_ptr[b + 1])
        mine, c = flat[offs[lo]:offs[hi]], counts[lo:hi]
        if path == "triton":
            parts.append(relabel_triton(mine, c, front, canon, excl, n, device))
        else:
            parts.append(relabel_block(mine, c, front, canon.pairs, excl, n))
    return parts, (t0, t1, t2)


def sample_bulk_cpu(canon, batches, keys, fanouts, *, replace: bool, excl=None) -> list[SamplerOutput]:
    """Every layer of the minibatches ``batches`` (int64 numpy seed ids, keyed by ``keys``) on the CPU
    path, ``fanouts`` input layer first, as the typed output of the device pipeline
    (:func:`.neighbor_device.sample_bulk_device`, whose samples these are).  ``excl``: sorted int64 edge
    ids, or None."""
    frontiers = [np.asarray(b, dtype=np.int64) for b in batches]
    layers: list[list[SampledLayer]] = [[] for _ in batches]
    for step, fanout in enumerate(reversed(list(fanouts))):
        parts, _ = sample_layer(canon, frontiers, keys, step, fanout, replace=replace, spgemm=None, excl=excl,
                                path="native", device="cpu", adjacency=lambda: adjacency_tensor(canon))
        for b, (indptr, local, new, eids) in enumerate(parts):
            src = np.concatenate([frontiers[b], new])
            layers[b].insert(0, SampledLayer(*(torch.from_numpy(np.asarray(a, dtype=np.int64)) for a in (
                frontiers[b], src, indptr, local, eids))))
            frontiers[b] = src
    return [SamplerOutput(torch.from_numpy(np.asarray(b, dtype=np.int64)), tuple(ls)) for b, ls in zip(batches, layers)]
