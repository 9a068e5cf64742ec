"""Route DGL's generalized SpMM to dgl-accel: ``enable()``, ``disable()``, ``with enabled():``.

Every built-in message passing in DGL (``g.update_all(fn.copy_u, fn.sum)``, ``dgl.ops.copy_u_sum``,
``dgl.ops.gspmm``, and so every ``dgl.nn`` module built on them) reaches one Python function,
``dgl.ops.spmm.gspmm``.  While enabled, that name (and its re-export ``dgl.ops.gspmm``) points to
:func:`routed_gspmm`, which runs :func:`dgl_accel.functional.gspmm` for what we support and calls the
original, unchanged, for everything else, counting the reason in ``dgl_accel.stats()``.  What DGL
rejects is rejected first, with DGL's exception type (:mod:`dgl_accel.dgl_rules`), and every result
has DGL's shape, so code written under ``enable()`` keeps working without it.  The message passing
DGL runs itself (UDF message or reduce functions: ``dgl.core.message_passing`` is patched too) is
counted there as well, and every aggregation DGL runs is reported to the execution-path session.
Patching is reversible and idempotent; ``disable()`` puts back the exact original objects.

:func:`execution_paths` lives here too: it opens an execution-path session (a policy) and switches
DGL's message passing over for the block, so that unmodified ``dgl.nn`` layers take part.
"""
from __future__ import annotations

from .core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import contextlib
import math
import threading

import dgl.core
import dgl.ops
import dgl.ops.spmm
import torch

from .core import backend
from .core.aggregation.checks import FLOAT_DTYPES
from .core.headwise.shapes import head_split
from .dgl_rules import gspmm_out_shape
from .functional import gspmm, gspmm_headwise
from .graph.dgl_kernels import ORIGINAL_GSPMM  # captured before any patching
from .graph.structure import is_supported_graph, record_relation_views
from .policies.exec_paths.session import note_unrouted, open_session
from .routes import edge_softmax as routed_edge_softmax
from .routes import gsddmm as routed_gsddmm
from .routes.names import dgl_message_passing, in_dgl_message_passing

_TARGETS = ((dgl.ops.spmm, "gspmm"), (dgl.ops, "gspmm"))
ORIGINAL_MESSAGE_PASSING = dgl.core.message_passing  # dgl_accel is imported before any enable()
_OPS = {"copy_lhs": "copy_u", "mul": "u_mul_e", "div": "u_mul_e"}  # DGL op -> ours (div: 1/w)
# sum/mean: copy_rhs and broadcast edge weights run on the core's head-wise op
_SUM_OPS = {**_OPS, "copy_rhs": "copy_e"}
# max/min: the core's extrema op also takes DGL's add (sub: add -w, DGL's rewrite) and copy_rhs
_EXTREMA_OPS = {**_OPS, "add": "u_add_e", "sub": "u_add_e", "copy_rhs": "copy_e"}
_NAMES = {"copy_lhs": "copy_u", "copy_rhs": "copy_e", "mul": "u_mul_e", "div": "u_div_e",
          "add": "u_add_e", "sub": "u_sub_e"}  # DGL op -> the dgl.ops name users know

_lock = threading.RLock()
ROUTES = ("gspmm", "edge_softmax", "gsddmm")  # what enabled(routes=...) can switch on alone
_depth = dict.fromkeys(ROUTES, 0)  # per route, the nesting of enabled() blocks that route it
_persistent = False  # enable() without a block


def _dgl_decides(g, op, lhs, rhs):
    """Why DGL alone can judge this call (it runs unchanged, errors included), or None."""
    if not is_supported_graph(g, relation=True):  # one relation graph hg[etype] is fine: it is a block
        return "heterograph"
    used = [t for t, use in ((lhs, op != "copy_rhs"), (rhs, op != "copy_lhs")) if use]
    if not all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in used):
        return "lhs dtype" if op != "copy_rhs" and not isinstance(lhs, torch.Tensor) else "rhs dtype"
    if op == "sub" and rhs.dtype == torch.bool:
        return "rhs dtype"  # DGL negates it first, and torch raises its own error
    if any(t.device != g.device for t in used):
        return "devices differ"  # DGL's device rules (pinned graphs, UVA) are its own
    if torch.is_autocast_enabled() and len({t.dtype for t in used}) > 1:
        return "autocast casts mixed dtypes"
    return None


