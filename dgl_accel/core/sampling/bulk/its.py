"""Row-wise inverse transform sampling (ITS): the NORM and SAMPLE steps of matrix-based bulk
sampling (Tripathy, Yelick, Buluc, MLSys'24), specified exactly so every path draws the same sample.

A probability matrix ``P`` (CSR, columns ascending within a row) is sampled row by row.  This module
is the specification the Triton kernels (``kernels/bulk_sampling.py``, launchers in
:mod:`.launchers`) and the optional numba loops (:mod:`dgl_accel.core.jit.bulk_sampling`)
reproduce bit for bit; the numpy code below is the reference path, :func:`its_sample` the dispatch.

NORM (exact integer weights)
    ``w = floor(p / max(row) * 2^24)`` for ``p > 0`` (at least 1), ``0`` for ``p <= 0``, stored as
    float64.  Integer-valued weights make every prefix sum exact in any summation order (totals stay
    below 2^53 for rows of fewer than 2^29 entries), so a CPU prefix sum, a GPU scan and a
    distributed product that left ``P``'s entries in another order all give the same thresholds.
    The relative quantisation error of a probability is at most ``2^-24`` of the row's largest one.
    A row whose entries are all equal (GraphSAGE's rows of an unweighted graph) is *uniform*: every
    weight is ``2^24`` and the draw below reduces to ``floor(r * deg / 2^32)`` exactly, which the
    fast paths use without materialising weights.

SAMPLE (one row, ``s`` picks)
    Draw ``t = 0, 1, 2, ...`` of a row uses ``r_t = philox4x32(key, (label << 24) + t // 4)[t % 4]``
    (a uint32; ``key`` names the sampler call / minibatch, ``label`` the row: see ``row_label``).
    ``x_t = floor((r_t * 2^-32) * T)`` with ``T`` the row total; the pick is the first entry whose
    inclusive prefix sum exceeds ``x_t`` (binary search; zero-weight entries are never picked).

    * with replacement: picks of draws ``0 .. s-1`` in draw order (repeats kept);
    * without replacement: a row with at most ``s`` positive entries takes all of them; otherwise
      draws continue until ``s`` distinct entries were seen ("repeat until s distinct picks") and
      the row keeps those ``s`` entries in ascending column order.  For a uniform row this is a
      uniform ``s``-subset; for weights it is successive sampling (draw-by-draw without
      replacement, the same law as Efraimidis-Spirakis keys).  Draws stop at ``MAX_DRAWS`` (never
      reached in practice: a row with ``s + 1`` entries needs about ``s ln s`` draws).

So a row's sample depends only on (its entries' values, key, label, s, replace): not on the other
rows in the bulk, on how ``P`` was computed, or on the device.

>>> quantise(np.array([0, 3]), np.array([0.5, 1.0, 0.0])).tolist()   # NORM: integer weights, 0 stays 0
[8388608.0, 16777216.0, 0.0]
"""
from __future__ import annotations

import numpy as np
import torch

from ...backend import choose_path, record
from ...jit import bulk_sampling as jit_bulk
from ...jit import runtime
from ..checks import expected
from ..rng import philox4x32_np
from .buffers import default_pool
from .launchers import compact_rows_triton, draw_triton

__all__ = ["W_SCALE", "LABEL_SHIFT", "MAX_DRAWS", "quantise", "row_label", "RowSet", "its_sample", "its_sample_np",
           "its_sample_triton", "its_uniform_rows", "extract_compiled", "extract", "relabel_layer"]

W_SCALE = float(2 ** 24)
LABEL_SHIFT = 24                      # draw t lives in counter (label << 24) + t // 4
MAX_DRAWS = 4 << LABEL_SHIFT          # counters of one row never spill into the next label
_TWO_M32 = float(2.0 ** -32)
_MAX_LABEL = 1 << (63 - LABEL_SHIFT)


