"""Relational aggregation (R-GCN): each target's neighbours aggregated per relation (edge type), on
the core's aggregation ops, differentiable in the features.

A :class:`RelationalGraph` holds the edges ``src[e] -> dst[e]`` with relation ``etype[e]`` in
``[0, R)`` and two graphs of the core's views built from them (lazily, once):

* ``targets``: edges ``src -> dst * R + etype`` over ``num_dst * R`` targets, so that one
  aggregation gives every target's per-relation reduce: :func:`relation_aggregate` (x [S, F] ->
  [D, R, F]; sum, mean over the relation's in-edges ``|N_r(i)|``, max, min with 0 where a relation
  brings no edge);
* ``sources``: edges ``src * R + etype -> dst`` over ``num_src * R`` sources, so that rows already
  projected per relation (``y[j, r] = x_j W_r``) are summed into the targets, each message weighted
  by 1 (sum) or ``1 / |N_{etype}(dst)|`` (mean): :func:`relation_spread` (y [S, R, F] -> [D, F]).

``relation_aggregate(x) @ W`` (flattened over relations) and ``relation_spread(x @ W_r)`` are the
same sums in another order; the narrower of the two widths is the cheaper aggregation.
:func:`relation_aggregate_reference` and :func:`relation_spread_reference` compute both in torch
ops, one relation at a time.

Under ``torch.compile`` (torch >= 2.4) a :class:`TracedRelationalGraph` (the edges, the relations
and a ``kind`` naming a builder registered with :func:`register_relational_kind`) stands where the
graph goes: sum and mean then run as the custom op ``torch.ops.dgl_accel.relational_aggregate``,
whose real implementation is the eager aggregation on the builder's (cached) graph and whose
gradient is the same op on the transposed graph.  Max and min are eager only.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from .aggregation.function import aggregate, run_aggregation
from .aggregation.plan import TRANSPOSED
from .aggregation.scales import acc_dtype
from .aggregation.views import TensorGraph
from .extrema import aggregate_extrema

__all__ = ["RelationalGraph", "TracedRelationalGraph", "register_relational_kind", "relation_aggregate",
           "relation_spread", "relation_aggregate_reference", "relation_spread_reference"]

_KINDS: dict[str, Callable] = {}
LAYOUTS = ("targets", "sources")


class RelationalGraph:
    """Edges ``src -> dst`` of relation ``etype`` over ``num_src`` sources and ``num_dst`` targets
    (``num_relations`` relations).  ``type_range``: (lowest, highest) relation id of the edges
    (read once); :meth:`check_types` raises where one lies outside ``[0, num_relations)``."""

    traced = False

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, etype: torch.Tensor, num_src: int, num_dst: int,
                 num_relations: int):
        if etype.dim() != 1 or etype.numel() != src.numel() or etype.is_floating_point():
            raise ValueError(f"expected one integer relation id per edge, shape [{src.numel()}] (got "
                             f"{etype.dtype} of shape {list(etype.shape)}). Fix: edge_type.long().view(-1).")
        self.src, self.dst, self.etype = src.long(), dst.long(), etype.long()
        self.num_src, self.num_dst, self.num_relations = num_src, num_dst, num_relations
        self.num_edges = int(src.numel())
        both = torch.stack([self.etype.min(), self.etype.max()]).tolist() if self.num_edges else [0, 0]
        self.type_range = (both[0], both[1])
        self._cache: dict = {}

    def check_types(self) -> None:
        low, high = self.type_range
        if self.num_edges and (low < 0 or high >= self.num_relations):
            raise ValueError(f"expected relation ids in [0, {self.num_relations}) (got ids from {low} to {high}). "
                             f"Fix: pass num_relations > {high} to the layer, or map the edge types to 0..R-1.")

    def _get(self, name: str, build: Callable):
        if name not in self._cache:
            with torch.inference_mode(False):  # cached tensors serve later calls with autograd
                self._cache[name] = build()
        return self._cache[name]

    @property
    def targets(self) -> TensorGraph:
        """Views of ``src -> dst * R + etype`` (per-relation rows of every target)."""
        r = self.num_relations
        return self._get("targets", lambda: TensorGraph(self.src, self.dst * r + self.etype, num_src=self.num_src,
                                                        num_dst=self.num_dst * r))

    @property
    def sources(self) -> TensorGraph:
        """Views of ``src * R + etype -> dst`` (per-relation rows of every source)."""
        r = self.num_relations
        return self._get("sources", lambda: TensorGraph(self.src * r + self.etype, self.dst,
                                                        num_src=self.num_src * r, num_dst=self.num_dst))

    def mean_weight(self, dtype: torch.dtype) -> torch.Tensor:
        """``1 / |N_{etype[e]}(dst[e])|`` per edge, in ``dtype``."""
        def build():
            rows = self.dst * self.num_relations + self.etype
            count = torch.bincount(rows, minlength=self.num_dst * self.num_relations)
            return (1.0 / count[rows].to(torch.float64)).to(dtype)
        return self._get(("mean_weight", dtype), build)


class TracedRelationalGraph:
    """A relational graph as tensors for the custom op (under ``torch.compile``): ``edge_index``
    [2, E], ``edge_type`` [E], the node and relation counts, and the registered ``kind`` whose
    builder turns them into a :class:`RelationalGraph` inside the op."""

    traced = True

    def __init__(self, edge_index: torch.Tensor, edge_type: torch.Tensor, num_src: int, num_dst: int,
                 num_relations: int, kind: str):
        self.edge_index, self.edge_type, self.kind = edge_index, edge_type, kind
        self.num_src, self.num_dst, self.num_relations = num_src, num_dst, num_relations

    def aggregate(self, layout: str, reduce: str, x: torch.Tensor, keep_acc: bool) -> torch.Tensor:
        return torch.ops.dgl_accel.relational_aggregate(self.edge_index, self.edge_type, self.num_src, self.num_dst,
                                                        self.num_relations, self.kind, layout, reduce, False,
                                                        keep_acc, x)


def register_relational_kind(name: str, build: Callable) -> None:
    """``build(edge_index, edge_type, num_src, num_dst, num_relations) -> RelationalGraph`` serves
    the traced graphs of kind ``name`` inside the custom op."""
    _KINDS[name] = build


def relation_aggregate(graph, reduce: str, x: torch.Tensor) -> torch.Tensor:
    """[num_dst, R, F]: ``reduce`` (sum, mean, max, min) of ``x[src]`` over each target's in-edges
    of each relation (0 where there are none)."""
    r = graph.num_relations
    if reduce in ("max", "min"):
        if graph.traced:
            raise ValueError(f"expected reduce 'sum' or 'mean' under torch.compile (got {reduce!r}). "
                             f"Fix: run this call eagerly (torch.compiler.disable).")
        out = aggregate_extrema(graph.targets, "copy_u", reduce, x, fill=0.0)
    elif graph.traced:
        out = graph.aggregate("targets", reduce, x, False)
    else:
        out = aggregate(graph.targets, "copy_u", reduce, x)
    return out.view(graph.num_dst, r, *x.shape[1:])


def relation_spread(graph, reduce: str, y: torch.Tensor, keep_acc: bool = False) -> torch.Tensor:
    """[num_dst, F]: the sum over each target's in-edges e of ``w[e] * y[src[e], etype[e]]`` with
    ``w`` 1 (``reduce`` sum) or ``1 / |N_{etype[e]}(dst)|`` (mean); ``y`` [num_src, R, F].
    ``keep_acc``: bf16 rows summed into an fp32 result (not rounded to bf16)."""
    if reduce not in ("sum", "mean"):
        raise ValueError(f"expected reduce 'sum' or 'mean' for rows projected per relation (got {reduce!r}). "
                         f"Fix: relation_aggregate first, then project.")
    rows = y.reshape(graph.num_src * graph.num_relations, *y.shape[2:])
    if graph.traced:
        return graph.aggregate("sources", reduce, rows, keep_acc)
    if reduce == "sum":
        return aggregate(graph.sources, "copy_u", "sum", rows, keep_acc=keep_acc)
    weight = graph.mean_weight(torch.float32 if rows.dtype == torch.bfloat16 else rows.dtype)
    return aggregate(graph.sources, "u_mul_e", "sum", rows, weight, keep_acc=keep_acc)


# ------------------------------------------------------------------------------------ references
def relation_aggregate_reference(src, dst, etype, x, num_dst: int, num_relations: int, reduce: str) -> torch.Tensor:
    """:func:`relation_aggregate` in torch ops, one relation at a time."""
    out = []
    for r in range(num_relations):
        mask = etype == r
        s, d = src[mask], dst[mask]
        shape = (num_dst,) + tuple(x.shape[1:])
        index = d.view(-1, *([1] * (x.dim() - 1))).expand(-1, *x.shape[1:])
        if reduce in ("sum", "mean"):
            h = x.new_zeros(shape).index_add(0, d, x[s])
            if reduce == "mean":
                count = torch.bincount(d, minlength=num_dst).clamp(min=1).to(x.dtype)
                h = h / count.view(-1, *([1] * (x.dim() - 1)))
        else:
            fill = float("-inf") if reduce == "max" else float("inf")
            h = x.new_full(shape, fill).scatter_reduce(0, index, x[s], "amax" if reduce == "max" else "amin")
            h = torch.where(torch.isinf(h), torch.zeros_like(h), h)
        out.append(h)
    return torch.stack(out, dim=1)


def relation_spread_reference(src, dst, etype, y, num_dst: int, reduce: str) -> torch.Tensor:
    """:func:`relation_spread` in torch ops, one relation at a time."""
    out = y.new_zeros((num_dst,) + tuple(y.shape[2:]))
    for r in range(y.shape[1]):
        mask = etype == r
        s, d = src[mask], dst[mask]
        h = y.new_zeros(out.shape).index_add(0, d, y[s, r])
        if reduce == "mean":
            h = h / torch.bincount(d, minlength=num_dst).clamp(min=1).to(y.dtype).view(-1, *([1] * (y.dim() - 2)))
        out = out + h
    return out


# ------------------------------------------------------------------------------------ the custom op
def _resolve(edge_index, edge_type, num_src, num_dst, num_relations, kind) -> RelationalGraph:
    if kind not in _KINDS:
        raise ValueError(f"expected a registered relational graph kind ({', '.join(sorted(_KINDS))}) (got "
                         f"{kind!r}). Fix: register_relational_kind({kind!r}, build) before the op runs.")
    graph = _KINDS[kind](edge_index, edge_type, int(num_src), int(num_dst), int(num_relations))
    graph.check_types()
    return graph


def _relational(edge_index, edge_type, num_src, num_dst, num_relations, kind, layout, reduce, transposed, keep_acc,
                x):
    graph = _resolve(edge_index, edge_type, num_src, num_dst, num_relations, kind)
    if layout == "targets":
        views, op, w = graph.targets, "copy_u", None
    elif reduce == "sum":
        views, op, w, reduce = graph.sources, "copy_u", None, "sum"
    else:
        weight_dtype = torch.float32 if x.dtype == torch.bfloat16 else x.dtype
        views, op, w, reduce = graph.sources, "u_mul_e", graph.mean_weight(weight_dtype), "sum"
    return run_aggregation(views, op, reduce, x, w, "none", None, None, TRANSPOSED if transposed else None,
                           keep_acc).contiguous()


def _rows(layout: str, transposed: bool, num_src, num_dst, num_relations):
    """The output's row count of the op."""
    wide_src = layout == "sources"
    if transposed:
        return num_src * num_relations if wide_src else num_src
    return num_dst if wide_src else num_dst * num_relations


