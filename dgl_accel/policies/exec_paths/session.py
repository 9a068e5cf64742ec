"""Partially-active aggregation for full-graph training on a fixed training set (execution paths).

Xu et al., "Accelerating backward aggregation in GCN training with execution path preparing".
With training nodes Vt, define frontiers N^0 = Vt and N^k = N^{k-1} + in-neighbours(N^{k-1})
over exactly the graph the layers aggregate on.  If L aggregations run in a training step and
everything between them is row-wise (linear layers, activations, dropout, bias, residuals), the
gradient reaching the output of the i-th aggregation is zero outside N^{L-i}.  So its backward
only needs the execution-path subgraph SG_{L-i}: the in-edges of N^{L-i} (their sources lie in
N^{L-i+1}).  Skipping the other edges drops only exact zeros: gradients are unchanged.

Beyond the paper, ``restrict_forward=True`` also computes each aggregation's output only on the
rows the loss can reach (N^{L-i}; other rows are 0), once L is known (``num_layers=`` or learned
from the first step).  Then only the final-layer rows of Vt are meaningful inside the block.

    with dgl_accel.execution_paths(g, train_idx):
        loss = F.cross_entropy(model(g, x)[train_idx], y[train_idx])
        loss.backward()

Frontiers and subgraphs are built once per (graph version, Vt) and cached on the graph; a graph
mutated in place is detected and the paths rebuilt.  Forward passes without autograd (evaluation
under ``torch.no_grad()``) and other graphs stay all-active.  Not valid with layers that mix rows
between aggregations (BatchNorm over nodes, global pooling): pass ``model=`` to have such layers
rejected up front.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import List, Optional

import dgl
import torch

from .graph.structure import cached, check_graph, edges_by_id, structure_id

_local = threading.local()
_ROW_MIXING = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.InstanceNorm1d)


def _validate_train_idx(graph, train_idx) -> torch.Tensor:
    n = graph.num_dst_nodes()
    if isinstance(train_idx, torch.Tensor) and train_idx.dtype == torch.bool:
        if train_idx.shape != (n,):
            raise ValueError(f"expected a boolean training mask of shape ({n},) (got {tuple(train_idx.shape)}). "
                             f"Fix: pass g.ndata['train_mask'] of this graph, or node indices.")
        idx = train_idx.nonzero().flatten()
    else:
        idx = torch.as_tensor(train_idx)
        if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.dim() != 1:
            raise ValueError(f"expected a 1-D integer tensor of training node ids or a boolean mask "
                             f"(got dtype {idx.dtype}, shape {tuple(idx.shape)}).")
    if idx.numel() == 0:
        raise ValueError("expected at least one training node (got an empty Vt). Fix: pass the nodes "
                         "whose loss you train on.")
    idx = idx.long().to(graph.device)
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= n:
        raise ValueError(f"expected training node ids in [0, {n}) (got ids from {lo} to {hi}). "
                         f"Fix: index nodes of this graph (g.num_nodes() = {n}).")
    if torch.unique(idx).numel() != idx.numel():
        raise ValueError(f"expected distinct training node ids (got {idx.numel() - torch.unique(idx).numel()} "
                         f"duplicates). Fix: torch.unique(train_idx).")
    return idx


# Above this share of the graph's edges, a frontier's subgraph saves too little to pay for the
# gather/scatter around it (bench/bench_execution_paths.py: at 40-80% of the edges the compact
# kernels were no faster than the full ones): run the full aggregation, which is also exact.
MAX_EDGE_FRACTION = 0.5
# Dense layers restricted to a frontier's rows pay a gather and a scatter of those rows; a weight
# product saves (1 - fraction) of its work, which still wins at 70% of the rows.
MAX_ROW_FRACTION = 0.7
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
        self._frontiers: List[torch.Tensor] = [mask]
        self._cache: dict = {}
        self.learned_layers: Optional[int] = None  # aggregations per step seen by an earlier block
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
        (``cpu_jit.rows_spmm``) reads where a compact block does not pay.  It writes every output
        row in the same pass (zeros for rows without edges), so no zero fill and no scatter."""
        def build():
            row, col = self._oriented_edges(k, direction)
            n = self.graph.num_dst_nodes() if direction == "in" else self.graph.num_src_nodes()
            order = torch.argsort(row, stable=True)
            indptr = torch.zeros(n + 1, dtype=torch.int64, device=row.device)
            torch.cumsum(torch.bincount(row, minlength=n), 0, out=indptr[1:])
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


