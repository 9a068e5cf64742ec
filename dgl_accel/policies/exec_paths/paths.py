"""Frontiers N^k of the training nodes and the execution-path structures built from them.

See ``dgl_accel.policies.exec_paths`` for the method.  A :class:`Paths` belongs to one (graph
version, Vt); every structure is built on first use and kept with it.
"""
from __future__ import annotations

import dgl
import torch

from ...core.csr import sort_by_row
from ...graph.structure import edges_by_id

# Above this share of the graph's edges, a frontier's subgraph saves too little to pay for the
# gather/scatter around it (bench/bench_execution_paths.py: at 40-80% of the edges the compact
# kernels were no faster than the full ones): run the full aggregation, which is also exact.
MAX_EDGE_FRACTION = 0.5
# Compact blocks pay a gather of their columns and a scatter of their rows; the all-nodes subgraph
# pays ~3 passes over every node's row instead (Amazon-CS, 10%: 0.26 vs 0.34 ms for compact).
COMPACT_MAX_NODES = 0.75


def _csc_block(src, dst, num_src: int, num_dst: int):
    """A DGL block of the given local edges holding only the CSC the SpMM kernel reads (a third of
    COO + CSC), built now rather than inside a timed step."""
    block = dgl.create_block((src, dst), num_src_nodes=num_src, num_dst_nodes=num_dst, idtype=torch.int64,
                             device=src.device).formats("csc")
    block.adj_tensors("csc")
    return block