def _unsupported(op, reduce_op, lhs, rhs):
    """Why this call, valid for DGL, must go to DGL unchanged, or None if dgl-accel runs it."""
    extrema = reduce_op in ("max", "min")
    if op not in (_EXTREMA_OPS if extrema else _SUM_OPS):
        return f"op {op}"
    if reduce_op not in ("sum", "mean") and not extrema:
        return f"reduce {reduce_op}"
    if op != "copy_rhs" and lhs.dtype not in FLOAT_DTYPES:
        return "lhs dtype"
    if op != "copy_lhs":
        if rhs.dtype not in FLOAT_DTYPES:
            return "rhs dtype"
        if op != "copy_rhs" and _broadcasts(lhs, rhs) and (extrema or _head_split(lhs, rhs) is None):
            return "broadcast shape"  # max/min of broadcast weights, or node features that broadcast
    return None


def _broadcasts(lhs, rhs) -> bool:
    """Whether the edge weights are neither one per edge nor one per feature (DGL broadcasts them)."""
    return math.prod(rhs.shape[1:]) != 1 and tuple(rhs.shape[1:]) != tuple(lhs.shape[1:])


def _head_split(lhs, rhs):
    """The core's head-wise split of the operands after DGL's padding (a 1-D operand is a feature of
    size 1), or None where the node features would broadcast."""
    return head_split(tuple(lhs.shape[1:]) if lhs.dim() > 1 else (1,), tuple(rhs.shape[1:]) if rhs.dim() > 1 else (1,))


def routed_gspmm(g, op, reduce_op, lhs_data, rhs_data):
    """Drop-in for ``dgl.ops.spmm.gspmm(g, op, reduce_op, lhs_data, rhs_data)``: DGL's rules
    (``dgl_rules``: same exception type, same result shape), dgl-accel's kernels where supported.
    sum/mean of ``u_mul_e``/``u_div_e`` with edge weights that broadcast against node features
    which keep their shape (multi-head ``[E, H, 1]`` on ``[N, H, D]``) and of ``copy_e`` run the
    core's head-wise op (``functional.gspmm_headwise``); where the node features would broadcast,
    and for max/min of broadcast weights, DGL runs ("broadcast shape").  max/min give DGL's values,
    -inf/+inf in rows without in-edges included (``update_all`` then zeroes them); the backward
    passes no gradient from those rows, where DGL's sends it to node or edge 0, its default arg."""
    if in_dgl_message_passing():  # the reduce step of a message passing counted as a whole
        return ORIGINAL_GSPMM(g, op, reduce_op, lhs_data, rhs_data)
    reason = _dgl_decides(g, op, lhs_data, rhs_data)
    if reason is None:
        out_shape = gspmm_out_shape(g, op, lhs_data, rhs_data)  # raises where DGL raises
        reason = _unsupported(op, reduce_op, lhs_data, rhs_data)
    if reason is not None:
        backend.record_fallthrough(f"{_NAMES.get(op, op)}_{reduce_op}", reason)
        note_unrouted(g)
        return ORIGINAL_GSPMM(g, op, reduce_op, lhs_data, rhs_data)
    if op == "copy_rhs" and reduce_op in ("sum", "mean"):
        return gspmm_headwise(g, "copy_e", reduce_op, None, rhs_data).reshape(out_shape)
    efeat = None
    if op != "copy_lhs":
        per_feature = op == "copy_rhs" or math.prod(rhs_data.shape[1:]) != 1
        efeat = rhs_data if per_feature else rhs_data.reshape(rhs_data.shape[0])  # [E, 1, 1]: one weight
        if op == "div":
            efeat = 1.0 / efeat  # DGL's own rewrites of div and sub (backend/pytorch/sparse.py)
        elif op == "sub":
            efeat = -efeat
    if reduce_op in ("max", "min"):
        # DGL's gspmm leaves -inf (max) / +inf (min) in rows without in-edges, 0 where no edge exists
        fill = 0.0 if g.num_edges() == 0 else float("-inf") if reduce_op == "max" else float("inf")
        lhs = None if op == "copy_rhs" else lhs_data
        return gspmm(g, _EXTREMA_OPS[op], reduce_op, lhs, efeat, fill=fill).reshape(out_shape)
    if op != "copy_lhs" and _broadcasts(lhs_data, rhs_data):  # [E, H, 1] weights on [N, H, D] features
        return gspmm_headwise(g, "u_mul_e", reduce_op, lhs_data, efeat).reshape(out_shape)
    return gspmm(g, _OPS[op], reduce_op, lhs_data, efeat).reshape(out_shape)


def _func_name(func) -> str:
    return func.name if dgl.core.is_builtin(func) else "udf"