def _cached_paths(graph, idx: torch.Tensor, key: str) -> Paths:
    paths = cached(graph, key, lambda g: Paths(g, idx))
    if paths.train_idx is not idx and not torch.equal(paths.train_idx, idx):
        paths = Paths(graph, idx)  # a hash collision must never hand out another Vt's paths
    return paths


def _checked(graph, train_idx):
    if not isinstance(graph, dgl.DGLGraph):
        raise ValueError(f"expected a dgl.DGLGraph (got {type(graph).__name__}).")
    check_graph(graph)
    if graph.is_block:
        raise ValueError("expected the full graph of full-graph training (got a block). Execution paths "
                         "are for a fixed training set on one graph; sampled blocks are already partial.")
    hit = _validated_before(graph, train_idx)
    if hit is not None:
        return hit
    idx = _validate_train_idx(graph, train_idx)
    result = idx, f"execution_paths.{hash(idx.cpu().numpy().tobytes())}.{idx.numel()}"
    _remember_validated(graph, train_idx, result)
    return result


# Training loops enter the block every step with the same index tensor; its checks (a sort for the
# duplicates) cost 0.2 ms a step at 11k ids.  Remembered per tensor object and version (an in-place
# change bumps the version), for graphs of the same size and device.
_VALIDATED: dict = {}


def _tensor_version(t) -> Optional[int]:
    try:
        return t._version
    except RuntimeError:  # inference-mode tensors keep no version counter: never remembered
        return None


def _validated_before(graph, train_idx):
    if not isinstance(train_idx, torch.Tensor):
        return None
    hit = _VALIDATED.get(id(train_idx))
    if hit is None:
        return None
    ref, version, where, result = hit
    same = ref() is train_idx and version is not None and version == _tensor_version(train_idx)
    return result if same and where == (graph.num_dst_nodes(), graph.device) else None


def _remember_validated(graph, train_idx, result) -> None:
    if not isinstance(train_idx, torch.Tensor) or _tensor_version(train_idx) is None:
        return
    if len(_VALIDATED) > 16:
        _VALIDATED.clear()
    _VALIDATED[id(train_idx)] = (weakref.ref(train_idx), _tensor_version(train_idx),
                                 (graph.num_dst_nodes(), graph.device), result)


def prepare(graph, train_idx) -> Paths:
    """The cached :class:`Paths` of ``graph`` and ``train_idx`` (rebuilt if the graph changed)."""
    idx, key = _checked(graph, train_idx)
    return _cached_paths(graph, idx, key)


