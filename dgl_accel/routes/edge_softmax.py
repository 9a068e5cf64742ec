"""``dgl.ops.edge_softmax`` (what ``dgl.nn.functional.edge_softmax``, GATConv, GATv2Conv,
DotGatConv, AGNNConv, EGATConv, HGTConv ... call) routed to :func:`dgl_accel.functional.edge_softmax`.

DGL's modules import the function by name (``from ...functional import edge_softmax``), so routing
replaces every module-level name in ``dgl`` that is DGL's original function, and ``apply(False)``
puts the original back wherever the routed one stands (:class:`.names.ModuleNames`).  DGL's rules
kept: ``norm_by`` other than ``"src"`` means ``"dst"``; what DGL would reject (wrong edge count,
devices, non-float logits) goes to DGL, which raises its own error.
"""
from __future__ import annotations

import dgl.ops
import torch

from ..core import backend
from ..core.aggregation.checks import FLOAT_DTYPES
from ..functional import edge_softmax
from ..graph.structure import is_supported_graph
from ..policies.exec_paths.session import note_unrouted
from .names import ModuleNames

ORIGINAL_EDGE_SOFTMAX = dgl.ops.edge_softmax  # captured at import, before any routing

__all__ = ["ORIGINAL_EDGE_SOFTMAX", "routed_edge_softmax", "apply", "fallthrough_reason"]


def fallthrough_reason(graph, logits, eids, norm_by) -> str | None:
    """Why this call goes to DGL's edge_softmax unchanged, or None if dgl-accel runs it."""
    if not isinstance(logits, torch.Tensor):
        return "heterograph logits (a dict per edge type)"
    if not (isinstance(eids, str) and eids == dgl.base.ALL):
        return "eids subset"
    if not isinstance(graph, dgl.DGLGraph) or not is_supported_graph(graph, relation=True):
        return "heterograph"
    if logits.dtype not in FLOAT_DTYPES:
        return "logits dtype"
    if logits.dim() < 1 or logits.shape[0] != graph.num_edges() or logits.device != graph.device:
        return "shape or device DGL rejects"
    if torch.is_autocast_enabled():
        return "autocast (DGL casts the logits)"
    return None


def routed_edge_softmax(graph, logits, eids=dgl.base.ALL, norm_by="dst"):
    """Drop-in for ``dgl.ops.edge_softmax(graph, logits, eids=ALL, norm_by='dst')``."""
    reason = fallthrough_reason(graph, logits, eids, norm_by)
    if reason is not None:
        backend.record_fallthrough("edge_softmax", reason)
        note_unrouted(graph)  # DGL runs it; inside an execution-path session it counts as ours does
        return ORIGINAL_EDGE_SOFTMAX(graph, logits, eids=eids, norm_by=norm_by)
    # inside an execution-path session: counted like an aggregation DGL runs (its step runs in full;
    # an extra count only widens the frontiers of the layers before it, which is safe)
    note_unrouted(graph)
    return edge_softmax(graph, logits, norm_by="src" if norm_by == "src" else "dst")


NAMES = ModuleNames("edge_softmax", ORIGINAL_EDGE_SOFTMAX, routed_edge_softmax)


def apply(active: bool) -> None:
    """Point every ``dgl`` module-level ``edge_softmax`` at ours (``active``) or back at DGL's."""
    NAMES.apply(active)
