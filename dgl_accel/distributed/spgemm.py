"""Graph-partitioned (1.5D) sparsity-aware SpGEMM ``P = Q A`` for bulk sampling.

p ranks form a (p/c) x c grid (:class:`Grid`).  A (n x n, rows = destinations) is cut into p/c
block rows; block row k is kept by the c ranks of process row k.  Q (m x n, one row per batch
vertex) is the same on every rank (every rank runs the same sampler calls); its rows are split
among process rows, and inside process row i the inner dimension is split among the c columns:
each A block row k is cut into c sub-blocks and rank (i, j) computes the partial product of Q's
row block i with sub-block j of every block row k (served by rank (k, j), so the c replicas of a
block row share the serving too).

Sparsity-aware: rank (i, j) does not fetch whole A block rows, only the rows its nonzero Q columns
reference:  all-to-all of the requested row ids, then all-to-all of those rows
(lengths + column ids as int64, values as float32).  The c partial products of process row i are
summed with a reduce-scatter along the row (all-to-all of row pieces, then a local sum) and the
reduced pieces are all-gathered so every rank returns the whole P, as the local product would.

Every collective runs on one process group (a private copy of the world group by default, with
its own timeout), so no sub-groups need creating.
"""
from __future__ import annotations

import hashlib

import dgl
import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

from ..sampling.bulk_matrix import adjacency_tensor
from .comm import all_gather_1d, all_gather_csr, all_to_all_1d, as_timedelta, to_scipy, to_torch_csr, world
from .grid import Grid, block_bounds

__all__ = ["PartitionedSpGEMM"]


def _as_matrix(A_or_graph) -> sp.csr_matrix:
    if isinstance(A_or_graph, dgl.DGLGraph):  # the bulk sampler's A: canonical, multiplicities as values
        return to_scipy(adjacency_tensor(A_or_graph))
    m = to_scipy(A_or_graph)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"expected a square adjacency matrix (got shape {tuple(m.shape)}). "
                         f"Fix: pass the graph or its n x n in-neighbour adjacency.")
    return m


def _fingerprint(m: sp.csr_matrix) -> tuple[int, int, int]:
    h = hashlib.blake2b(digest_size=8)
    for a in (m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data.astype(np.float32)):
        h.update(np.ascontiguousarray(a).tobytes())
    return m.shape[0], m.nnz, int.from_bytes(h.digest(), "little") >> 1