class Paths:
    """Frontier masks and execution-path structures of one (graph, Vt), each built on first use."""

    def __init__(self, graph, train_idx: torch.Tensor):
        self.graph = graph
        self.train_idx = train_idx
        mask = torch.zeros(graph.num_dst_nodes(), dtype=torch.bool, device=graph.device)
        mask[train_idx] = True
        self._frontiers: list[torch.Tensor] = [mask]
        self._cache: dict = {}
        self.learned_layers: int | None = None  # aggregations per step seen by an earlier block
        src, dst = edges_by_id(graph)  # the graph's own COO arrays where DGL holds them
        self._src, self._dst = src.long(), dst.long()

    def _get(self, key, build):
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = build()
        return value

    def frontier(self, k: int) -> torch.Tensor:
        """Boolean mask of N^k."""
        while len(self._frontiers) <= k:
            prev = self._frontiers[-1]
            nxt = prev.clone()
            nxt[self._src[prev[self._dst]]] = True  # sources of in-edges of N^{k-1}
            self._frontiers.append(nxt)
        return self._frontiers[k]

    def outside(self, k: int) -> torch.Tensor:
        """Node ids not in N^k (int64): where a gradient entering SG_k's backward must be 0."""
        return self._get(("outside", k), lambda: (~self.frontier(k)).nonzero().flatten())

    def rows(self, k: int) -> torch.Tensor:
        """Node ids of N^k (int64)."""
        return self._get(("rows", k), lambda: self.frontier(k).nonzero().flatten())

    def edge_ids(self, k: int) -> torch.Tensor:
        """Ids of the in-edges of N^k: the edges of SG_k."""
        return self._get(("eids", k), lambda: self.frontier(k)[self._dst].nonzero().flatten())

    def _oriented_edges(self, k: int, direction: str):
        """SG_k's edges as (row, col) ids: (dst, src) for ``"in"``, (src, dst) for ``"out"``."""
        eids = self.edge_ids(k)
        src, dst = self._src[eids], self._dst[eids]
        return (dst, src) if direction == "in" else (src, dst)

    def worthwhile(self, k: int) -> bool:
        """Whether SG_k is small enough that restricting to it saves time (else use the full graph)."""
        return self.edge_ids(k).numel() <= MAX_EDGE_FRACTION * max(1, self._src.numel())

    def subgraph(self, k: int):
        """SG_k as a DGL graph: all nodes, the in-edges of N^k, ``edata[dgl.EID]`` = full-graph ids.
        Used by the Triton path, for edge weights, and by the native path where :meth:`compact`'s
        block does not pay (:meth:`compact_pays`)."""
        return self._get(("sg", k), lambda: dgl.edge_subgraph(
            self.graph, self.edge_ids(k).to(self.graph.idtype), relabel_nodes=False, store_ids=True))

    def compact(self, k: int, direction: str):
        """SG_k as a small DGL block: only the rows that have edges (destinations for ``"in"``,
        sources for ``"out"``) x only the columns those edges read, so the kernel touches neither
        empty rows nor unread input rows (DGL's CPU SpMM pays per row: with every row of the graph
        in the block it spent 60% of its time on empty ones).  Returns (rows, cols, block index,
        nnz): block row i is graph row ``rows[i]``, block column j reads input row ``cols[j]``."""
        def build():
            row, col = self._oriented_edges(k, direction)
            cols, col_local = torch.unique(col, return_inverse=True)
            rows, row_local = torch.unique(row, return_inverse=True)
            block = _csc_block(col_local, row_local, cols.numel(), rows.numel())
            return rows, cols, block._graph, int(row.numel()), block
        return self._get(("compact", k, direction), build)[:4]

    def compact_pays(self, k: int) -> bool:
        """Whether :meth:`compact`'s block beats the all-nodes :meth:`subgraph` for SG_k: its rows
        and columns (the distinct sources and destinations of SG_k, in either direction) span at
        most ``COMPACT_MAX_NODES`` of the nodes.  Counted without building either."""
        def build():
            eids = self.edge_ids(k)
            n = self.graph.num_nodes()
            seen = torch.zeros(2 * n, dtype=torch.bool, device=eids.device)
            seen[self._src[eids]] = True
            seen[n + self._dst[eids]] = True
            return int(seen.sum()) <= COMPACT_MAX_NODES * n
        return self._get(("compact_pays", k), build)

    def row_csr(self, k: int, direction: str):
        """SG_k as a CSR over all of the graph's rows (destinations for ``"in"``, sources for
        ``"out"``), int64 (indptr [N + 1], column ids): what the compiled aggregation
        (``dgl_accel.core.jit.aggregation.rows_spmm``) reads where a compact block does not pay.  It writes every output
        row in the same pass (zeros for rows without edges), so no zero fill and no scatter."""
        def build():
            row, col = self._oriented_edges(k, direction)
            n = self.graph.num_dst_nodes() if direction == "in" else self.graph.num_src_nodes()
            indptr, order = sort_by_row(row, n)
            return indptr, col[order].contiguous()
        return self._get(("row_csr", k, direction), build)

    def row_block(self, k: int):
        """The in-edges of N^k as a DGL graph index whose destinations are the rows of N^k (all of
        them, ascending, as :meth:`rows`) and whose sources are all graph nodes, with its reverse.
        A layer computing only N^k's rows aggregates over it straight from the full input (no
        gather of input rows) and, backwards, writes the full-size input gradient directly (no
        scatter).  Returns (rows, index, reverse index, nnz)."""
        def build():
            rows = self.rows(k)
            dst, src = self._oriented_edges(k, "in")
            block = _csc_block(src, torch.searchsorted(rows, dst), self.graph.num_src_nodes(), rows.numel())
            gidx = block._graph
            return rows, gidx, gidx.reverse(), int(src.numel()), block
        return self._get(("row_block", k), build)[:4]

    def gathered(self, key, build):
        """A small per-path tensor cached with the paths (e.g. the scales of the active rows)."""
        return self._get(("gathered",) + tuple(key), build)

    def extra_bytes(self) -> int:
        """Memory held by the paths built so far: masks, id lists, compact blocks, subgraphs."""
        total = sum(m.numel() for m in self._frontiers)
        for key, value in self._cache.items():
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
            elif isinstance(value, tuple) and key[0] == "compact":  # rows, cols, index, nnz, block (CSC)
                rows, cols, _, nnz, block = value
                total += (rows.numel() + cols.numel() + block.num_dst_nodes() + 1 + 2 * nnz) * 8
            elif isinstance(value, tuple) and key[0] == "row_block":  # CSC; the reverse's own CSC once a
                rows, _, rgidx, nnz, block = value                    # backward has built it
                total += (block.num_dst_nodes() + 1 + 2 * nnz) * 8
                if "csc" in rgidx.formats()["created"]:
                    total += (block.num_src_nodes() + 1 + 2 * nnz) * 8
            elif isinstance(value, tuple) and key[0] == "row_csr":
                total += sum(t.numel() * t.element_size() for t in value)
            elif value is not None and key[0] == "sg":  # COO + edge ids, plus the CSR views DGL adds
                itemsize = 8 if value.idtype == torch.int64 else 4
                total += value.num_edges() * itemsize * 3 * 2 + (value.num_nodes() + 1) * itemsize * 2
        return total
