"""What the aggregation core needs of a graph, and its plain-tensor implementation.

:class:`GraphViews` is the contract between the core and whoever owns the graph: sizes, CSR views
in both directions, edge endpoints in edge-id order, a per-graph cache, and (optionally) the host
library's own CPU kernels.  The DGL adapter implements it over a ``DGLGraph``
(``dgl_accel.graph.views.DGLGraphViews``, DGL's compiled SpMM/SDDMM as the native kernels);
:class:`TensorGraph` implements it over plain tensors with no dependency beyond torch, so the core
runs where DGL cannot be installed.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ..csr import Structure, sort_by_row
from ..grouping.degree_stats import DegreeStats, degree_stats_of
from ..grouping.size import choose_group_size
from ..groups import Groups, build_groups
from ..jit import runtime as jit_runtime
from ..jit.aggregation import rows_spmm, weighted_rows_spmm
from .checks import check_edge_list
from .launchers import time_grouped_forward
from .scales import acc_dtype, degree_scales

DIRECTIONS = ("in", "out")
TUNE_FROM_CALL = 3  # see GraphViews.group_size


class GraphViews:
    """A graph as the aggregation core sees it; subclasses provide :meth:`cached`, :meth:`csr` and
    :meth:`edges_by_id`, and may override the native kernels with faster ones of their own.

    ``"in"`` views have one row per destination (forward aggregation), ``"out"`` views one row per
    source (the backward pass w.r.t. source features).
    """

    num_src: int
    num_dst: int
    num_edges: int
    device: torch.device
    idtype: torch.dtype
    bipartite: bool  # sources and destinations are different node sets (a sampled block)
    # feature dtypes :meth:`native_spmm` sums without weights as they come (half types: in fp32 inside);
    # others are widened to their accumulation dtype around it
    native_dtypes: tuple = (torch.float32, torch.float64)

    def cached(self, name: str, build: Callable[[], Any]) -> Any:
        raise NotImplementedError

    def csr(self, direction: str) -> Structure:
        raise NotImplementedError

    def edges_by_id(self):
        """(src, dst) of every edge in edge-id order."""
        raise NotImplementedError

    # ------------------------------------------------------------------ derived, cached
    def groups(self, direction: str, gs: int) -> Groups:
        return self.cached(f"groups_{direction}_{gs}", lambda: build_groups(self.csr(direction), gs))

    def out_by_in_position(self) -> Structure:
        """The out-CSR with each entry's position in the in-CSR as its third array (for the edge id):
        a loop over destinations writes per-edge values in its own order, and the loop over sources
        reads them in its own after one gather by these positions."""
        def build():
            rows_in, rows_out = self.csr("in"), self.csr("out")
            where = torch.empty(rows_in.num_edges, dtype=torch.int64, device=rows_in.eids.device)
            where[rows_in.eids.long()] = torch.arange(rows_in.num_edges, device=rows_in.eids.device)
            return dataclasses.replace(rows_out, eids=where[rows_out.eids.long()])
        return self.cached("out_by_in_position", build)

    def in_degrees(self) -> torch.Tensor:
        indptr = self.csr("in").indptr
        return indptr[1:] - indptr[:-1]

    def out_degrees(self) -> torch.Tensor:
        indptr = self.csr("out").indptr
        return indptr[1:] - indptr[:-1]

    def scales(self, norm: str, reduce: str, dtype: torch.dtype):
        """(per-source, per-destination) factors in the accumulation dtype, cached per graph."""
        if norm == "none" and reduce == "sum":
            return None, None  # the common case: no lookup at all
        acc = acc_dtype(dtype)
        return self.cached(f"gspmm.scales.{norm}.{reduce}.{acc}",
                           lambda: degree_scales(self.out_degrees, self.in_degrees, norm, reduce, acc))

    def degree_stats(self) -> DegreeStats:
        return self.cached("degree_stats", lambda: degree_stats_of(self.csr("in")))

    def group_size(self, feat_dim: int, dtype: torch.dtype) -> int:
        """The neighbour-group size chosen from this graph's degree statistics (see
        ``dgl_accel.explain``).  The autotuner (CUDA) times a graph from its
        :data:`TUNE_FROM_CALL`-th aggregation at a width and dtype on: a training step is two (forward
        and backward), so a graph used for one step, such as each minibatch's sampled graph,
        keeps the cost model and is never timed, while a graph trained on for epochs is timed once."""
        calls = self.cached("grouping.calls", dict)
        key = (int(feat_dim), dtype)
        calls[key] = calls.get(key, 0) + 1
        return choose_group_size(self, feat_dim, dtype, policy="auto" if calls[key] >= TUNE_FROM_CALL else "cost").gs

    # ------------------------------------------------------------------ native kernels
    def time_grouped_forward(self, feat_dim: int, dtype: torch.dtype, gs: int) -> float:
        """Seconds for one grouped forward with group size ``gs`` on this graph's CUDA device: the
        group-size autotuner's default timer (:func:`~dgl_accel.core.grouping.size.time_on_views`)."""
        return time_grouped_forward(self, feat_dim, dtype, gs)

    def native_accepts(self, dtype: torch.dtype, weighted: bool) -> bool:
        """Whether :meth:`native_spmm` takes features of ``dtype`` as they are (else the caller
        widens them to their accumulation dtype): fp32 and fp64 always; bf16 on the CPU where the
        compiled loops run (read as bits, summed in fp32), or unweighted in ``native_dtypes``."""
        if dtype in (torch.float32, torch.float64) or (not weighted and dtype in self.native_dtypes):
            return True
        return (dtype == torch.bfloat16 and self.device.type == "cpu"
                and type(self).native_spmm is GraphViews.native_spmm
                and jit_runtime.worth(self.num_edges))

    def native_spmm(self, direction: str, x: torch.Tensor, w: torch.Tensor | None, out=None) -> torch.Tensor:
        """sum over the ``direction`` view's entries of x[col] (* w[eid]); x, w contiguous, w of
        shape [E, 1] or [E, F]; one dtype (float32/64), or bf16 x (read as bits, summed and returned
        in fp32) with float32 w where :meth:`native_accepts` says so.  ``out``: a contiguous tensor
        of the result's shape and dtype the compiled loops may write into (else a fresh one).
        Subclasses may run their own library's kernel."""
        s = self.csr(direction)
        out_rows = s.num_rows
        if x.device.type == "cpu" and jit_runtime.worth(s.num_edges) and x.dtype in _LOOP_DTYPES:
            # bf16: fp32 sums, rounded once by the caller
            if out is None:
                out = torch.empty((out_rows, x.shape[1]), dtype=acc_dtype(x.dtype))
            if w is None:
                rows_spmm(s.indptr.numpy(), s.indices.numpy(), _loop_view(x), None, None, _loop_view(out))
            else:
                weighted_rows_spmm(s.indptr.numpy(), s.indices.numpy(), s.eids.numpy(), _loop_view(x),
                                   _loop_view(w), _loop_view(out))
            return out
        values = x.index_select(0, s.indices.long())
        if w is not None:
            values = values * w.index_select(0, s.eids.long())
        out = torch.zeros((out_rows, x.shape[1]), dtype=x.dtype, device=x.device)
        return out.index_add_(0, self.cached(f"views.entry_rows.{direction}", lambda: _entry_rows(s)), values)

    def native_sddmm(self, x: torch.Tensor, g: torch.Tensor, per_feat: bool) -> torch.Tensor:
        """Per edge (edge-id order): x[src] * g[dst] (``per_feat``) or its row sum: [E, F] or [E, 1]."""
        return torch_sddmm(self, x, g, per_feat)


