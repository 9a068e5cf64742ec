"""The matrices of matrix-based bulk sampling (family ``bulk``): the canonical adjacency
``A``, selection matrices ``Q``, the pluggable SpGEMM ``P = Q @ A`` and ``P``'s canonical
(row-sorted) form.  The DGL adapter (``dgl_accel.sampling.bulk_matrix``) builds ``A`` per graph.

``A`` has rows = destinations (DGL's in-neighbour CSR: a block for destination v holds v's
in-edges), columns ascending within each row, parallel edges merged into one entry whose value is
their multiplicity (the edge id kept for it is the smallest).  Sampling reads only ``P``'s values
per (row, column), so any SpGEMM that returns the same matrix (a distributed 1.5D product
included) gives the same samples.

SpGEMM contract: ``spgemm(Q, A) -> Q @ A`` with ``Q`` and ``A`` ``torch.sparse_csr_tensor`` (float32
values, int64 indices) and a sparse CSR (or COO) result; entries may come in any order and
duplicates are summed (:func:`canonical_csr`).

>>> A = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csr()
>>> p_ptr, p_cols, p_val = canonical_csr(local_spgemm(selection_matrix(np.array([1]), 2), A), (1, 2))
>>> p_cols.tolist(), p_val.tolist()         # Q selects row 1: P is A's row 1
([0], [2.0])
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch

from ..checks import expected
from ..neighbor.sample import pack_pairs
from .its import quantise

__all__ = ["Canonical", "canonical_adjacency", "selection_matrix", "grouping_matrix", "local_spgemm",
           "canonical_csr", "adjacency_tensor", "estimate_p_bytes", "BYTES_PER_P_ENTRY"]

SpGEMM = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # the pluggable product's type
# torch warns once per process that sparse CSR is "beta"; the contract uses only its stable core
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
BYTES_PER_P_ENTRY = 8 + 4 + 8 + 8  # column (int64), value (fp32), weight prefix (fp64), sampling scratch


class Canonical:
    """Canonical in-CSR of a graph (numpy): ``indptr``, ``indices`` (ascending per row), ``eids``,
    ``mult`` (multiplicity per entry), ``unit`` (no parallel edges), ``pairs`` (packed (source,
    edge id) per entry, :func:`..neighbor.sample.pack_pairs`)."""

    __slots__ = ("indptr", "indices", "eids", "mult", "unit", "pairs", "n", "_keys", "_on_device")

    def __init__(self, indptr, indices, eids, mult, pairs, n):
        self.indptr, self.indices, self.eids, self.mult, self.pairs, self.n = indptr, indices, eids, mult, pairs, n
        self.unit = bool(mult is None)
        self._keys = None
        self._on_device: dict = {}

    def on_device(self, name: str, device) -> torch.Tensor:
        """``indices`` or ``eids`` as an int64 tensor on ``device``, copied there once (a bulk pass
        relabels every layer of every minibatch against them: one upload per graph, not per call)."""
        key = (name, str(device))
        if key not in self._on_device:
            host = np.ascontiguousarray(getattr(self, name), dtype=np.int64)
            self._on_device[key] = torch.from_numpy(host).to(device)
        return self._on_device[key]

    def weight_prefix(self, device) -> torch.Tensor:
        """The quantised multiplicities summed before each entry (``E + 1`` values from 0, float64
        exact integers) on ``device``: ITS's weights of ``P = Q @ A``, whose rows are ``A``'s rows
        with their multiplicities (parallel edges); built and copied once."""
        key = ("weight_prefix", str(device))
        if key not in self._on_device:
            mult = np.ones(self.indices.shape[0]) if self.unit else self.mult
            p0 = np.zeros(self.indices.shape[0] + 1)
            np.cumsum(quantise(self.indptr, mult), out=p0[1:])
            self._on_device[key] = torch.from_numpy(p0).to(device)
        return self._on_device[key]

    def keys(self) -> np.ndarray:
        """Sorted ``row * n + column`` of every entry (to find an entry's position)."""
        if self._keys is None:
            rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))
            self._keys = rows * np.int64(self.n) + self.indices
        return self._keys


def canonical_adjacency(indptr: np.ndarray, indices: np.ndarray, eids: np.ndarray, n: int,
                        pairs: Callable[[], np.ndarray] | None = None) -> Canonical:
    """:class:`Canonical` of the in-CSR ``(indptr, indices, eids)`` (int64 numpy arrays, n rows).
    ``pairs()``: the caller's packed table of this CSR, used when it is sorted by (row, column)
    already (as DGL's CSC usually is).

    >>> c = canonical_adjacency(np.array([0, 2, 2, 2, 2]), np.array([3, 3]), np.array([5, 4]), 4)
    >>> c.indices.tolist(), c.eids.tolist(), c.mult.tolist()    # two parallel edges: one entry
    ([3], [4], [2.0])
    """
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    key = rows * np.int64(n) + indices
    if key.size < 2 or bool((key[1:] > key[:-1]).all()):  # DGL's CSC is usually sorted already
        return Canonical(indptr, indices, eids, None, pack_pairs(indices, eids) if pairs is None else pairs(), n)
    order = np.lexsort((eids, key))  # by (row, column), smallest edge id first among parallels
    key, eid = key[order], eids[order]
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    mult = np.diff(np.append(starts, key.size)).astype(np.float32)
    key, eid = key[starts], eid[starts]
    cols = key % n
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // n, minlength=n), out=new_ptr[1:])
    unit = bool((mult == 1).all())
    return Canonical(new_ptr, cols, eid, None if unit else mult, pack_pairs(cols, eid), n)