class PartitionedSpGEMM:
    """Callable ``spgemm(Q, A) -> P`` computing Q A with A partitioned over a 1.5D process grid.

    Parameters
    ----------
    A_or_graph : DGLGraph, torch.sparse_csr_tensor or scipy matrix
        The full graph / n x n in-neighbour adjacency (rows = destinations; for a graph,
        :func:`dgl_accel.sampling.bulk_matrix.adjacency_tensor`, the A the bulk sampler passes), the same on every rank
        (checked with an all-gathered fingerprint).  Only this rank's block row is kept.
    c : int
        Replication factor; the world size must be a multiple of it.  c = 1: each rank owns one
        block row; c = p: every rank holds all of A (no fetching, each rank does 1/c of the stages).
    group : process group, optional
        Defaults to a private copy of the world group (all ranks must construct the object together).
    timeout : float seconds, optional
        Timeout of that private group's collectives (only with ``group=None``).

    Calls are collective: every rank must call with the same Q (checked: shape, nnz and a hash are
    all-gathered with the first exchange).  ``A`` passed to the call is only checked for its shape
    (the partitions built at construction are used).  Stats: ``rows_fetched`` / ``rows_needed_total``
    count remote A rows received vs. the rows a dense 1.5D algorithm would ship.
    """

    def __init__(self, A_or_graph, c: int = 1, group=None, timeout=None):
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("expected an initialised torch.distributed process group (got none). Fix: call "
                             "dgl_accel.distributed.init() (or torch.distributed.init_process_group) first.")
        if group is not None and timeout is not None:
            raise ValueError(f"expected timeout only with group=None (got group and timeout={timeout!r}). "
                             f"Fix: create your group with new_group(..., timeout=...) and drop timeout=.")
        Grid(dist.get_world_size(group), c)  # validate the grid before any collective
        if group is None:
            # A private group: our exchanges never interleave with the caller's (e.g. DDP) traffic.
            group = dist.new_group(timeout=None if timeout is None else as_timedelta(timeout))
        self.group = group
        self.rank, size = world(group)
        self.grid = Grid(size, c)
        self.row, self.col = self.grid.coords(self.rank)
        A = _as_matrix(A_or_graph)
        fp = _fingerprint(A)
        got = [tuple(int(v) for v in t) for t in
               all_gather_1d(torch.tensor(fp, dtype=torch.int64), group, "adjacency fingerprint")]
        if any(f != got[0] for f in got):
            desc = ", ".join(f"rank {r}: n={f[0]} nnz={f[1]} hash={f[2]:x}" for r, f in enumerate(got))
            raise ValueError(f"expected every rank to pass the same graph / adjacency to PartitionedSpGEMM "
                             f"(got {desc}). Fix: load the same dataset with the same preprocessing on every rank.")
        self.n = A.shape[0]
        self.bounds = block_bounds(self.n, self.grid.rows)  # block row k = A rows bounds[k]:bounds[k+1]
        lo, hi = self.bounds[self.row], self.bounds[self.row + 1]
        self.block = A[lo:hi].tocsr()  # only this process row's block row is kept
        c = self.grid.c
        sizes = np.diff(self.bounds)
        self.fine_bounds = np.append((self.bounds[:-1, None] + (sizes[:, None] * np.arange(c)) // c).reshape(-1),
                                     self.n)
        fine_sizes = np.diff(self.fine_bounds).reshape(self.grid.rows, c)[:, self.col]
        # Rows a dense 1.5D algorithm would ship here per call: the whole remote sub-blocks.
        self.dense_rows = int(fine_sizes.sum() - fine_sizes[self.row])
        self.block.sort_indices()
        self.rows_fetched = 0
        self.rows_needed_total = 0
        self.calls = 0

    def __repr__(self):
        return (f"PartitionedSpGEMM(n={self.n}, grid={self.grid.rows}x{self.grid.c}, rank={self.rank} "
                f"at ({self.row}, {self.col}), block rows {self.bounds[self.row]}:{self.bounds[self.row + 1]})")

    # ---------------------------------------------------------------------------------- call
    def __call__(self, Q, A=None) -> torch.Tensor:
        Qs = to_scipy(Q)
        if Qs.shape[1] != self.n or (A is not None and tuple(A.shape) != (self.n, self.n)):
            raise ValueError(f"expected Q with {self.n} columns and A of shape ({self.n}, {self.n}) as partitioned "
                             f"(got Q {tuple(Qs.shape)}, A {None if A is None else tuple(A.shape)}). Fix: build "
                             f"PartitionedSpGEMM from the graph the sampler samples.")
        Qs.sum_duplicates()
        self.calls += 1
        grid, size = self.grid, self.grid.world_size
        m = Qs.shape[0]
        qb = block_bounds(m, grid.rows)
        Qi = Qs[qb[self.row]:qb[self.row + 1]].tocsr()

        # Inner-dimension split inside the process row: block row k of A is cut into c sub-blocks
        # and this rank handles sub-block `col` of every k (balanced for any c, even c > p / c);
        # it requests each referenced row from rank (k, col), one of the c holders of block row k.
        cols = np.unique(Qi.indices)
        fine = np.searchsorted(self.fine_bounds, cols, side="right") - 1  # = k * c + sub-block
        mine = fine % grid.c == self.col
        cols, owner_row = cols[mine], fine[mine] // grid.c
        self.rows_needed_total += self.dense_rows
        dest = owner_row * grid.c + self.col
        order = np.argsort(dest, kind="stable")  # cols is sorted, so each destination's ids stay sorted
        cols, dest = cols[order], dest[order]
        counts = np.bincount(dest, minlength=size)
        req = [torch.from_numpy(x) for x in np.split(cols.astype(np.int64), np.cumsum(counts)[:-1])]
        # The Q check rides on the request exchange's first message: a tiny all-gather.
        self._check_same_q(Qs)
        asked = all_to_all_1d(req, self.group, "spgemm: requested A row ids")

        # Serve: for each requester, row lengths + column ids (int64) and values (float32).
        lo = self.bounds[self.row]
        ints, vals = [], []
        for ids in asked:
            sub = self.block[ids.numpy() - lo]
            ints.append(torch.from_numpy(np.concatenate([np.diff(sub.indptr).astype(np.int64),
                                                         sub.indices.astype(np.int64)])))
            vals.append(torch.from_numpy(sub.data.astype(np.float32)))
        got_i = all_to_all_1d(ints, self.group, "spgemm: A rows (structure)")
        got_v = all_to_all_1d(vals, self.group, "spgemm: A rows (values)")
        lens = [gi[:int(c_)].numpy() for gi, c_ in zip(got_i, counts)]
        idx = np.concatenate([gi[int(c_):].numpy() for gi, c_ in zip(got_i, counts)])
        val = np.concatenate([gv.numpy() for gv in got_v])
        rowlen = np.concatenate(lens) if lens else np.zeros(0, np.int64)
        fetched = sp.csr_matrix((val, idx, np.concatenate([[0], np.cumsum(rowlen)])), shape=(len(cols), self.n))
        self.rows_fetched += int(counts.sum() - counts[self.rank])

        # Partial product over this rank's stages: Q's columns renumbered to the fetched rows.
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[cols] = np.arange(len(cols))
        keep = remap[Qi.indices] >= 0
        row_of = np.repeat(np.arange(Qi.shape[0]), np.diff(Qi.indptr))[keep]
        Qsel = sp.csr_matrix((Qi.data[keep], (row_of, remap[Qi.indices[keep]])), shape=(Qi.shape[0], len(cols)))
        partial = (Qsel @ fetched).tocsr()

        # Reduce-scatter along the process row: piece j of the row block goes to rank (row, j).
        pb = block_bounds(partial.shape[0], grid.c)
        send_i, send_v = [torch.zeros(0, dtype=torch.int64)] * size, [torch.zeros(0, dtype=torch.float32)] * size
        for j, r in enumerate(grid.row_ranks(self.row)):
            piece = partial[pb[j]:pb[j + 1]]
            send_i[r] = torch.from_numpy(np.concatenate([piece.indptr.astype(np.int64),
                                                         piece.indices.astype(np.int64)]))
            send_v[r] = torch.from_numpy(piece.data.astype(np.float32))
        got_i = all_to_all_1d(send_i, self.group, "spgemm: partial products (structure)")
        got_v = all_to_all_1d(send_v, self.group, "spgemm: partial products (values)")
        nrows = int(pb[self.col + 1] - pb[self.col])
        mine_sum = sp.csr_matrix((nrows, self.n), dtype=np.float32)
        for r in grid.row_ranks(self.row):  # fixed order: the same float sums on every grid shape
            gi = got_i[r].numpy()
            mine_sum = mine_sum + sp.csr_matrix((got_v[r].numpy(), gi[nrows + 1:], gi[:nrows + 1]),
                                                shape=(nrows, self.n))
        # All-gather the reduced pieces: rank order = row-block order of P.
        pieces = all_gather_csr(mine_sum.tocsr(), self.group, "spgemm: result pieces")
        return to_torch_csr(sp.vstack(pieces, format="csr") if pieces else mine_sum)

    def _check_same_q(self, Qs: sp.csr_matrix) -> None:
        h = hashlib.blake2b(digest_size=8)
        h.update(Qs.indptr.astype(np.int64).tobytes())
        h.update(Qs.indices.astype(np.int64).tobytes())
        fp = (Qs.shape[0], Qs.nnz, int.from_bytes(h.digest(), "little") >> 1, self.calls)
        got = [tuple(int(v) for v in t) for t in
               all_gather_1d(torch.tensor(fp, dtype=torch.int64), self.group, "spgemm: Q fingerprint")]
        if any(f != got[0] for f in got):
            desc = ", ".join(f"rank {r}: {f[0]} rows / {f[1]} nnz / call {f[3]}" for r, f in enumerate(got))
            raise ValueError(f"expected every rank to call PartitionedSpGEMM with the same Q in the same call "
                             f"(got {desc}). Fix: run the same sampler (same seed, seeds and bulk) on every rank; "
                             f"the loader does this when it sees a partitioned sampler.")
