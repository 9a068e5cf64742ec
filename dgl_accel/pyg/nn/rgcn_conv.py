"""Drop-ins ``torch_geometric.nn.RGCNConv`` and ``FastRGCNConv`` (Schlichtkrull et al.'s relational
GCN): PyG's modules (constructor, ``weight`` / ``comp`` / ``root`` / ``bias``, state_dict keys) with
the per-relation aggregation on dgl-accel's core (:mod:`dgl_accel.core.typed`).

PyG's RGCNConv loops over the relations (a masked edge list, one aggregation and one product per
relation); FastRGCNConv gathers a weight matrix per edge (E x in x out).  Both compute
``x_i' = root(x_i) + sum_r aggr_{j in N_r(i)} W_r x_j + bias``, ``aggr`` per relation (mean:
``1 / |N_r(i)|``).  Here the relations' weights (``comp @ weight`` with bases, block-diagonal
blocks with ``num_blocks``) meet the graph once:

* where the output is narrower than the input (sum / mean; :func:`projects_first`), the features
  are projected first, ``y[j, r] = x_j W_r`` for every relation in one product, and summed into the
  targets with the edge's relation selecting the row (:func:`~dgl_accel.core.typed.relation_spread`:
  weights ``1 / |N_r(i)|`` for mean);
* otherwise (and for max / min) every target's per-relation aggregation comes first, [N, R, in] in
  one core aggregation (:func:`~dgl_accel.core.typed.relation_aggregate`), then one product with
  the relations' weights stacked ([N, R * in] @ [R * in, out]; blocks: one batched product).

Featureless inputs (``x`` None or node ids: the weights' rows are the nodes' embeddings) spread the
gathered rows ``W_r[x_j]`` (FastRGCNConv, as PyG's, reads the row of the source id itself).  The
relational graph is built once per graph, edge types and node counts and kept with the graph's
cache entry, the last :data:`KEPT` of them (each holds its ``edge_type``, keyed by its storage and
version, so that a key never names another tensor's memory; an ``edge_type`` made anew for every
call, ``edge_type.long()`` of another dtype, is a new build every call).  The
result has PyG's dtype (PyG adds to an fp32 zero tensor: fp32 under CPU autocast); under autocast
the rows aggregated before a product are cast to bf16 once.  Under ``torch.compile`` (torch >= 2.4)
sum and mean run as the custom op ``torch.ops.dgl_accel.relational_aggregate`` (no graph break); there an
edge type outside ``[0, num_relations)`` raises a ValueError inside the op.

Left to PyG's forward (``pyg.RGCNConv: fallthrough: <reason>``, ``pyg.FastRGCNConv: ...``): a
``torch_sparse.SparseTensor`` or ``torch.sparse`` adjacency (its values are the edge types),
``EdgeIndex`` inputs, ``edge_type`` other than an integer [num_edges] tensor, edge types outside
``[0, num_relations)`` (RGCNConv drops those edges, FastRGCNConv raises), aggregations other than
add / sum / mean / max / min (FastRGCNConv: other than add / sum / mean, PyG's AssertionError),
featureless max / min, features other than [N, F] floats of one dtype or 1-D node ids on both
sides, FastRGCNConv's featureless call with more source nodes than ``in_channels``, and PyG's explain
mode, message passing hooks, ``decomposed_layers`` and the ``target_to_source`` flow.  Max / min
under ``torch.compile`` run eagerly behind the layer's compile boundary.  Errors as PyG's: no
``edge_type`` (AssertionError; FastRGCNConv: RuntimeError), blocks with node ids (ValueError), ids
out of range (IndexError).
"""
from __future__ import annotations

import torch
import torch_geometric.nn as pyg_nn

from ...core.library import AVAILABLE as TRACEABLE
from ...core.typed import (
    RelationalGraph,
    TracedRelationalGraph,
    register_relational_kind,
    relation_aggregate,
    relation_spread,
)
from ..graph import edges_of, storage_key
from .inputs import (
    check_device,
    compiling,
    dropin,
    fall_back,
    features_reason,
    graph_reason,
    machinery_reason,
    reduce_of,
)
from .products import narrowed_once

PygRGCNConv = pyg_nn.RGCNConv
PygFastRGCNConv = pyg_nn.FastRGCNConv
KEPT = 4  # relational graphs kept per graph (edge types, sizes), the oldest dropped first
BLOCK_ERROR = "Block-diagonal decomposition not supported for non-continuous input features."


