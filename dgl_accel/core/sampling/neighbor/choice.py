"""Neighbour choice: which in-neighbours (CSR positions) each transit node samples: the CPU twin
of the neighbour family (kernels ``kernels/sampling.py``, launcher :mod:`.launchers`,
compiled twin :mod:`dgl_accel.core.jit.neighbor`, entry point :mod:`.sample`).

This module is the *specification* a Triton kernel reproduces bit for bit, so the uniform rules
below are literal.  Notation: ``v = transits[i]`` is a transit node, its in-neighbours are the CSR
positions ``indptr[v] .. indptr[v+1]-1``, ``d = deg(v)``, ``start = indptr[v]`` and ``F = fanout``.

Counter layout (uniform choice): one Philox4x32 evaluation gives four 32-bit words, so slot j of
transit v uses word ``j % 4`` of counter ``j // 4`` of its block of ``W = ceil(F / 4)`` counters::

    W       = (F + 3) // 4
    c(v, k) = (step * num_nodes + v) * W + k          0 <= k < W
    r_j     = philox4x32(seed, c(v, j // 4))[j % 4]   int in [0, 2^32)   (tl.randint4x word j % 4)

so a draw depends only on (seed, step, node, slot), never on the batch it came in or the device.
``F == -1`` (all neighbours) uses no randomness.

Uniform, ``replace=True``: ``pos[i, j] = start + r_j % d``; all -1 when ``d == 0``.

Uniform, ``replace=False``: ``d <= F``: ``pos[i, j] = start + j`` for ``j < d``, -1 after.
``d > F``: Floyd's algorithm (a uniform F-subset)::

    chosen = []
    for j in 0 .. F-1:
        m = d - F + j
        t = r_j % (m + 1)
        if t in chosen: t = m
        chosen.append(t); pos[i, j] = start + t

Weighted choice (``prob`` = one non-negative weight per edge, in edge-id order) keeps one draw
(word 0) per counter; its layouts are documented on :func:`weighted_neighbor_choice`, and
:mod:`.choice_device` gives the same positions with torch ops on the tables' device.

CPU implementation note: the work is done in numpy on zero-copy views of the tensors.  Philox in
numpy's uint64 arithmetic (a 32x32-bit product fits exactly) is bit-identical to ``rng.philox_randint``
(tests check it) and ~100x faster on CPU than the int64-split torch version; numpy also avoids
torch's intra-op thread pool, whose barrier costs milliseconds per op when other processes share the
cores.  Here non-CPU tensors are copied to the CPU and the result back; :mod:`.sample` sends
them to the Triton kernel instead.
"""
from __future__ import annotations

import threading

import numpy as np
import torch

from ...jit import neighbor as jit_neighbor
from ...jit import runtime
from ..arrays import np64, offsets
from ..checks import check_fanout, check_indptr, check_int, check_nodes, check_prob, check_seed, expected
from ..rng import philox4x32_np, philox_uniform_np
from .choice_device import DeviceWeights

__all__ = [
    "neighbor_choice", "weighted_neighbor_choice", "uniform_choice_np", "uniform_choice_flat", "weighted_choice_np",
    "WeightTables", "weight_tables", "clear_cache",
]


# ------------------------------------------------------------------------------ helpers
def _counters(step: int, num_nodes: int, v: np.ndarray, width: int) -> np.ndarray:
    """c(i, j) = (step * num_nodes + v_i) * width + j, int64 [len(v), width]."""
    base = (np.int64(step) * np.int64(num_nodes) + v) * np.int64(width)
    return base[:, None] + np.arange(width, dtype=np.int64)


def _validate(indptr, transits, fanout, seed, step, num_nodes):
    check_indptr(indptr)
    fanout = check_fanout(fanout)
    seed = check_seed(seed)
    step = check_int(step, "step")
    num_nodes = check_int(num_nodes, "num_nodes")
    num_rows = indptr.numel() - 1
    check_nodes(transits, min(num_rows, num_nodes) if num_nodes else num_rows, "transit nodes")
    return fanout, seed, step, num_nodes


def _all_neighbors(start: np.ndarray, d: np.ndarray) -> np.ndarray:
    """fanout -1: [T, max deg] positions start + j for j < d, -1 padded."""
    width = int(d.max()) if d.size else 0
    j = np.arange(width, dtype=np.int64)
    pos = start[:, None] + j
    pos[j >= d[:, None]] = -1
    return pos