def adjacency_tensor(c: Canonical, values: np.ndarray | None = None) -> torch.Tensor:
    """``A`` as a ``torch.sparse_csr_tensor`` (float32; multiplicities unless ``values`` given)."""
    if values is None:
        values = np.ones(c.indices.size, dtype=np.float32) if c.unit else c.mult
    return torch.sparse_csr_tensor(torch.from_numpy(c.indptr), torch.from_numpy(c.indices),
                                   torch.from_numpy(np.asarray(values, dtype=np.float32)), size=(c.n, c.n))


def selection_matrix(cols: np.ndarray, num_cols: int) -> torch.Tensor:
    """``Q`` with one 1 per row, at ``cols[i]`` in row i (selects rows of the right-hand side)."""
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    R = cols.shape[0]
    return torch.sparse_csr_tensor(torch.arange(R + 1, dtype=torch.int64), torch.from_numpy(cols),
                                   torch.ones(R, dtype=torch.float32), size=(R, num_cols))


def grouping_matrix(group_ptr: np.ndarray, num_cols: int) -> torch.Tensor:
    """``Q`` whose row b has ones at columns ``group_ptr[b] .. group_ptr[b+1]-1`` (sums row groups)."""
    ptr = np.ascontiguousarray(group_ptr, dtype=np.int64)
    nnz = int(ptr[-1])
    return torch.sparse_csr_tensor(torch.from_numpy(ptr), torch.arange(nnz, dtype=torch.int64),
                                   torch.ones(nnz, dtype=torch.float32), size=(ptr.shape[0] - 1, num_cols))


def _to_scipy(t: torch.Tensor):
    return sp.csr_matrix((t.values().numpy(), t.col_indices().numpy(), t.crow_indices().numpy()),
                         shape=tuple(t.shape))


def local_spgemm(Q: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """The default SpGEMM: scipy's CSR product (measured faster than torch.sparse's on CPU here)."""
    if Q.device.type != "cpu" or A.device.type != "cpu":
        return (Q @ A).to_sparse_csr()
    P = _to_scipy(Q) @ _to_scipy(A)
    return torch.sparse_csr_tensor(torch.from_numpy(P.indptr.astype(np.int64)),
                                   torch.from_numpy(P.indices.astype(np.int64)),
                                   torch.from_numpy(P.data.astype(np.float32, copy=False)), size=P.shape)


def canonical_csr(P: torch.Tensor, shape) -> tuple:
    """``(indptr, indices, values)`` numpy arrays of ``P`` with columns ascending per row and
    duplicate entries summed, whatever order the SpGEMM produced."""
    if not isinstance(P, torch.Tensor) or P.layout not in (torch.sparse_csr, torch.sparse_coo):
        raise expected("the spgemm callable to return a sparse CSR tensor",
                       type(P).__name__ if not isinstance(P, torch.Tensor) else P.layout,
                       "return (Q @ A).to_sparse_csr().")
    if tuple(P.shape) != tuple(shape):
        raise expected(f"spgemm(Q, A) of shape {tuple(shape)}", tuple(P.shape), "return Q @ A.")
    P = P.detach().cpu()
    if P.layout == torch.sparse_coo:
        P = P.coalesce().to_sparse_csr()
    indptr = P.crow_indices().to(torch.int64).numpy()
    idx = P.col_indices().to(torch.int64).numpy()
    val = P.values().to(torch.float64).numpy()
    R, n = shape
    rows = np.repeat(np.arange(R, dtype=np.int64), np.diff(indptr))
    key = rows * np.int64(n) + idx
    if key.size > 1 and not bool((key[1:] > key[:-1]).all()):
        order = np.argsort(key, kind="stable")
        key, val = key[order], val[order]
        first = np.ones(key.size, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        starts = np.flatnonzero(first)
        val = np.add.reduceat(val, starts)
        key = key[starts]
        idx = key % n
        indptr = np.zeros(R + 1, dtype=np.int64)
        np.cumsum(np.bincount(key // n, minlength=R), out=indptr[1:])
    return indptr, np.ascontiguousarray(idx), np.ascontiguousarray(val)


def estimate_p_bytes(c: Canonical, batch_size: int, fanouts) -> int:
    """Estimated peak bytes of ``P`` (and its sampling scratch) for one minibatch of ``batch_size``
    seeds: per layer, rows times the expected in-degree of a row (the first layer: the mean; deeper
    layers reach nodes through edges, so the out-degree-weighted mean), capped by ``|E|``."""
    n, E = c.n, int(c.indices.size)
    indeg = np.diff(c.indptr).astype(np.float64)
    outdeg = np.bincount(c.indices, minlength=n).astype(np.float64)
    mean = E / max(n, 1)
    reached = float((outdeg * indeg).sum() / max(E, 1))
    rows, peak = float(batch_size), 0.0
    for i, f in enumerate(reversed(list(fanouts))):
        nnz = min(rows * (mean if i == 0 else reached), E)
        peak = max(peak, nnz * BYTES_PER_P_ENTRY + rows * 32)
        rows = min(float(n), rows * (1 + (f if f >= 0 else mean)))
    return int(peak) + 1