def _untraced(module, *args, **kwargs) -> str | None:
    """Why a call under torch.compile stays behind the boundary (max / min: no custom op), or None."""
    return f"aggr {module.aggr!r}" if reduce_of(module) in ("max", "min") else None


@dropin(PygRGCNConv, "propagate", untraced=_untraced)
class RGCNConv(PygRGCNConv):
    def forward(self, x, edge_index, edge_type=None):
        found = _prepare(self, x, edge_index, edge_type, fast=False)
        if isinstance(found, str):
            return fall_back(self, PygRGCNConv, found, x, edge_index, edge_type)
        return _forward(self, *found, fast=False)


@dropin(PygFastRGCNConv, "propagate", untraced=_untraced)
class FastRGCNConv(PygFastRGCNConv):
    def forward(self, x, edge_index, edge_type=None):
        self.fuse = False  # as PyG's forward
        found = _prepare(self, x, edge_index, edge_type, fast=True)
        if isinstance(found, str):
            return fall_back(self, PygFastRGCNConv, found, x, edge_index, edge_type)
        return _forward(self, *found, fast=True)


def _sides(module, x):
    """(x_l, x_r, featureless) as PyG's forward reads ``x`` (None: node ids ``arange(in_channels)``),
    or the reason the pair goes to PyG."""
    if isinstance(x, tuple) and len(x) != 2:
        return "features neither a tensor nor a pair (x_src, x_dst)"
    x_l, x_r = x if isinstance(x, tuple) else (x, x)
    if x_l is None:
        x_l = torch.arange(module.in_channels_l, device=module.weight.device)
        x_r = x_l if not isinstance(x, tuple) else x_r
    if not isinstance(x_l, torch.Tensor) or not isinstance(x_r, torch.Tensor):
        return "features neither tensors nor node ids"
    ids = [not t.is_floating_point() for t in (x_l, x_r)]
    if ids[0] != ids[1]:
        return "node ids on one side, features on the other"
    if ids[0]:
        if x_l.dim() != 1 or x_r.dim() != 1 or x_l.is_complex() or x_l.dtype == torch.bool or x_r.dtype == torch.bool:
            return f"node ids of shape {list(x_l.shape)} / {list(x_r.shape)} (not 1-D integers)"
        return x_l, x_r, True
    why = features_reason(x_l, x_r)
    return why if why is not None else (x_l, x_r, False)


def _prepare(module, x, edge_index, edge_type, fast: bool):
    """(x_l, x_r, featureless, graph) after every check, or the reason the call goes to PyG."""
    why = machinery_reason(module) or graph_reason(edge_index, sparse_ok=False)
    if why is not None:
        return why
    reduce = reduce_of(module)
    if reduce is None or (fast and reduce not in ("sum", "mean")):
        return f"aggr {module.aggr!r}"
    sides = _sides(module, x)
    if isinstance(sides, str):
        return sides
    x_l, x_r, featureless = sides
    if featureless and module.num_blocks is not None:
        raise ValueError(f"{BLOCK_ERROR} Expected float node features with num_blocks={module.num_blocks} (got "
                         f"node ids of dtype {x_r.dtype}). Fix: pass features, or build the layer with num_bases.")
    if featureless and reduce in ("max", "min"):
        return f"featureless aggr {module.aggr!r}"
    if edge_type is None:  # PyG's error types: RGCNConv asserts, FastRGCNConv's message fails
        raise (RuntimeError if fast else AssertionError)(
            "Expected 'edge_type', one relation id per column of 'edge_index' (got None). Fix: "
            "module(x, edge_index, edge_type).")
    if not isinstance(edge_type, torch.Tensor) or edge_type.is_floating_point() or edge_type.is_complex() \
            or edge_type.dtype == torch.bool or tuple(edge_type.shape) != (edge_index.shape[1],):
        return "edge_type other than an integer [num_edges] tensor"
    num_src, num_dst = x_l.shape[0], x_r.shape[0]
    if fast and featureless and num_src > module.in_channels_l:
        return "featureless call with more source nodes than in_channels"
    check_device(edge_index, x_l, x_r, edge_type)
    graph = relational_graph(edge_index, edge_type, num_src, num_dst, module.num_relations)
    if not graph.traced:
        low, high = graph.type_range
        if graph.num_edges and (low < 0 or high >= module.num_relations):
            return "edge types outside [0, num_relations)"
    return x_l, x_r, featureless, graph