def _slot_words(seed: int, step: int, num_nodes: int, v: np.ndarray, fanout: int) -> np.ndarray:
    """Slot-major uint32 [fanout, len(v)] draws: slot j of transit v is word (j % 4) of
    ``philox4x32(seed, (step * num_nodes + v) * W + j // 4)``, W = ceil(fanout / 4)."""
    W = (fanout + 3) // 4
    base = (np.int64(step) * np.int64(num_nodes) + v) * np.int64(W)
    words = philox4x32_np(seed, base[None, :] + np.arange(W, dtype=np.int64)[:, None])  # 4 x [W, H]
    r = np.empty((W, 4, v.shape[0]), dtype=np.uint32)
    for k in range(4):
        r[:, k] = words[k]  # exact: every word is < 2^32
    return r.reshape(4 * W, v.shape[0])[:fanout]


def _floyd_exact(t: np.ndarray, m: np.ndarray) -> None:
    """Floyd's membership rule in place on slot-major [F, H] raw draws t (t[j] = r_j % (m_j + 1)):
    slot j takes m_j when its draw repeats an earlier slot's value."""
    F, H = t.shape
    cmp = np.empty((F, H), dtype=bool)
    hit = np.empty(H, dtype=bool)
    for jj in range(1, F):
        tj = t[jj]
        np.equal(t[:jj], tj, out=cmp[:jj])
        np.logical_or.reduce(cmp[:jj], axis=0, out=hit)
        np.copyto(tj, m[jj], where=hit)


def _uniform_draws(start: np.ndarray, d: np.ndarray, v: np.ndarray, fanout: int, seed: int, step: int,
                   num_nodes: int, replace: bool):
    """(rows, t): the rows that use randomness (d > 0 with replacement, d > fanout without) and their
    chosen local offsets, slot-major [fanout, len(rows)] (position = start[row] + t)."""
    rows = np.flatnonzero(d > 0) if replace else np.flatnonzero(d > fanout)
    if not rows.size:
        return rows, np.empty((fanout, 0), dtype=np.int64)
    dr = d[rows]
    r = _slot_words(seed, step, num_nodes, v[rows], fanout)
    narrow = int(dr.max()) < 2**31  # 32-bit arithmetic (3x faster modulo) whenever offsets fit
    if not narrow:
        r = r.astype(np.int64)
        dr = dr.astype(np.int64)
    if replace:
        return rows, (r % dr.astype(r.dtype)).view(np.int32) if narrow else r % dr
    m = (dr - fanout).astype(np.int32 if narrow else np.int64)[None, :] \
        + np.arange(fanout, dtype=np.int32 if narrow else np.int64)[:, None]  # m for every slot
    t = r % (m + 1).view(r.dtype) if narrow else r % (m + 1)
    t = t.view(m.dtype)
    _floyd_exact(t, m)
    return rows, t


def uniform_choice_np(indptr: np.ndarray, v: np.ndarray, fanout: int, seed: int, step: int,
                      num_nodes: int, replace: bool, counter_ids: np.ndarray | None = None) -> np.ndarray:
    """The module-level rules on numpy int64 arrays (no validation): [T, fanout] positions.
    ``counter_ids`` (default ``v``) name the Philox counters, e.g. sample * n + v with
    num_nodes = samples * n, so samples sharing a transit draw independently."""
    start = indptr[v]
    d = indptr[v + 1] - start
    if fanout == -1:
        return _all_neighbors(start, d)
    T = v.shape[0]
    if fanout == 0 or T == 0:
        return np.full((T, fanout), -1, dtype=np.int64)
    if replace:
        out = np.full((T, fanout), -1, dtype=np.int64)
    else:  # rows with d <= fanout: every neighbour in CSR order, then -1 (only such rows have j >= d)
        j = np.arange(fanout, dtype=np.int64)
        out = np.where(j < d[:, None], start[:, None] + j, -1)
    rows, t = _uniform_draws(start, d, v if counter_ids is None else counter_ids, fanout, seed, step, num_nodes,
                             replace)
    if rows.size:
        out[rows] = (start[rows] + t).T
    return out


