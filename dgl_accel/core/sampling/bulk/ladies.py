"""Matrix-based bulk LADIES (Tripathy, Yelick, Buluc, MLSys'24, layer-wise variant): the DGL-free
maths of ``LADIESSampler(..., bulk=k)`` (the DGL adapter is ``dgl_accel.sampling.bulk_ladies``,
whose docstring walks through the four steps; the ITS rules are in :mod:`.its`, the
normalised adjacency and the edge weights in :mod:`..layer.importance`).

>>> row_pos, src = torch.tensor([0, 0, 1]), torch.tensor([2, 3, 3])     # V_0 = {v0, v1}: edges 2->v0, 3->v0, 3->v1
>>> p_ptr, p_cols, p_val = ladies_matrix(row_pos, src, torch.ones(3, dtype=torch.float64), np.array([0, 2]), 4, 1)
>>> p_cols.tolist(), normalise_rows(p_ptr, p_val).tolist()            # p(u) ∝ sum over V of Â[v, u]^2
([2, 3], [0.3333333333333333, 0.6666666666666666])
"""
from __future__ import annotations

import numpy as np
import torch

from .its import RowSet, its_sample, quantise, row_label
from .matrix import canonical_csr, grouping_matrix, selection_matrix

__all__ = ["ladies_matrix", "ladies_matrix_spgemm", "normalise_rows", "sample_layer"]


def ladies_matrix(row_pos: torch.Tensor, src: torch.Tensor, c: torch.Tensor, row_ptr: np.ndarray, n: int, k: int):
    """``P = Q_B (P_R ∘ P_R)`` as a CSR ``(p_ptr, p_cols, p_val)`` (columns ascending) from the gathered
    in-edges of the ``R`` destination rows (row position, source, ``c(e)``), without a SpGEMM: the
    entries of ``P_R`` are the (row, u) pairs with parallel edges summed; minibatch b owns rows
    ``row_ptr[b]:row_ptr[b+1]``."""
    rp, sr, cc = row_pos.numpy(), src.numpy(), c.numpy()
    key, inv = np.unique(rp * np.int64(n) + sr, return_inverse=True)
    entry = np.bincount(inv, weights=cc, minlength=key.size)
    batch = np.searchsorted(row_ptr, key // n, side="right") - 1
    key2, inv2 = np.unique(batch * np.int64(n) + key % n, return_inverse=True)
    p_val = np.bincount(inv2, weights=entry * entry, minlength=key2.size)
    p_cols = key2 % n
    p_ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(key2 // n, minlength=k), out=p_ptr[1:])
    return p_ptr, p_cols, p_val


def ladies_matrix_spgemm(rows: np.ndarray, canon, factors, row_ptr: np.ndarray, spgemm):
    """The same ``P`` through the product ``spgemm``: ``P_R = Q_R Â`` (``Â`` from the
    ``Canonical`` adjacency ``canon`` and the normalisation ``factors``), then ``Q_B (P_R ∘ P_R)``."""
    n = canon.n
    fd, fs = factors
    crow = np.repeat(np.arange(n, dtype=np.int64), np.diff(canon.indptr))
    vals = fd.numpy()[crow] * fs.numpy()[canon.indices] * (1.0 if canon.unit else canon.mult)
    a_hat = torch.sparse_csr_tensor(torch.from_numpy(canon.indptr), torch.from_numpy(canon.indices),
                                    torch.from_numpy(vals.astype(np.float32)), size=(n, n))
    R = int(rows.shape[0])
    r_ptr, r_cols, r_val = canonical_csr(spgemm(selection_matrix(rows, n), a_hat), (R, n))
    sq = torch.sparse_csr_tensor(torch.from_numpy(r_ptr), torch.from_numpy(r_cols),
                                 torch.from_numpy((r_val * r_val).astype(np.float32)), size=(R, n))
    return canonical_csr(spgemm(grouping_matrix(row_ptr, R), sq), (row_ptr.shape[0] - 1, n))


def normalise_rows(p_ptr: np.ndarray, p_val: np.ndarray) -> np.ndarray:
    """Each row of ``P`` divided by its sum (empty rows stay empty)."""
    k = p_ptr.shape[0] - 1
    tot = np.add.reduceat(p_val, p_ptr[:-1]) if p_val.size else np.zeros(k)
    tot = np.where(np.diff(p_ptr) > 0, tot, 1.0)
    return p_val / np.repeat(tot, np.diff(p_ptr))


def sample_layer(matrix, edges, row_ptr: np.ndarray, layer: int, s: int, keys, replace: bool, n: int):
    """SAMPLE ``s`` columns per row of ``P`` (``matrix = (p_ptr, p_cols, p, p_val)``, keys per
    minibatch) and the block-diagonal column extraction: minibatch b keeps its gathered edges
    ``edges = (row_pos, src, eid, c)`` whose source it drew, weighted as in :mod:`..layer.importance`.  Returns
    per minibatch ``(destination position in V_b, source, edge id, weight)`` (torch)."""
    p_ptr, p_cols, p, p_val = matrix
    row_pos, src, eid, c = edges
    k = row_ptr.shape[0] - 1
    rs = RowSet(p_ptr[:-1], np.diff(p_ptr), row_label(layer, n, np.zeros(k, dtype=np.int64)), keys,
                np.arange(k + 1, dtype=np.int64), np.cumsum(quantise(p_ptr, p_val)))
    flat, counts = its_sample(rs, s, replace)
    full = np.zeros(k, dtype=bool) if replace else rs.positives() <= s
    # block-diagonal column extraction: keep edge (v in V_b, u) iff minibatch b drew u
    pick_key = np.repeat(np.arange(k, dtype=np.int64), counts) * np.int64(n) + p_cols[flat]
    drawn, times = np.unique(pick_key, return_counts=True)
    rp = row_pos.numpy()
    e_batch = np.searchsorted(row_ptr, rp, side="right") - 1
    e_key = e_batch * np.int64(n) + src.numpy()
    at = np.searchsorted(drawn, e_key).clip(max=max(drawn.size - 1, 0))
    keep = drawn[at] == e_key if drawn.size else np.zeros(e_key.shape, dtype=bool)
    # p(u) of each kept edge: its entry in P (row b, column u)
    p_key = np.repeat(np.arange(k, dtype=np.int64), np.diff(p_ptr)) * np.int64(n) + p_cols
    pu = p[np.searchsorted(p_key, e_key[keep])]
    cc = c.numpy()[keep]
    if replace:
        w = cc * times[at[keep]] / (s * pu)
    else:
        w = np.where(full[e_batch[keep]], cc, cc / np.minimum(1.0, s * pu))
    rp, sr, ei, eb = rp[keep], src[torch.from_numpy(keep)], eid[torch.from_numpy(keep)], e_batch[keep]
    cuts = np.searchsorted(eb, np.arange(k + 1))
    out = []
    for b in range(k):
        lo, hi = int(cuts[b]), int(cuts[b + 1])
        out.append((torch.from_numpy(rp[lo:hi] - row_ptr[b]), sr[lo:hi], ei[lo:hi], torch.from_numpy(w[lo:hi])))
    return out