AVAILABLE = hasattr(torch.library, "custom_op")  # torch >= 2.4, as core.library


def _register() -> None:
    schema = ("(Tensor edge_index, Tensor edge_type, SymInt num_src, SymInt num_dst, int num_relations, str kind, "
              "str layout, str reduce, bool transposed, bool keep_acc, Tensor x) -> Tensor")
    op = torch.library.custom_op("dgl_accel::relational_aggregate", _relational, mutates_args=(), schema=schema)

    @op.register_fake
    def _fake(ei, et, ns, nd, r, kind, layout, reduce, transposed, keep_acc, x):
        rows = _rows(layout, transposed, ns, nd, r)
        return x.new_empty((rows,) + tuple(x.shape[1:]), dtype=acc_dtype(x.dtype) if keep_acc else None)

    def setup(ctx, inputs, output):
        ctx.graph, ctx.options, ctx.x_dtype = inputs[:6], inputs[6:9], inputs[10].dtype

    def grad(ctx, grad_out):
        layout, reduce, transposed = ctx.options
        grad_x = None
        if ctx.needs_input_grad[10]:
            grad_x = op(*ctx.graph, layout, reduce, not transposed, False, grad_out).to(ctx.x_dtype)
        return (None,) * 10 + (grad_x,)

    op.register_autograd(grad, setup_context=setup)


if AVAILABLE:
    _register()