def uniform_choice_flat(indptr: np.ndarray, v: np.ndarray, fanout: int, seed: int, step: int,
                        num_nodes: int, replace: bool):
    """The same choice as :func:`uniform_choice_np` without the -1 padding: (positions int64 [E],
    counts int64 [T]), row i's positions at ``offs[i]:offs[i+1]`` (offs = exclusive scan of counts)
    in slot order."""
    start = indptr[v]
    d = indptr[v + 1] - start
    if fanout == -1 or fanout == 0 or v.shape[0] == 0:
        counts = d if fanout == -1 else np.zeros(v.shape[0], dtype=np.int64)
        fixed = None
    else:
        counts = np.where(d > 0, fanout, 0) if replace else np.minimum(d, fanout)
        fixed = fanout
    offs = offsets(counts)
    E = int(offs[-1])
    if runtime.worth(E):  # same positions, one compiled pass per transit
        return jit_neighbor.uniform_choice_flat(indptr, v, fanout, seed, step, num_nodes, replace, counts, offs), counts
    if fixed is None:  # start + j for every row
        pos = np.arange(E, dtype=np.int64)
        pos += np.repeat(start - offs[:-1], counts)
        return pos, counts
    T = v.shape[0]
    rows, t = _uniform_draws(start, d, v, fanout, seed, step, num_nodes, replace)
    # padded row-major [T, fanout] (row writes, no element scatter), then one gather of the valid
    # prefix of every row; rows without draws hold start + j (their counts prefix), replace rows all
    # draw, and rows with zero count are never read
    pad = np.empty((T, fanout), dtype=np.int64)
    if not replace and rows.size < T:  # one broadcast add beats a row scatter of the light rows
        np.add(start[:, None], np.arange(fanout, dtype=np.int64), out=pad)
    if rows.size:
        pad[rows] = t.T + start[rows][:, None]
    if E == T * fanout:
        return pad.reshape(-1), counts
    gi = np.arange(E, dtype=np.int64)
    gi += np.repeat(np.arange(0, T * fanout, fanout, dtype=np.int64) - offs[:-1], counts)
    pos = np.take(pad.reshape(-1), gi)
    return pos, counts


def neighbor_choice(indptr: torch.Tensor, transits: torch.Tensor, fanout: int, *, seed: int, step: int,
                    num_nodes: int, replace: bool = False) -> torch.Tensor:
    """Uniform neighbour choice: int64 [T, fanout] CSR positions (-1 = no neighbour in that slot).

    Follows the module docstring literally.  ``fanout=-1`` returns every neighbour: [T, max deg]
    positions ``start + j`` padded with -1 (no randomness).  Map positions to source ids with
    ``indices[pos]`` and to edge ids with ``eids[pos]`` (of the same CSR).

    >>> indptr = torch.tensor([0, 3, 3, 5])      # node 0: 3 in-neighbours, node 1: none, node 2: two
    >>> neighbor_choice(indptr, torch.tensor([0, 1, 2]), 2, seed=0, step=0, num_nodes=3).shape
    torch.Size([3, 2])
    """
    fanout, seed, step, num_nodes = _validate(indptr, transits, fanout, seed, step, num_nodes)
    out = uniform_choice_np(np64(indptr), np64(transits), fanout, seed, step, num_nodes, bool(replace))
    return torch.from_numpy(out).to(transits.device)


# ------------------------------------------------------------------------------ weighted
class WeightTables:
    """Per-CSR weight tables for one (indptr, eids, prob) triple (see weighted_neighbor_choice)."""

    def __init__(self, indptr: np.ndarray, eids: np.ndarray, prob: torch.Tensor):
        p = prob.detach().cpu()
        p = p.numpy() if p.dtype != torch.bfloat16 else p.float().numpy()
        w = p[eids].astype(np.float64)  # CSR order
        n = indptr.shape[0] - 1
        d = np.diff(indptr)
        rowsum = np.zeros(n, dtype=np.float64)
        nz = np.flatnonzero(d > 0)
        if nz.size:  # reduceat sums each row on its own: exact-ish whatever the other rows hold
            rowsum[nz] = np.add.reduceat(w, indptr[:-1][nz])
        row_of = np.repeat(np.arange(n, dtype=np.int64), d)
        safe = np.where(rowsum > 0, rowsum, 1.0)
        wn = w / safe[row_of]
        # cum0[k] = sum of row-normalised weights before CSR position k: each row adds ~1, so the
        # rounding error a row sees is ~eps * (number of rows before it), not eps * total weight.
        self.cum0 = np.concatenate([[0.0], np.cumsum(wn)])
        self.cum = self.cum0[1:]
        self.w = w
        pos_cnt = np.concatenate([[0], np.cumsum(w > 0)])
        self.npos = pos_cnt[indptr[1:]] - pos_cnt[indptr[:-1]]  # positive-weight edges per row
        self._on = {}

    def on(self, device) -> DeviceWeights:
        """The tables as tensors on ``device`` for the device pipeline (copied on the first call for
        a device, then kept with the tables)."""
        device = torch.device(device)
        if device not in self._on:
            self._on[device] = DeviceWeights(*(torch.from_numpy(a).to(device) for a in (self.cum0, self.w, self.npos)))
        return self._on[device]


