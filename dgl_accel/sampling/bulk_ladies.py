"""Matrix-based bulk LADIES (Tripathy, Yelick, Buluc, MLSys'24, layer-wise variant): the
``bulk=k`` mode of :class:`dgl_accel.sampling.LADIESSampler` (the DGL adapter of
:mod:`dgl_accel.core.sampling.bulk.ladies`, which holds the maths).

Per layer, for ``k`` minibatches at once (``V_b`` = minibatch b's destinations, ``R = sum |V_b|``):

1. row extraction ``P_R = Q_R Â`` (``Q_R``: R x n, one row per (b, v in V_b)), ``Â`` the normalised
   adjacency of :mod:`dgl_accel.core.sampling.layer.importance` (parallel edges summed);
2. probabilities ``P = Q_B (P_R ∘ P_R)`` (``Q_B``: k x R, row b sums minibatch b's rows): row b
   holds ``sum_{v in V_b} Â[v, u]^2``, normalised exactly as :func:`dgl_accel.sampling.layer.ladies_probabilities`;
3. SAMPLE ``s`` columns per row of ``P`` by ITS (:mod:`dgl_accel.core.sampling.bulk.its`, without
   replacement: until ``s`` distinct; a row with at most ``s`` candidates takes all);
4. column extraction by the block-diagonal ``P_R diag(Q_C1, ..., Q_Ck)``: minibatch b keeps the
   edges ``u -> v`` (v in V_b) whose source u it drew.

Blocks and edge weights are those of the node-at-a-time sampler (``layer_block``; weights
``c(e) n_u / (s p(u))`` with replacement, ``c(e) / min(1, s p(u))`` without, ``c(e)`` when every
candidate was taken).  The draws are ITS draws keyed by (sampler seed, minibatch index, layer):
the same distribution as the node-at-a-time path's Efraimidis-Spirakis keys (successive sampling)
but another random stream, identical for any bulk size ``k``.  With ``spgemm`` given, steps 1-2 run
through it (exclusions then act at extraction only; the default path drops excluded edges before
computing probabilities, as the node-at-a-time sampler does).  Without ``spgemm``, on the Triton
path (a CUDA graph) every step runs on the device
(:mod:`dgl_accel.core.sampling.bulk.ladies_device`: the same draws).
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.backend import choose_path
from ..core.sampling.arrays import offsets
from ..core.sampling.bulk.ladies import ladies_matrix, ladies_matrix_spgemm, normalise_rows, sample_layer
from ..core.sampling.bulk.ladies_device import ladies_layer_device
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
        idx = self.sampler.claim_calls()
        return self.scheduler.serve(seeds, idx, self.k, exclude is not None,
                                    lambda batches, first: self.run(g, batches, first, exclude))

    def bulk_sample(self, g, seed_batches, first_index: int | None = None):
        """``(input_nodes, output_nodes, blocks)`` per seed batch, ``k`` batches per pass."""
        check_layer_graph(g)
        batches = [layer_seed_nodes(g, seed_batch(b, g.num_nodes(), f"seed_batches[{i}]"))
                   for i, b in enumerate(seed_batches)]
        if not batches:
            raise expected("a non-empty list of seed batches", "[]", "pass at least one batch.")
        first = self.sampler.calls if first_index is None else int(first_index)
        out = []
        for i in range(0, len(batches), self.k):
            out.extend(self.run(g, batches[i:i + self.k], first + i, None))
        if first_index is None:
            self.sampler.claim_calls(len(batches))
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
        """``(ptr, cols, p, p_val)``: row b of the normalised ``P`` (CSR, columns ascending) for
        destination sets ``vs`` (and its unnormalised values), plus the gathered in-edges
        ``(row_pos, src, eid, c, row_ptr)``."""
        n = g.num_nodes()
        row_ptr = offsets(np.array([int(v.numel()) for v in vs], dtype=np.int64))
        rows = torch.cat(vs)
        row_pos, src, eid = gather_in_edges(g, rows, exclude)
        factors = node_factors(g, self.sampler.norm)
        c = factors[0][rows[row_pos]] * factors[1][src]
        if self.spgemm is None:
            p_ptr, p_cols, p_val = ladies_matrix(row_pos, src, c, row_ptr, n, len(vs))
        else:
            p_ptr, p_cols, p_val = ladies_matrix_spgemm(rows.numpy(), canonical_adjacency(g), factors, row_ptr,
                                                        self.spgemm)
        return (p_ptr, p_cols, normalise_rows(p_ptr, p_val), p_val), (row_pos, src, eid, c, row_ptr)

    def _layer(self, g, vs, layer, s, keys, exclude):
        smp = self.sampler
        if self.spgemm is None and choose_path(torch.empty(0, device=g.device)) == "triton":  # on the device
            rows = torch.cat(vs)
            row_pos, src, eid = gather_in_edges(g, rows, exclude)
            factors = node_factors(g, smp.norm)
            parts = ladies_layer_device(row_pos, src, eid, factors[0][rows[row_pos]] * factors[1][src],
                                        [int(v.numel()) for v in vs], g.num_nodes(), layer, s, keys, smp.replace)
            return [layer_block(g, v, *part, smp.weight) for v, part in zip(vs, parts)]
        matrix, (row_pos, src, eid, c, row_ptr) = self.probabilities(g, vs, exclude)
        parts = sample_layer(matrix, (row_pos, src, eid, c), row_ptr, layer, s, keys, smp.replace, g.num_nodes())
        return [layer_block(g, v, *part, smp.weight) for v, part in zip(vs, parts)]