def row_label(layer: int, num_nodes: int, node: np.ndarray) -> np.ndarray:
    """Counter label of a row: ``layer * num_nodes + node`` (node = the row's vertex; LADIES' one
    row per minibatch uses node 0).  Must stay below 2^39 so counters fit 63 bits."""
    lab = np.int64(layer) * np.int64(num_nodes) + node.astype(np.int64, copy=False)
    if lab.size and int(lab.max()) >= _MAX_LABEL:
        raise expected("layer * num_nodes + node < 2^39", int(lab.max()), "use fewer layers or partition the graph.")
    return lab


def quantise(indptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """NORM: integer-valued float64 weights per entry (see the module docstring)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.zeros(v.shape[0], dtype=np.float64)
    if v.size == 0:
        return w
    deg = np.diff(indptr)
    nz = np.flatnonzero(deg > 0)
    rowmax = np.zeros(deg.shape[0], dtype=np.float64)
    rowmax[nz] = np.maximum.reduceat(v, indptr[:-1][nz])  # reduceat misbehaves on empty rows only
    scale = np.repeat(rowmax, deg)
    pos = v > 0
    w[pos] = np.maximum(np.floor(v[pos] / scale[pos] * W_SCALE), 1.0)
    return w


class RowSet:
    """Rows to sample: entries ``start[i] .. start[i] + deg[i] - 1`` of a position space, rows of
    minibatch ``b`` at ``batch_ptr[b]:batch_ptr[b+1]`` drawing with Philox key ``keys[b]``.

    ``prefix`` is the inclusive prefix sum of the quantised weights over the whole position space
    (float64, exact), or None for uniform rows (all weights equal)."""

    __slots__ = ("start", "deg", "labels", "keys", "batch_ptr", "prefix")

    def __init__(self, start, deg, labels, keys, batch_ptr, prefix=None):
        self.start, self.deg, self.labels = start, deg, labels
        self.keys, self.batch_ptr, self.prefix = [int(k) for k in keys], batch_ptr, prefix

    @property
    def num_rows(self) -> int:
        return int(self.start.shape[0])

    def totals(self):
        """(base, T): prefix value before each row and the row total (weighted rows)."""
        p = self.prefix
        if p.size == 0:
            z = np.zeros(self.start.shape[0])
            return z, z.copy()
        before = np.where(self.start > 0, p[np.maximum(self.start - 1, 0)], 0.0)
        last = np.clip(self.start + self.deg - 1, 0, p.size - 1)
        return before, np.where(self.deg > 0, p[last] - before, 0.0)

    def positives(self) -> np.ndarray:
        """Entries with positive weight per row."""
        if self.prefix is None:
            return self.deg.copy()
        w = np.diff(self.prefix, prepend=0.0) > 0
        c = np.concatenate([[0], np.cumsum(w)])
        return c[self.start + self.deg] - c[self.start]


# ------------------------------------------------------------------------------- draws (numpy)
def _words(rs: RowSet, rows: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """uint64 [len(rows), t1 - t0] draws r_t (t0 % 4 == 0) of the given rows (ascending)."""
    nw = (t1 - t0 + 3) // 4
    out = np.empty((rows.shape[0], 4 * nw), dtype=np.uint64)
    cuts = np.searchsorted(rows, rs.batch_ptr)
    base = (rs.labels[rows] << np.int64(LABEL_SHIFT)) + np.int64(t0 // 4)
    ar = np.arange(nw, dtype=np.int64)
    for b, key in enumerate(rs.keys):
        lo, hi = int(cuts[b]), int(cuts[b + 1])
        if hi > lo:
            words = philox4x32_np(key, base[lo:hi, None] + ar[None, :])
            seg = out[lo:hi].reshape(hi - lo, nw, 4)
            for k in range(4):
                seg[:, :, k] = words[k]
    return out[:, :t1 - t0]


def _picks(rs: RowSet, rows: np.ndarray, t0: int, t1: int, before=None, total=None) -> np.ndarray:
    """Row-local entry index (int64 [len(rows), t1 - t0]) chosen by draws t0 .. t1-1."""
    r = _words(rs, rows, t0, t1)
    if rs.prefix is None:  # uniform: floor(r * deg / 2^32), exact in uint64 (deg < 2^31)
        return ((r * rs.deg[rows].astype(np.uint64)[:, None]) >> np.uint64(32)).astype(np.int64)
    u = r.astype(np.float64) * _TWO_M32
    x = before[rows][:, None] + np.floor(u * total[rows][:, None])
    pos = np.searchsorted(rs.prefix, x, side="right")
    return pos - rs.start[rows][:, None]


def _first_distinct(j: np.ndarray, s: int):
    """For each row of draws j [R, D]: (done [R], picks [R_done, s] ascending) where picks are the
    first s distinct values in draw order."""
    order = np.argsort(j, axis=1, kind="stable")  # equal values: earlier draw first
    js = np.take_along_axis(j, order, axis=1)
    first = np.ones(j.shape, dtype=bool)
    first[:, 1:] = js[:, 1:] != js[:, :-1]
    fo = np.empty_like(first)
    np.put_along_axis(fo, order, first, axis=1)      # first occurrences, in draw order
    cum = np.cumsum(fo, axis=1)
    done = cum[:, -1] >= s
    keep = np.take_along_axis(fo & (cum <= s), order, axis=1)[done]
    return done, js[done][keep].reshape(-1, s)


def _without_replacement(rs: RowSet, rows: np.ndarray, s: int, before, total) -> np.ndarray:
    """Ascending local picks [len(rows), s] for rows with more than s positive entries."""
    out = np.empty((rows.shape[0], s), dtype=np.int64)
    j = _picks(rs, rows, 0, s, before, total)
    js = np.sort(j, axis=1)
    clash = (js[:, 1:] == js[:, :-1]).any(axis=1) if s > 1 else np.zeros(rows.shape[0], dtype=bool)
    out[~clash] = js[~clash]  # the common case: the first s draws are already distinct
    todo = np.flatnonzero(clash)
    D = 2 * s
    while todo.size:
        D4 = min(-(-D // 4) * 4, MAX_DRAWS)
        done, picks = _first_distinct(_picks(rs, rows[todo], 0, D4, before, total), s)
        out[todo[done]] = picks
        todo = todo[~done]
        if D4 >= MAX_DRAWS and todo.size:  # pragma: no cover - needs ~2^26 draws in one row
            raise RuntimeError("ITS without replacement did not find s distinct entries within MAX_DRAWS")
        D *= 2
    return out


def its_sample_np(rs: RowSet, s: int, replace: bool, draw=None):
    """(positions int64 [E], counts int64 [R]): row i's picks (positions in the position space) at
    ``offs[i]:offs[i+1]``, ascending without replacement, in draw order with.

    ``draw(rs, rows, s, replace, before, total)`` -> absolute positions [len(rows), s] of the rows
    that need random draws (a kernel launcher plugs in here); default: the numpy reference."""
    R = rs.num_rows
    if R == 0 or s == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(R, dtype=np.int64)
    draw = _draw_np if draw is None else draw
    before = total = None
    if rs.prefix is not None:
        before, total = rs.totals()
    npos = rs.positives()
    if replace:
        counts = np.where(npos > 0, s, 0)
        rows = np.flatnonzero(counts)
        flat = draw(rs, rows, s, True, before, total).reshape(-1)
        return flat, counts.astype(np.int64)
    counts = np.minimum(npos, s).astype(np.int64)
    big = np.flatnonzero(npos > s)
    pad = np.empty((R, s), dtype=np.int64)
    small = npos <= s
    if rs.prefix is None or bool((npos[small] == rs.deg[small]).all()):
        pad[:] = rs.start[:, None] + np.arange(s, dtype=np.int64)  # take-all rows: their first deg
    else:  # take-all rows with zero-weight entries: their positive entries only
        _fill_positive(rs, np.flatnonzero(small), pad)
    if big.size:
        pad[big] = draw(rs, big, s, False, before, total)
    flat = pad[np.arange(s)[None, :] < counts[:, None]]
    return flat, counts


def _draw_np(rs, rows, s, replace, before, total):
    if replace:
        return _picks(rs, rows, 0, s, before, total) + rs.start[rows][:, None]
    return _without_replacement(rs, rows, s, before, total) + rs.start[rows][:, None]


def _fill_positive(rs: RowSet, rows: np.ndarray, pad: np.ndarray) -> None:
    deg = rs.deg[rows]
    offs = np.concatenate([[0], np.cumsum(deg)])
    pos = np.arange(int(offs[-1]), dtype=np.int64) + np.repeat(rs.start[rows] - offs[:-1], deg)
    w = np.diff(rs.prefix, prepend=0.0)[pos] > 0
    row_of = np.repeat(np.arange(rows.shape[0]), deg)[w]
    pos = pos[w]
    row_start = np.concatenate([[0], np.cumsum(np.bincount(row_of, minlength=rows.shape[0]))])
    rank = np.arange(pos.shape[0]) - row_start[row_of]
    pad[rows[row_of], rank] = pos


# ------------------------------------------------------------------------------- dispatch
def its_sample(rs: RowSet, s: int, replace: bool, device=None):
    """SAMPLE on the path the backend picks: the Triton kernel (CUDA tensors, or the interpreter when
    backend "triton" is forced), the compiled loops or the numpy reference; all return the same
    positions.

    >>> rs = RowSet(np.array([0]), np.array([5]), row_label(0, 1, np.array([0])), [7], np.array([0, 1]))
    >>> flat, counts = its_sample(rs, 2, False)
    >>> counts.tolist(), len(set(flat.tolist())), bool((flat < 5).all())
    ([2], 2, True)
    """
    dev = torch.device("cpu") if device is None else torch.device(device)
    path = choose_path(torch.empty(0, device=dev))
    record("bulk_its", path, dev)
    if path == "triton":
        return its_sample_triton(rs, s, replace, dev)
    if runtime.worth(rs.num_rows * max(s, 1)):
        return jit_bulk.its_sample(rs, s, replace, MAX_DRAWS)
    return its_sample_np(rs, s, replace)


def its_sample_triton(rs: RowSet, s: int, replace: bool, device):
    """(positions, counts) as :func:`its_sample_np`: draws by ``_its_rows_kernel``, the padded
    per-row picks compacted into CSR order by ``_compact_kernel``."""
    device = torch.device(device)
    flat, counts = its_sample_np(rs, s, replace, draw=draw_triton(device, MAX_DRAWS))
    if flat.size == 0:
        return flat, counts
    # rows padded to the kernel's S_PAD slots, then compacted on the device (the same flat order)
    return compact_rows_triton(flat, counts, s, device), counts


# ------------------------------------------------------------------------ compiled fast paths
def its_uniform_rows(indptr, rows, batch_ptr, keys, layer: int, num_nodes: int, s: int, replace: bool, pairs=None):
    """:func:`its_sample` of the uniform rows ``A[rows]`` read in place by the compiled loop
    (:func:`dgl_accel.core.jit.bulk_sampling.its_uniform_rows`; call only where
    ``runtime.enabled()``): ``(positions, counts, offs)``, or with ``pairs`` (the packed table of
    :func:`..neighbor.sample.pack_pairs`) ``(source ids, edge ids, counts, offs)``.  Outputs come from
    the recycled-buffer pool (:mod:`.buffers`)."""
    row_label(layer, num_nodes, np.array([num_nodes - 1], dtype=np.int64))  # range check of the labels
    return jit_bulk.its_uniform_rows(indptr, rows, batch_ptr, keys, layer, num_nodes, s, replace, MAX_DRAWS,
                                     pairs=pairs, alloc=default_pool().empty)


def extract_compiled(canon) -> bool:
    """Whether EXTRACT can run compiled for this ``Canonical`` adjacency (numba, narrow packed table)."""
    return runtime.enabled() and jit_bulk.extract_supported(canon)


def extract(flat, counts, batch_ptr, rows, canon):
    """EXTRACT of a layer in one compiled pass (:func:`dgl_accel.core.jit.bulk_sampling.extract`),
    outputs from the buffer pool."""
    return jit_bulk.extract(flat, counts, batch_ptr, rows, canon, alloc=default_pool().empty)


def relabel_layer(src, offs, batch_ptr, rows, n: int):
    """EXTRACT's relabelling in place (:func:`dgl_accel.core.jit.bulk_sampling.relabel_layer`)."""
    return jit_bulk.relabel_layer(src, offs, batch_ptr, rows, n, alloc=default_pool().empty)