_TABLE_LOCK = threading.Lock()
_TABLE: dict = {}  # one entry: key -> (strong refs keeping data_ptrs unique, tables)


def clear_cache() -> None:
    """Drop the cached weight tables."""
    with _TABLE_LOCK:
        _TABLE.clear()


def weight_tables(indptr_t, eids_t, prob, indptr: np.ndarray | None = None, eids: np.ndarray | None = None, *,
                  name: str = "prob") -> WeightTables:
    """The :class:`WeightTables` of (indptr, eids, prob), cached for the last triple asked for.

    ``prob`` is checked (:func:`..checks.check_prob`, ``name`` in its errors): its shape on every call,
    its values when the tables are built (a cached triple was checked then, and is not read again).
    ``indptr`` / ``eids``: the CSR's arrays as int64 numpy, when the caller has them (else copied
    on a miss only)."""
    check_prob(prob, eids_t.numel(), name, values=False)
    key = (indptr_t.data_ptr(), indptr_t.numel(), eids_t.data_ptr(), eids_t.numel(),
           prob.data_ptr(), prob.numel(), prob._version, prob.dtype, prob.device)
    with _TABLE_LOCK:
        hit = _TABLE.get(key)
    if hit is not None:
        return hit[1]
    check_prob(prob, eids_t.numel(), name)
    tab = WeightTables(np64(indptr_t) if indptr is None else indptr, np64(eids_t) if eids is None else eids, prob)
    with _TABLE_LOCK:
        _TABLE.clear()  # a single entry: the sampler reuses one weight tensor per graph
        _TABLE[key] = ((indptr_t, eids_t, prob), tab)  # refs keep the pointers from being reused
    return tab


def weighted_neighbor_choice(indptr: torch.Tensor, eids: torch.Tensor, prob: torch.Tensor,
                             transits: torch.Tensor, fanout: int, *, seed: int, step: int, num_nodes: int,
                             replace: bool = False) -> torch.Tensor:
    """Weighted neighbour choice (CPU path): int64 [T, fanout] CSR positions, -1 = empty slot.

    ``prob[e]`` is the weight of edge id ``e`` (edge-id order, like ``g.edata[name]``); the weight
    of CSR position ``k`` is ``prob[eids[k]]``.  Zero-weight edges are never chosen.

    ``replace=True`` (inverse CDF): slot j of transit i draws ``u_j = philox_uniform(seed, c(i, j))``
    (word 0) with the counter ``c(i, j) = (step * num_nodes + v) * fanout + j`` and picks the CSR
    position k in v's row with ``W(k-1) <= u_j * W(row) < W(k)``, W = prefix sums of the row's
    weights (binary search).  Prefix sums are of row-normalised weights, in float64, cached per
    (indptr, eids, prob) triple; a weight below ~1e-11 of its row's total is not resolved.
    Rows with no positive weight: all -1.

    ``replace=False`` (Efraimidis-Spirakis): every edge at CSR position k gets the uniform
    ``u_k = philox_uniform(seed, step * num_edges + k)`` (num_edges = indptr[-1]; a global edge-position
    counter, so one row's keys never depend on the other transits) and the key ``u_k ** (1 / w_k)``,
    computed as ``log(u_k) / w_k`` in float64 (same order).  Slots hold the ``fanout`` largest keys in
    decreasing key order (ties: lower CSR position first), so slot 0 is distributed as one weighted
    draw and the set as successive weighted draws without replacement.  Rows with at most ``fanout``
    positive-weight edges return all of them in CSR order.

    >>> indptr, eids = torch.tensor([0, 3]), torch.tensor([0, 1, 2])
    >>> weighted_neighbor_choice(indptr, eids, torch.tensor([0.0, 1.0, 0.0]), torch.tensor([0]), 1,
    ...                          seed=0, step=0, num_nodes=1).tolist()   # only edge 1 has weight
    [[1]]
    """
    fanout, seed, step, num_nodes = _validate(indptr, transits, fanout, seed, step, num_nodes)
    num_edges = int(indptr[-1])
    if not isinstance(eids, torch.Tensor) or eids.dim() != 1 or eids.numel() != num_edges:
        got = tuple(eids.shape) if isinstance(eids, torch.Tensor) else type(eids).__name__
        raise expected(f"eids to be a 1-D tensor with indptr[-1] = {num_edges} entries", got,
                       "pass the eids of the same CSR as indptr.")
    ip, e = np64(indptr), np64(eids)
    tab = weight_tables(indptr, eids, prob, ip, e)
    out = weighted_choice_np(ip, tab, np64(transits), fanout, seed, step, num_nodes, bool(replace))
    return torch.from_numpy(out).to(transits.device)