def routed_message_passing(g, mfunc, rfunc, afunc):
    """Drop-in for ``dgl.core.message_passing`` (every ``update_all``/``send_and_recv``/``pull``/
    ``push``): a fused built-in pair reaches :func:`routed_gspmm`; any other (a UDF message or
    reduce function, a message with no fused op) is DGL's own two-step message passing, counted
    once here in ``stats()`` and reported to the execution-path session."""
    if not dgl.core.is_builtin(rfunc):
        reason = "udf reduce"
    elif not dgl.core.is_builtin(mfunc):
        reason = "udf message"
    elif getattr(dgl.ops, f"{mfunc.name}_{rfunc.name}", None) is None:
        reason = f"message {mfunc.name} has no fused op"
    else:
        return ORIGINAL_MESSAGE_PASSING(g, mfunc, rfunc, afunc)
    backend.record_fallthrough(f"{_func_name(mfunc)}_{_func_name(rfunc)}", reason)
    note_unrouted(g)
    with dgl_message_passing():
        return ORIGINAL_MESSAGE_PASSING(g, mfunc, rfunc, afunc)


def _apply_gspmm(active: bool) -> None:
    target = routed_gspmm if active else ORIGINAL_GSPMM
    for module, name in _TARGETS:
        setattr(module, name, target)
    dgl.core.message_passing = routed_message_passing if active else ORIGINAL_MESSAGE_PASSING
    record_relation_views(active)  # per-graph caches survive update_all's per-call g[etype]


_SWITCH = {"gspmm": _apply_gspmm, "edge_softmax": routed_edge_softmax.apply, "gsddmm": routed_gsddmm.apply}


def _apply(active: bool, routes=ROUTES) -> None:
    for route in routes:
        _SWITCH[route](active)


def is_enabled() -> bool:
    return dgl.ops.spmm.gspmm is routed_gspmm


def enable() -> None:
    """Route DGL's gspmm through dgl-accel until :func:`disable` (idempotent)."""
    global _persistent
    with _lock:
        _persistent = True
        _apply(True)


def disable() -> None:
    """Restore DGL's original gspmm objects (idempotent); open ``enabled()`` blocks end early."""
    global _persistent
    with _lock:
        _persistent = False
        _depth.update(dict.fromkeys(ROUTES, 0))
        _apply(False)


@contextlib.contextmanager
def enabled(routes=None):
    """``with dgl_accel.enabled(): ...`` routes DGL's gspmm (message passing), edge_softmax and gsddmm
    (apply_edges) inside the block only (nestable); ``routes=("edge_softmax",)`` routes only those
    named (:data:`ROUTES`), leaving the others as they were; None routes every one."""
    routes = ROUTES if routes is None else (routes,) if isinstance(routes, str) else tuple(routes)
    unknown = [r for r in routes if r not in ROUTES]
    if unknown:
        raise ValueError(f"enabled(routes=...): expected names from {ROUTES} (got {unknown}). "
                         "Fix: leave routes out to route every op.")
    with _lock:
        for route in routes:
            _depth[route] += 1
        _apply(True, routes)
    try:
        yield
    finally:
        with _lock:
            for route in routes:
                _depth[route] = max(0, _depth[route] - 1)
            if not _persistent:
                _apply(False, [r for r in routes if _depth[r] == 0])


@contextlib.contextmanager
def execution_paths(graph, train_idx, *, restrict_forward: bool = False, num_layers: int | None = None,
                    model: torch.nn.Module | None = None, strict: bool = False):
    """Run aggregations over ``graph`` on their execution paths inside the block (full-graph
    training on a fixed training set; see ``dgl_accel.policies.exec_paths`` for the method).

        with dgl_accel.execution_paths(g, train_idx):
            loss = F.cross_entropy(model(g, x)[train_idx], y[train_idx])
            loss.backward()

    ``restrict_forward=True`` also computes each aggregation's output only on the rows the loss can
    reach (``num_layers=`` or learned from the first step); ``model=`` rejects row-mixing layers
    up front.  DGL's own message passing is routed through dgl-accel for the block
    (``dgl_accel.enabled()``), so unmodified ``dgl.nn`` layers take part too; aggregations DGL runs
    itself (unsupported ops, UDF reducers) are counted, so the others keep their depths.

    Gradients equal plain DGL training for any loss: a backward step keeps to its frontier only
    where its incoming gradient is 0 outside it, and runs in full otherwise (one warning); with
    ``strict=True`` that raises instead, and with ``restrict_forward=True`` it always raises (the
    forward computed those rows as 0).  That check reads the autograd graph first: a loss that
    reaches the output only through ``out[train_idx]`` (or another selection of training rows,
    after row-wise ops) is proved 0 outside them without reading the gradient; any other loss, or a
    ``Tensor.register_hook`` on the way, has its gradient rows read.  Not seen: a hook put on an
    autograd node directly (``out.grad_fn.register_prehook``) that writes other rows.
    """
    with open_session(graph, train_idx, restrict_forward=restrict_forward, num_layers=num_layers,
                      model=model, strict=strict) as session:
        with enabled():
            yield session