class _Session:
    """Per-block state: counts aggregations of one training step to know each one's depth."""

    def __init__(self, graph, train_idx, restrict_forward: bool, num_layers: Optional[int]):
        self.graph = graph
        self._idx, self._key = _checked(graph, train_idx)
        self._sid = structure_id(graph)
        self._sizes = (graph.num_src_nodes(), graph.num_dst_nodes(), graph.num_edges())
        self.restrict_forward = restrict_forward
        self.num_layers = num_layers  # L, given or learned from the first step
        self.calls = 0                 # aggregations so far in the current step
        self.backward_seen = False

    @property
    def paths(self) -> Paths:
        return _cached_paths(self.graph, self._idx, self._key)  # rebuilt if the graph was mutated

    def on_forward(self, graph) -> Optional[int]:
        """The 1-based index of this aggregation in the step, or None if it runs all-active."""
        if not torch.is_grad_enabled() or not self._same_structure(graph):
            return None
        if self.backward_seen:  # a forward after a backward starts the next step
            if self.num_layers is None and self.restrict_forward:
                self.num_layers = self.calls
            self.calls, self.backward_seen = 0, False
        self.calls += 1
        if self.restrict_forward and self.num_layers is not None and self.calls > self.num_layers:
            raise RuntimeError(
                f"expected at most {self.num_layers} aggregations per training step with restrict_forward=True "
                f"(got a {self.calls}th): earlier layers computed too few rows. Fix: pass num_layers= with the "
                f"number of aggregations of your model, or use restrict_forward=False.")
        return self.calls

    def _same_structure(self, graph) -> bool:
        if graph is self.graph:
            return True
        # dgl.nn layers reach us through update_all with a fresh view of the user's graph.
        sizes = (graph.num_src_nodes(), graph.num_dst_nodes(), graph.num_edges())
        return sizes == self._sizes and structure_id(graph) == self._sid

    def forward_depth(self, layer: int) -> Optional[int]:
        """Frontier depth whose rows the forward of aggregation ``layer`` must compute, if known."""
        if not self.restrict_forward or self.num_layers is None:
            return None
        return self.num_layers - layer

    def backward_depth(self, layer: int) -> int:
        self.backward_seen = True
        return max(0, self.calls - layer)


def active_session():
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


class LayerPlan:
    """What one aggregation of a training step may skip: its index in the step and, once the
    number of aggregations is known, the rows its output and input must hold."""

    __slots__ = ("session", "layer")

    def __init__(self, session: _Session, layer: int):
        self.session, self.layer = session, layer

    @property
    def forward_depth(self) -> Optional[int]:
        return self.session.forward_depth(self.layer)

    def rows(self, depth: int) -> Optional[torch.Tensor]:
        """Node ids whose rows must be computed at ``depth``, or None when restricting to them would
        not pay (the frontier holds most of the nodes): then compute every row."""
        rows = self.session.paths.rows(depth)
        return rows if rows.numel() <= MAX_ROW_FRACTION * self.session.paths.graph.num_nodes() else None


def begin_layer(graph) -> Optional[LayerPlan]:
    """Register one aggregation over ``graph`` with the active session (None: run all-active)."""
    session = active_session()
    if session is None:
        return None
    layer = session.on_forward(graph)
    return None if layer is None else LayerPlan(session, layer)


@contextlib.contextmanager
def execution_paths(graph, train_idx, *, restrict_forward: bool = False, num_layers: Optional[int] = None,
                    model: Optional[torch.nn.Module] = None):
    """Run aggregations over ``graph`` on their execution paths inside the block (see module doc).

    DGL's own message passing is routed through dgl-accel for the block (``dgl_accel.enabled()``),
    so unmodified ``dgl.nn`` layers take part too.
    """
    from .patching import enabled

    if num_layers is not None and (not isinstance(num_layers, int) or num_layers < 1):
        raise ValueError(f"expected num_layers to be a positive int or None (got {num_layers!r}).")
    if model is not None:
        for name, module in model.named_modules():
            if isinstance(module, _ROW_MIXING):
                raise ValueError(
                    f"expected only row-wise layers between aggregations (got {type(module).__name__} at "
                    f"'{name}', which mixes nodes). Fix: train this model without execution paths, or use a "
                    f"per-node normalisation such as LayerNorm.")
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    session = _Session(graph, train_idx, restrict_forward, num_layers)  # bad input fails here
    paths = session.paths  # build N^0 now, outside the timed step
    if session.num_layers is None:
        session.num_layers = paths.learned_layers
    stack.append(session)
    try:
        with enabled():
            yield session
    finally:
        stack.pop()
        if restrict_forward and session.calls and session.backward_seen:
            # Later blocks on the same (graph, Vt) restrict their forward from their first step.
            paths.learned_layers = max(session.num_layers or 0, session.calls)