def weighted_choice_np(indptr: np.ndarray, tab: WeightTables, v: np.ndarray, fanout: int, seed: int,
                       step: int, num_nodes: int, replace: bool) -> np.ndarray:
    """The weighted rules of :func:`weighted_neighbor_choice` on numpy arrays (no validation)."""
    start, end = indptr[v], indptr[v + 1]
    T = v.shape[0]
    if fanout == -1:  # every positive-weight neighbour
        pos = _all_neighbors(start, end - start)
        ok = pos >= 0
        ok[ok] = tab.w[pos[ok]] > 0
        pos[~ok] = -1
        return pos
    out = np.full((T, fanout), -1, dtype=np.int64)
    if fanout == 0 or T == 0:
        return out
    npos = tab.npos[v]
    if replace:
        rows = np.flatnonzero(npos > 0)
        if rows.size:
            u = philox_uniform_np(seed, _counters(step, num_nodes, v[rows], fanout)).astype(np.float64)
            base, top = tab.cum0[start[rows]], tab.cum0[end[rows]]
            target = base[:, None] + u * (top - base)[:, None]
            k = np.searchsorted(tab.cum, target, side="right")  # first k with W(k) > target
            over = k >= end[rows, None]  # rounding pushed past the row: take its last positive edge
            if over.any():
                k[over] = np.searchsorted(tab.cum, np.broadcast_to(top[:, None], k.shape)[over], side="left")
            out[rows] = k
        return out
    # without replacement
    light = np.flatnonzero((npos <= fanout) & (npos > 0))
    if light.size:
        pos = _all_neighbors(start[light], end[light] - start[light])
        ok = pos >= 0
        ok[ok] = tab.w[pos[ok]] > 0
        # stable compaction of the positive-weight positions to the left, CSR order kept
        order = np.argsort(~ok, axis=1, kind="stable")
        pos = np.take_along_axis(np.where(ok, pos, -1), order, axis=1)[:, :fanout]
        out[light, :pos.shape[1]] = pos
    heavy = np.flatnonzero(npos > fanout)
    if heavy.size:
        s, dh = start[heavy], end[heavy] - start[heavy]
        seg = np.repeat(np.arange(heavy.size, dtype=np.int64), dh)
        seg_off = np.concatenate([[0], np.cumsum(dh)])
        k = np.arange(seg.size, dtype=np.int64) - seg_off[seg] + s[seg]  # CSR positions
        keep = tab.w[k] > 0
        seg, k = seg[keep], k[keep]
        u = philox_uniform_np(seed, np.int64(step) * np.int64(tab.w.shape[0]) + k).astype(np.float64)
        with np.errstate(divide="ignore"):
            key = np.log(u) / tab.w[k]
        order = np.lexsort((-key, seg))  # by row, then key descending; stable (ties: lower position)
        seg, k = seg[order], k[order]
        first = np.searchsorted(seg, np.arange(heavy.size), side="left")
        rank = np.arange(seg.size) - first[seg]
        sel = rank < fanout
        out[heavy[seg[sel]], rank[sel]] = k[sel]
    return out