def relational_graph(edge_index, edge_type, num_src: int, num_dst: int, num_relations: int):
    """The :class:`~dgl_accel.core.typed.RelationalGraph` of a checked graph, built once per graph,
    ``edge_type`` and sizes and kept on the graph's cache entry, after PyG's id-range IndexError;
    under ``torch.compile`` the traced graph whose op builds (or finds) it."""
    if compiling():
        return TracedRelationalGraph(edge_index, edge_type, num_src, num_dst, num_relations, "pyg")
    return _built(edge_index, edge_type, num_src, num_dst, num_relations)


def _built(edge_index, edge_type, num_src: int, num_dst: int, num_relations: int) -> RelationalGraph:
    edges = edges_of(edge_index)
    edges.check_ids(num_src, num_dst)
    key = storage_key(edge_type)
    if key is None:  # an inference tensor: no version counter to key it by
        with torch.inference_mode(False):
            return RelationalGraph(edges.src, edges.dst, edge_type, num_src, num_dst, num_relations)
    kept = edges.derived("relational", dict)  # (sizes, edge_type's key) -> (edge_type, graph), oldest first
    key = (num_src, num_dst, num_relations, key)
    found = kept.get(key)
    if found is None:
        with torch.inference_mode(False):
            found = (edge_type, RelationalGraph(edges.src, edges.dst, edge_type, num_src, num_dst, num_relations))
        kept[key] = found
        while len(kept) > KEPT:
            kept.pop(next(iter(kept)), None)
    return found[1]


if TRACEABLE:
    register_relational_kind("pyg", _built)


def relation_weights(module) -> torch.Tensor:
    """The relations' weights as PyG forms them: [R, in, out] (``comp @ weight`` with bases), or
    the blocks [R, B, in / B, out / B]."""
    weight = module.weight
    if module.num_bases is not None:
        weight = (module.comp @ weight.view(module.num_bases, -1)).view(
            module.num_relations, module.in_channels_l, module.out_channels)
    return weight


def projects_first(module, x: torch.Tensor) -> bool:
    """Whether the features are projected before the sum: where the output is narrower than the
    input, so that the aggregation and its [N, R, width] intermediate are narrower.  (Measured, one
    thread, 20k nodes, 200k edges, 8 relations, a training step whose x needs no gradient, where
    aggregating first skips the backward's aggregation: 128 -> 64 took 566 ms projected first, 687
    ms aggregated first; 64 -> 32: 190 and 299 ms.)"""
    return module.out_channels < x.shape[1]


def _forward(module, x_l, x_r, featureless: bool, graph, fast: bool) -> torch.Tensor:
    reduce = reduce_of(module)
    weight = relation_weights(module)
    r, out_channels = module.num_relations, module.out_channels
    if featureless:  # the weights' rows are the sources' embeddings
        rows = weight[:, : x_l.shape[0]] if fast else weight[:, x_l]  # Fast reads the source id's row
        out = relation_spread(graph, reduce, rows.transpose(0, 1), keep_acc=True)
    elif reduce in ("sum", "mean") and projects_first(module, x_l):  # project, then sum
        if module.num_blocks is not None:
            b = module.num_blocks
            y = torch.einsum("nbi,rbio->nrbo", x_l.reshape(x_l.shape[0], b, x_l.shape[1] // b), weight)
        else:
            y = torch.mm(x_l, weight.permute(1, 0, 2).reshape(x_l.shape[1], r * out_channels))
        out = relation_spread(graph, reduce, y.reshape(x_l.shape[0], r, out_channels), keep_acc=True)
    else:  # aggregate per relation, then one product over the relations
        if reduce in ("sum", "mean"):
            x_l = narrowed_once(x_l, x_l)[0]  # autocast: cast once, the sums read bf16 rows
        h = relation_aggregate(graph, reduce, x_l)
        if module.num_blocks is not None:
            b = module.num_blocks
            out = torch.einsum("nrbi,rbio->nbo", h.reshape(h.shape[0], r, b, h.shape[2] // b), weight)
            out = out.reshape(h.shape[0], out_channels)
        else:
            out = torch.mm(h.reshape(h.shape[0], r * h.shape[2]), weight.reshape(r * h.shape[2], out_channels))
    dtype = torch.promote_types(torch.get_default_dtype(), out.dtype)  # PyG adds to zeros of the default dtype
    out = out.to(dtype)
    if module.root is not None:
        out = out + (module.root[x_r] if featureless else x_r @ module.root)
    if module.bias is not None:
        out = out + module.bias
    return out


__all__ = ["RGCNConv", "FastRGCNConv", "relational_graph", "relation_weights", "projects_first"]
