"""Matrix-based bulk LADIES (Tripathy, Yelick, Buluc, MLSys'24, layer-wise variant): the
``bulk=k`` mode of :class:`dgl_accel.sampling.LADIESSampler`.

Per layer, for ``k`` minibatches at once (``V_b`` = minibatch b's destinations, ``R = sum |V_b|``):

1. row extraction ``P_R = Q_R Â`` (``Q_R``: R x n, one row per (b, v in V_b)), ``Â`` the normalised
   adjacency of :mod:`dgl_accel.core.sampling.layer` (parallel edges summed);
2. probabilities ``P = Q_B (P_R ∘ P_R)`` (``Q_B``: k x R, row b sums minibatch b's rows): row b
   holds ``sum_{v in V_b} Â[v, u]^2``, normalised exactly as :func:`dgl_accel.sampling.layer.ladies_probabilities`;
3. SAMPLE ``s`` columns per row of ``P`` by ITS (:mod:`dgl_accel.core.sampling.bulk_sampling`, without
   replacement: until ``s`` distinct; a row with at most ``s`` candidates takes all);
4. column extraction by the block-diagonal ``P_R diag(Q_C1, ..., Q_Ck)``: minibatch b keeps the
   edges ``u -> v`` (v in V_b) whose source u it drew.

Blocks and edge weights are those of the node-at-a-time sampler (``layer_block``; weights
``c(e) n_u / (s p(u))`` with replacement, ``c(e) / min(1, s p(u))`` without, ``c(e)`` when every
candidate was taken).  The draws are ITS draws keyed by (sampler seed, minibatch index, layer):
the same distribution as the node-at-a-time path's Efraimidis-Spirakis keys (successive sampling)
but another random stream, identical for any bulk size ``k``.  With ``spgemm`` given, steps 1-2 run
through it (exclusions then act at extraction only; the default path drops excluded edges before
computing probabilities, as the node-at-a-time sampler does).
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.sampling.bulk_matrix import canonical_csr, grouping_matrix, selection_matrix
from ..core.sampling.bulk_sampling import RowSet, its_sample, quantise, row_label
from ..core.sampling.checks import check_bulk, check_spgemm, expected, seed_batch
from .blocks import layer_block
from .bulk import BulkScheduler
from .bulk_matrix import canonical_adjacency
from .layer_graph import check_layer_graph, gather_in_edges, layer_exclude, layer_seed_nodes, node_factors

__all__ = ["BulkLADIES"]


class BulkLADIES:
    """Bulk engine behind ``LADIESSampler(..., bulk=k)``; also usable directly through
    ``sampler.bulk.plan(batches)`` and ``sampler.bulk.bulk_sample(g, batches)``."""

    def __init__(self, sampler, bulk: int, spgemm=None, lookahead: bool = True):
        self.sampler = sampler
        self.k = check_bulk(bulk)
        self.spgemm = check_spgemm(spgemm)
        self.scheduler = BulkScheduler(lookahead)

    def plan(self, seed_batches) -> None:
        self.scheduler.plan(seed_batches)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        check_layer_graph(g)
        seeds = layer_seed_nodes(g, seed_nodes)
        exclude = layer_exclude(g, exclude_eids)
        idx = self.sampler.call_index
        self.sampler.call_index += 1
        return self.scheduler.serve(seeds, idx, self.k, exclude is not None,
                                    lambda batches, first: self.run(g, batches, first, exclude))

    def bulk_sample(self, g, seed_batches, first_index: int | None = None):
        """``(input_nodes, output_nodes, blocks)`` per seed batch, ``k`` batches per pass."""
        check_layer_graph(g)
        batches = [layer_seed_nodes(g, seed_batch(b, g.num_nodes(), f"seed_batches[{i}]"))
                   for i, b in enumerate(seed_batches)]
        if not batches:
            raise expected("a non-empty list of seed batches", "[]", "pass at least one batch.")
        first = self.sampler.call_index if first_index is None else int(first_index)
        out = []
        for i in range(0, len(batches), self.k):
            out.extend(self.run(g, batches[i:i + self.k], first + i, None))
        if first_index is None:
            self.sampler.call_index += len(batches)
        return out

    # ------------------------------------------------------------------------------ one pass
    def run(self, g, batches, first: int, exclude):
        smp = self.sampler
        keys = smp.call_keys(first, len(batches))  # the node-at-a-time sampler's keys
        vs = [b.to(torch.int64) for b in batches]
        per_batch = [[] for _ in batches]
        for layer in reversed(range(len(smp.num_nodes_per_layer))):
            s = smp.num_nodes_per_layer[layer]
            blocks = self._layer(g, vs, layer, s, keys, exclude)
            vs = []
            for b, (block, src_nodes) in enumerate(blocks):
                per_batch[b].insert(0, block)
                vs.append(src_nodes)
        out = []
        for seeds, blocks in zip(batches, per_batch):
            if smp.output_device is not None:
                blocks = [bl.to(smp.output_device) for bl in blocks]
            out.append((blocks[0].srcdata["_ID"], seeds.to(g.idtype), blocks))
        return out

    def probabilities(self, g, vs, exclude=None):
        """``(ptr, cols, p)``: row b of the normalised ``P`` (CSR, columns ascending) for destination
        sets ``vs``, plus the gathered in-edges ``(row_pos, src, eid, c, row_ptr)``."""
        n = g.num_nodes()
        norm = self.sampler.norm
        sizes = [int(v.numel()) for v in vs]
        row_ptr = np.zeros(len(vs) + 1, dtype=np.int64)
        np.cumsum(sizes, out=row_ptr[1:])
        rows = torch.cat(vs)
        row_pos, src, eid = gather_in_edges(g, rows, exclude)
        fd, fs = node_factors(g, norm)
        c = fd[rows[row_pos]] * fs[src]
        k = len(vs)
        if self.spgemm is None:
            # P_R entries: (row, u) with parallel edges summed; then P = Q_B (P_R ∘ P_R)
            rp, sr, cc = row_pos.numpy(), src.numpy(), c.numpy()
            key, inv = np.unique(rp * np.int64(n) + sr, return_inverse=True)
            entry = np.bincount(inv, weights=cc, minlength=key.size)
            batch = np.searchsorted(row_ptr, key // n, side="right") - 1
            key2, inv2 = np.unique(batch * np.int64(n) + key % n, return_inverse=True)
            p_val = np.bincount(inv2, weights=entry * entry, minlength=key2.size)
            p_cols = key2 % n
            p_ptr = np.zeros(k + 1, dtype=np.int64)
            np.cumsum(np.bincount(key2 // n, minlength=k), out=p_ptr[1:])
        else:
            canon = canonical_adjacency(g)
            crow = np.repeat(np.arange(n, dtype=np.int64), np.diff(canon.indptr))
            vals = fd.numpy()[crow] * fs.numpy()[canon.indices] * (1.0 if canon.unit else canon.mult)
            A_hat = torch.sparse_csr_tensor(torch.from_numpy(canon.indptr), torch.from_numpy(canon.indices),
                                            torch.from_numpy(vals.astype(np.float32)), size=(n, n))
            R = int(rows.numel())
            r_ptr, r_cols, r_val = canonical_csr(self.spgemm(selection_matrix(rows.numpy(), n), A_hat), (R, n))
            sq = torch.sparse_csr_tensor(torch.from_numpy(r_ptr), torch.from_numpy(r_cols),
                                         torch.from_numpy((r_val * r_val).astype(np.float32)), size=(R, n))
            p_ptr, p_cols, p_val = canonical_csr(self.spgemm(grouping_matrix(row_ptr, R), sq), (k, n))
        tot = np.add.reduceat(p_val, p_ptr[:-1]) if p_val.size else np.zeros(k)
        tot = np.where(np.diff(p_ptr) > 0, tot, 1.0)
        p = p_val / np.repeat(tot, np.diff(p_ptr))
        return (p_ptr, p_cols, p, p_val), (row_pos, src, eid, c, row_ptr)

    def _layer(self, g, vs, layer, s, keys, exclude):
        smp = self.sampler
        n = g.num_nodes()
        k = len(vs)
        (p_ptr, p_cols, p, p_val), (row_pos, src, eid, c, row_ptr) = self.probabilities(g, vs, exclude)
        rs = RowSet(p_ptr[:-1], np.diff(p_ptr), row_label(layer, n, np.zeros(k, dtype=np.int64)), keys,
                    np.arange(k + 1, dtype=np.int64), np.cumsum(quantise(p_ptr, p_val)))
        flat, counts = its_sample(rs, s, smp.replace)
        full = np.zeros(k, dtype=bool) if smp.replace else rs.positives() <= s
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
        if smp.replace:
            w = cc * times[at[keep]] / (s * pu)
        else:
            w = np.where(full[e_batch[keep]], cc, cc / np.minimum(1.0, s * pu))
        rp, sr, ei, eb = rp[keep], src[torch.from_numpy(keep)], eid[torch.from_numpy(keep)], e_batch[keep]
        cuts = np.searchsorted(eb, np.arange(k + 1))
        out = []
        for b in range(k):
            lo, hi = int(cuts[b]), int(cuts[b + 1])
            out.append(layer_block(g, vs[b], torch.from_numpy(rp[lo:hi] - row_ptr[b]), sr[lo:hi], ei[lo:hi],
                                   torch.from_numpy(w[lo:hi]), smp.weight))
        return out