_LOOP_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _loop_view(t: torch.Tensor):
    """A contiguous CPU tensor as the compiled loops take it: bf16 as its bits, else its numpy view."""
    return jit_runtime.bf16_bits(t) if t.dtype == torch.bfloat16 else t.numpy()


def torch_sddmm(views: GraphViews, x: torch.Tensor, g: torch.Tensor, per_feat: bool) -> torch.Tensor:
    """:meth:`GraphViews.native_sddmm` in torch ops (differentiable: the double backward uses it
    whatever kernel the views carry)."""
    src, dst = views.edges_by_id()
    prod = x.index_select(0, src.long()) * g.index_select(0, dst.long())
    return prod if per_feat else prod.sum(1, keepdim=True)


def _entry_rows(s: Structure) -> torch.Tensor:
    """The row of every CSR entry (int64), for scatter-adds."""
    return torch.repeat_interleave(torch.arange(s.num_rows, device=s.indptr.device), s.indptr[1:] - s.indptr[:-1])


def _csr_from(rows: torch.Tensor, cols: torch.Tensor, num_rows: int, num_cols: int, idtype: torch.dtype) -> Structure:
    """The CSR view of the edge list ``rows[e] -> cols[e]`` whose edge ids are the positions ``e``."""
    indptr, order = sort_by_row(rows, num_rows)
    return Structure(indptr=indptr, indices=cols[order].to(idtype), eids=order.to(idtype),
                     num_rows=num_rows, num_cols=num_cols, device=rows.device)


class TensorGraph(GraphViews):
    """A graph held as plain tensors: edges ``src[e] -> dst[e]`` with edge id ``e`` (``id_range``: see
    :func:`~.checks.check_edge_list`).

    >>> import torch
    >>> g = TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)
    >>> g.csr("in").indptr.tolist(), g.csr("in").indices.tolist()
    ([0, 0, 2, 3], [0, 2, 1])
    """

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, num_nodes: int | None = None, *,
                 num_src: int | None = None, num_dst: int | None = None, id_range=None):
        self.num_src, self.num_dst = check_edge_list(src, dst, num_nodes, num_src, num_dst, id_range)
        self._src, self._dst = src, dst
        self.num_edges = int(src.numel())
        self.device, self.idtype = src.device, src.dtype
        self.bipartite = num_nodes is None and (num_src is not None or num_dst is not None)
        self._cache: dict = {}

    def cached(self, name: str, build: Callable[[], Any]) -> Any:
        if name not in self._cache:
            self._cache[name] = build()
        return self._cache[name]

    def csr(self, direction: str) -> Structure:
        if direction == "in":
            return self.cached("in_csr", lambda: _csr_from(self._dst, self._src, self.num_dst, self.num_src,
                                                            self.idtype))
        return self.cached("out_csr", lambda: _csr_from(self._src, self._dst, self.num_src, self.num_dst,
                                                         self.idtype))

    def edges_by_id(self):
        return self._src, self._dst
