"""``dgl.ops.gsddmm`` (what ``g.apply_edges(fn.u_add_v(...))``, every ``dgl.ops.u_dot_v``-style
function, ``dgl.ops.copy_u``/``copy_v`` and so GATConv, GATv2Conv, DotGatConv, EdgeConv ... reach)
routed to :func:`dgl_accel.functional.gsddmm`.

DGL's built-in message functions reach ``dgl.ops.<name>`` (``dgl.core.invoke_gsddmm``), and those
generated functions call the module-level name ``gsddmm`` of ``dgl.ops.sddmm``; ``dgl.mpops`` calls
``dgl.ops.gsddmm``.  Routing replaces every module-level ``gsddmm`` in ``dgl`` that is DGL's
original, and ``apply(False)`` puts the original back wherever the routed one stands.  What DGL
would reject (unknown ops or targets, mixed dtypes, shapes that do not broadcast, wrong row counts,
devices) and what we do not run (heterographs, non-float data, autocast) goes to DGL unchanged, so
DGL computes it or raises its own error; the reason is counted in ``dgl_accel.stats()``.

The message step of DGL's two-step message passing (a built-in message with a UDF reducer, or one
with no fused op) stays DGL's, uncounted: ``dgl_accel.patching`` marks it
(:func:`.names.dgl_message_passing`) and counts that message passing once, as a whole.
"""
from __future__ import annotations

import dgl.ops
import dgl.ops.sddmm
import torch

from ..core import backend
from ..core.sddmm.checks import FLOAT_DTYPES, OPS, TARGETS, check_gsddmm, uses
from ..functional import gsddmm
from ..graph.structure import is_supported_graph
from ..graph.views import DGLGraphViews
from ..policies.exec_paths.session import note_unrouted
from .names import ModuleNames, in_dgl_message_passing

ORIGINAL_GSDDMM = dgl.ops.sddmm.gsddmm  # captured at import, before any routing

__all__ = ["ORIGINAL_GSDDMM", "routed_gsddmm", "apply", "fallthrough_reason"]


def fallthrough_reason(g, op, lhs, rhs, lhs_target, rhs_target) -> str | None:
    """Why this call goes to DGL's gsddmm unchanged, or None if dgl-accel runs it."""
    if op not in OPS:
        return f"op {op}"
    if lhs_target not in TARGETS or rhs_target not in TARGETS:
        return "target"
    if not isinstance(g, dgl.DGLGraph) or not is_supported_graph(g, relation=True):
        return "heterograph"
    used = [t for t, use in zip((lhs, rhs), uses(op)) if use]
    if not all(isinstance(t, torch.Tensor) for t in used):
        return "operand type (a list per type)"
    if any(t.dtype not in FLOAT_DTYPES for t in used):
        return "dtype"
    if len({t.dtype for t in used}) > 1:
        return "mixed dtypes"
    if any(t.device != g.device for t in used):
        return "devices differ"
    if torch.is_autocast_enabled():
        return "autocast (DGL casts the operands)"
    try:
        check_gsddmm(DGLGraphViews(g), op, lhs, rhs, lhs_target, rhs_target)
    except ValueError:
        return "shape DGL judges"
    return None


def routed_gsddmm(g, op, lhs_data, rhs_data, lhs_target="u", rhs_target="v"):
    """Drop-in for ``dgl.ops.gsddmm(g, op, lhs_data, rhs_data, lhs_target='u', rhs_target='v')``."""
    if in_dgl_message_passing():  # counted by the routed message passing, which DGL runs as a whole
        return ORIGINAL_GSDDMM(g, op, lhs_data, rhs_data, lhs_target=lhs_target, rhs_target=rhs_target)
    reason = fallthrough_reason(g, op, lhs_data, rhs_data, lhs_target, rhs_target)
    if reason is not None:
        backend.record_fallthrough(f"gsddmm_{op}", reason)
        note_unrouted(g)  # DGL runs it; inside an execution-path session it counts all the same
        return ORIGINAL_GSDDMM(g, op, lhs_data, rhs_data, lhs_target=lhs_target, rhs_target=rhs_target)
    return gsddmm(g, op, lhs_data, rhs_data, lhs_target, rhs_target)  # counts itself for sessions


NAMES = ModuleNames("gsddmm", ORIGINAL_GSDDMM, routed_gsddmm)


def apply(active: bool) -> None:
    """Point every ``dgl`` module-level ``gsddmm`` at ours (``active``) or back at DGL's."""
    NAMES.apply(active)
