"""The front door: one public entry per op, on DGL graphs and blocks.

Each entry checks its arguments (a clear ``ValueError`` before any kernel runs), picks the plan
(GraphACT redundancy plan, execution-path layer plan or the full graph) and calls the DGL-free
core.  ``gspmm`` is the op every DGL message passing reaches once ``dgl_accel.enable()`` is on.

* ``op``: ``copy_u`` (message x[u]) or ``u_mul_e`` (x[u] * w[e]; w of shape [E], [E,1] or [E,F]).
* ``reduce``: ``sum`` or ``mean`` (the grouped aggregation) or ``max``/``min`` (the core's arg-based
  extrema op, ``dgl_accel.core.extrema``: DGL's arg backward, also for ``u_add_e`` and ``copy_e``
  (``ufeat=None``, edge features as ``efeat``); rows without in-edges hold ``fill``, 0 by default as
  ``update_all`` gives, where DGL's raw gspmm leaves -inf/+inf).  On Intel CPUs ``copy_u`` max/min
  over long rows that needs a gradient runs DGL's own kernel (``dgl_accel.policies.extrema``: faster
  there), with the same contract, its reason in ``stats()``.
* ``norm``: GCN normalisation fused into the aggregation, with ``dgl.nn.GraphConv``'s conventions:
  ``left``/``both`` scale each message by out_deg(u)^-1 / ^-1/2, ``right``/``both`` scale each row
  by in_deg(v)^-1 / ^-1/2, degrees clamped to at least 1.  ``mean`` is ``sum`` with 1/in_deg(v).

``gspmm_headwise`` runs sum/mean of ``u_mul_e`` with edge weights broadcast against the node
features (multi-head ``[E, H, 1]`` on ``[N, H, D]``) and of ``copy_e`` (the core's head-wise op).
"""
from __future__ import annotations

from .core.extras import missing_extra

try:
    import dgl  # first, so that without DGL the error names the extra that brings it
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import torch

from .core import backend
from .core.aggregation.checks import check_features, check_options
from .core.aggregation.copy_u_sum_self import check_copy_u_sum_self, copy_u_sum_self_reference
from .core.aggregation.copy_u_sum_self import copy_u_sum_self as core_copy_u_sum_self
from .core.aggregation.function import run_aggregation
from .core.attention.dot import dot_attention as core_dot_attention
from .core.attention.edge_softmax import edge_softmax as core_edge_softmax
from .core.attention.gat import gat_attention as core_gat_attention
from .core.attention.gat import gat_layer as core_gat_layer
from .core.attention.gatv2 import gatv2_attention as core_gatv2_attention
from .core.dense import dense as core_dense
from .core.extrema import aggregate_extrema, check_extrema
from .core.headwise.function import aggregate_headwise
from .core.sddmm.function import gsddmm as core_gsddmm
from .core.vector_scale import scale
from .graph import dgl_kernels
from .graph.views import DGLGraphViews
from .policies.exec_paths.plan import LayerPlan, rows_aggregate, rows_path_applies
from .policies.exec_paths.session import active_session, begin_layer, note_unrouted
from .policies.extrema import dgl_kernel_reason as dgl_extrema_reason
from .policies.redundancy.hook import plan_for as redundancy_plan_for

__all__ = ["gspmm", "copy_u_sum", "copy_u_sum_self", "gspmm_rows", "dense", "scale", "edge_softmax", "gat_attention"]


def _views(graph) -> DGLGraphViews:
    if not isinstance(graph, dgl.DGLGraph):
        raise ValueError(f"expected a dgl.DGLGraph or block (got {type(graph).__name__}).")
    return DGLGraphViews(graph)  # checks a homogeneous graph / one-relation block


def gspmm(graph, op: str, reduce: str, ufeat: torch.Tensor | None, efeat: torch.Tensor | None = None, *,
          norm: str = "none", group_size: int | None = None,
          deterministic: bool | None = None, layer_plan: LayerPlan | None = None, fill: float = 0.0) -> torch.Tensor:
    """Aggregate messages into destination nodes; differentiable in ``ufeat`` and ``efeat``.

    ``ufeat``: [num_src_nodes, *]; ``efeat`` (``u_mul_e`` only): [E], [E, 1] or [E, *ufeat.shape[1:]].
    Returns [num_dst_nodes, *ufeat.shape[1:]].  ``group_size`` forces gs (default: chosen from the
    graph's degree statistics, see ``dgl_accel.explain``).  ``deterministic``: bit-identical
    results across runs on the Triton path (default: ``torch.are_deterministic_algorithms_enabled()``).
    ``layer_plan`` is for layers that registered with ``begin_layer`` themselves.  ``max``/``min``
    take ``op`` ``copy_u``, ``u_mul_e``, ``u_add_e`` or ``copy_e`` and ``fill``, the value of rows
    without in-edges (``group_size``, ``deterministic`` do not apply: the forward is exact and
    deterministic, ties going to the first in-edge in CSR order).

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1])))
    >>> gspmm(g, "copy_u", "sum", torch.tensor([[1.0], [2.0], [4.0]])).flatten().tolist()
    [0.0, 5.0, 2.0]
    >>> gspmm(g, "copy_u", "max", torch.tensor([[1.0], [2.0], [4.0]])).flatten().tolist()
    [0.0, 4.0, 2.0]
    """
    if reduce == "max" or reduce == "min":
        return _extrema(graph, op, reduce, ufeat, efeat, norm, fill)
    check_options(op, reduce, norm, group_size)
    views = _views(graph)
    check_features(op, ufeat, efeat, views.num_src, views.num_edges, views.device)
    if op == "copy_u":
        # GraphACT redundancy reduction: a plan attached to this graph (or auto-built under
        # use_redundancy) and allowed by the mode computes the same sum/mean via its pair nodes.
        # Costs one dict check when no plans are in use.
        rplan = redundancy_plan_for(graph, ufeat)
        if rplan is not None:
            return rplan.aggregate(ufeat, reduce=reduce, norm=norm)
    # Inside dgl_accel.execution_paths(...): this aggregation's place in the training step.  A layer
    # that already registered itself (to restrict its own dense work) passes its plan.
    plan = layer_plan if layer_plan is not None else begin_layer(graph)
    return run_aggregation(views, op, reduce, ufeat, efeat, norm, group_size, deterministic, plan)


def _extrema(graph, op, reduce, ufeat, efeat, norm, fill):
    """max/min on the core's extrema op, over the full graph."""
    if norm != "none":
        raise ValueError(f"expected norm='none' with reduce={reduce!r} (got norm={norm!r}): degree normalisation "
                         f"is defined for sum/mean aggregation. Fix: scale the features before or after.")
    views = _views(graph)
    # it runs every row (no execution-path plan): inside a session it counts as an unrouted layer
    note_unrouted(graph)
    reason = dgl_extrema_reason(op, ufeat, views.num_edges, views.num_dst)
    if reason is None:
        return aggregate_extrema(views, op, reduce, ufeat, efeat, fill=fill)
    check_extrema(views, op, reduce, ufeat, efeat, fill)
    backend.record_fallthrough(f"{op}_{reduce}", reason)
    out = dgl_kernels.extrema(graph, reduce, ufeat)
    empty = views.cached("extrema.empty_rows", lambda: (views.in_degrees() == 0).nonzero().flatten())
    if empty.numel():  # fill, and no gradient from them (DGL's backward sends theirs to node 0)
        out = out.index_fill(0, empty, fill)
    return out


def copy_u_sum(graph, feat: torch.Tensor) -> torch.Tensor:
    """``dgl.ops.copy_u_sum`` on dgl-accel's paths."""
    return gspmm(graph, "copy_u", "sum", feat)


def copy_u_sum_self(graph, feat: torch.Tensor, *, self_scale: float | torch.Tensor = 1.0,
                    divisor: torch.Tensor | None = None,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
    """``(self_scale * feat[v] + copy_u_sum(graph, feat)[v]) / divisor[v] + bias`` for every
    destination ``v`` (a graph, or a block: its destinations are its first sources), in DGL's order
    of operations: ``SAGEConv``'s gcn aggregator (``divisor`` = in-degrees + 1, its bias) and
    ``GINConv``'s sum (``self_scale`` = 1 + eps: a number, or a one-element tensor that may train).
    One fresh output tensor each way on the CPU (the core's
    :func:`~dgl_accel.core.aggregation.copy_u_sum_self.copy_u_sum_self`); inside ``execution_paths``
    or with a redundancy plan, the same composed on :func:`gspmm`.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1])))
    >>> x, deg_plus_one = torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([1.0, 3.0, 2.0])
    >>> copy_u_sum_self(g, x, divisor=deg_plus_one).flatten().tolist()
    [1.0, 2.0, 2.5]
    """
    views = _views(graph)
    if active_session() is not None or redundancy_plan_for(graph, feat) is not None:
        check_copy_u_sum_self(views, feat, divisor, bias, self_scale)  # the core's entry checks the other way
        scale = self_scale if isinstance(self_scale, torch.Tensor) else float(self_scale)
        return copy_u_sum_self_reference(views.num_dst, lambda t: gspmm(graph, "copy_u", "sum", t), feat,
                                         scale, divisor, bias)
    return core_copy_u_sum_self(views, feat, self_scale=self_scale, divisor=divisor, bias=bias)


def gspmm_rows(graph, feat: torch.Tensor, norm: str, plan: LayerPlan, depth: int):
    """Receptive-field aggregation for layers that keep working on the active rows only:
    ``(rows, out)`` with ``out[i]`` = the normalised ``copy_u``/sum aggregation of node ``rows[i]``
    (``rows`` = N^depth), or None where this path does not apply (GPU tensors, half precision,
    feature shapes other than [N, F], a redundancy plan in use): then call :func:`gspmm`."""
    if not rows_path_applies(feat) or redundancy_plan_for(graph, feat) is not None:
        return None
    return rows_aggregate(_views(graph), feat, norm, plan, depth)


def dense(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, relu: bool = False,
          plan: LayerPlan | None = None, offset: int = 0) -> torch.Tensor:
    """``relu?(x @ weight + bias)`` as one op (oneDNN on CPU float32; under ``torch.autocast`` in its
    dtype, as ``nn.Linear``); inside execution paths its backward keeps to the rows the loss can reach
    (see ``dgl_accel.core.dense.DenseFunction``).

    >>> import torch
    >>> dense(torch.ones(2, 3), torch.ones(3, 4), torch.zeros(4)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    return core_dense(x, weight, bias, relu, plan, offset)


def edge_softmax(graph, score: torch.Tensor, norm_by: str = "dst") -> torch.Tensor:
    """Softmax of the edge scores ``score`` [E, *] (edge-id order) over each destination's in-edges
    (``norm_by="dst"``, GAT's) or each source's out-edges (``"src"``); differentiable.  What
    ``dgl.nn.functional.edge_softmax`` computes, on dgl-accel's kernels.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 1, 2])))
    >>> edge_softmax(g, torch.tensor([[0.0], [0.0], [3.0]])).flatten().tolist()
    [0.5, 0.5, 1.0]
    """
    if norm_by not in ("dst", "src"):
        raise ValueError(f"expected norm_by 'dst' or 'src' (got {norm_by!r}). Fix: norm_by='dst' normalises over "
                         "each node's in-edges, as GAT does.")
    return core_edge_softmax(_views(graph).csr("in" if norm_by == "dst" else "out"), score)


def gat_attention(graph, feat: torch.Tensor, el: torch.Tensor | None = None, er: torch.Tensor | None = None,
                  negative_slope: float = 0.2, *, attn=None, return_attention: bool = False, dropout: float = 0.0,
                  seed=None):
    """GAT's attention aggregation in one fused op: ``out[v, h] = sum over in-edges (u -> v) of
    softmax(leaky_relu(el[u, h] + er[v, h])) * feat[u, h]`` with ``feat`` [num_src, H, D], ``el``
    [num_src, H(, 1)], ``er`` [num_dst, H(, 1)].  Returns [num_dst, H, D] (and the attention [E, H]
    with ``return_attention=True``); the backward recomputes the attention instead of storing it.
    ``dropout`` in [0, 1): ``dgl.nn.GATConv``'s ``attn_drop`` while training (the attention is
    dropped after the softmax, kept weights scaled by 1 / (1 - dropout), and returned so), with the
    mask a hash of (edge id, head, ``seed``) for an int ``seed`` in [0, 2^64); with ``seed=None``
    drawn from torch's global generator (on CPU the mask itself, as DGL's ``nn.Dropout`` draws it, so
    a run from ``torch.manual_seed`` gives DGL's numbers).  ``attn=(attn_l,
    attn_r)`` (GATConv's [1, H, D] parameters) instead of ``el``/``er``: the halves are computed
    inside (destinations = the first sources: a homogeneous graph or a block) and their gradient
    added into feat's in place, so backward holds one N x H x D gradient buffer, not two.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([2, 2])))
    >>> feat = torch.tensor([[[1.0]], [[3.0]], [[5.0]]])
    >>> gat_attention(g, feat, torch.zeros(3, 1), torch.zeros(3, 1)).flatten().tolist()
    [0.0, 0.0, 2.0]
    """
    views = _views(graph)
    # an aggregation we run in full: inside an execution-path session it counts as a layer
    note_unrouted(graph)
    return core_gat_attention(views, feat, el, er, negative_slope, attn=attn, return_attention=return_attention,
                              dropout=dropout, seed=seed)


def gsddmm(graph, op: str, lhs, rhs, lhs_target: str = "u", rhs_target: str = "v") -> torch.Tensor:
    """DGL's ``dgl.ops.gsddmm`` on dgl-accel's paths: for every edge (edge-id order)
    ``op(lhs[row], rhs[row])`` with ``row`` its source (target ``u``), destination (``v``) or the
    edge itself (``e``); ``op`` one of add, sub, mul, div, dot, copy_lhs, copy_rhs.  DGL's
    broadcasting (``[N, H, 1]`` with ``[N, H, D]``; ``dot`` sums the last dim into size 1) and
    result shape; differentiable in ``lhs`` and ``rhs``.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])))
    >>> gsddmm(g, "add", torch.tensor([1.0, 2.0, 4.0]), torch.tensor([10.0, 20.0, 40.0])).tolist()
    [21.0, 42.0]
    """
    views = _views(graph)
    # reads both endpoints of every edge: inside an execution-path session it counts as a layer
    note_unrouted(graph)
    return core_gsddmm(views, op, lhs, rhs, lhs_target, rhs_target)


__all__ += ["gsddmm"]


def gspmm_headwise(graph, op: str, reduce: str, ufeat: torch.Tensor | None, efeat: torch.Tensor) -> torch.Tensor:
    """Sum or mean (``reduce``) over each destination's in-edges of ``ufeat[u] * efeat[e]`` with edge
    weights broadcast DGL's way (``op="u_mul_e"``: ``[E, H, 1]`` on ``[N, H, D]``, as GAT-style layers
    aggregate; the node features must not broadcast) or of the edge features ``efeat[e]``
    (``op="copy_e"``, ``ufeat=None``); differentiable.  Rows without in-edges get 0.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([2, 2])))
    >>> x, w = torch.ones(3, 2, 2), torch.tensor([[[1.0], [2.0]], [[3.0], [4.0]]])
    >>> gspmm_headwise(g, "u_mul_e", "sum", x, w)[2].tolist()
    [[4.0, 4.0], [6.0, 6.0]]
    """
    views = _views(graph)
    # an aggregation we run in full: inside an execution-path session it counts as a layer
    note_unrouted(graph)
    return aggregate_headwise(views, op, reduce, ufeat, efeat)


__all__ += ["gspmm_headwise"]


def dot_attention(graph, q: torch.Tensor, k: torch.Tensor, val: torch.Tensor, scale: float | None = None, *,
                  return_attention: bool = False):
    """Dot-product attention aggregation in one fused op (what ``dgl.nn.DotGatConv`` computes):
    ``out[v, h] = sum over in-edges (u -> v) of softmax(scale * <q[v, h], k[u, h]>) * val[u, h]`` with
    ``q`` [num_dst, H, DK], ``k`` [num_src, H, DK], ``val`` [num_src, H, DV], ``scale`` 1 / sqrt(DK) by
    default (DotGatConv's).  Returns [num_dst, H, DV] (and the attention [E, H] in edge-id order with
    ``return_attention=True``); the backward recomputes the attention instead of storing it.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([2, 2])))
    >>> x = torch.tensor([[[1.0]], [[3.0]], [[0.0]]])
    >>> dot_attention(g, x, x, x).flatten().tolist()
    [0.0, 0.0, 2.0]
    """
    views = _views(graph)
    # an aggregation we run in full: inside an execution-path session it counts as a layer
    note_unrouted(graph)
    return core_dot_attention(views, q, k, val, scale, return_attention=return_attention)


def gatv2_attention(graph, fs: torch.Tensor, fd: torch.Tensor, attn: torch.Tensor, negative_slope: float = 0.2, *,
                    return_attention: bool = False):
    """GATv2's attention aggregation in one fused op (what ``dgl.nn.GATv2Conv`` computes):
    ``out[v, h] = sum over in-edges (u -> v) of softmax(s) * fs[u, h]`` with
    ``s = sum_d attn[h, d] leaky_relu(fs[u, h, d] + fd[v, h, d])``, ``fs`` [num_src, H, D], ``fd``
    [num_dst, H, D], ``attn`` [H, D] or [1, H, D].  Returns
    [num_dst, H, D] (and the attention [E, H] in edge-id order with ``return_attention=True``); the
    backward recomputes the scores and the attention instead of storing them.

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([2, 2])))
    >>> fs = torch.tensor([[[1.0]], [[3.0]], [[5.0]]])
    >>> gatv2_attention(g, fs, torch.zeros(3, 1, 1), torch.zeros(1, 1, 1)).flatten().tolist()
    [0.0, 0.0, 2.0]
    """
    views = _views(graph)
    # an aggregation we run in full: inside an execution-path session it counts as a layer
    note_unrouted(graph)
    return core_gatv2_attention(views, fs, fd, attn, negative_slope, return_attention=return_attention)


__all__ += ["dot_attention", "gatv2_attention"]


def gat_layer(graph, x: torch.Tensor, weight: torch.Tensor, attn_l: torch.Tensor, attn_r: torch.Tensor,
              bias: torch.Tensor | None = None, negative_slope: float = 0.2, dropout: float = 0.0, seed=None, *,
              return_attention: bool = False):
    """``dgl.nn.GATConv``'s projection (``fc.weight`` [H * D, F]), attention and bias as one op on a
    homogeneous graph or a block: returns [num_dst, H, D] (and the attention [E, H] with
    ``return_attention=True``).  The projection h = x @ weight.T stays inside the op, so its
    backward can write the gradient into h's memory (the compiled CPU path does).

    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([2, 2])))
    >>> x = torch.tensor([[1.0], [3.0], [5.0]])
    >>> gat_layer(g, x, torch.ones(1, 1), torch.zeros(1, 1), torch.zeros(1, 1)).flatten().tolist()
    [0.0, 0.0, 2.0]
    """
    views = _views(graph)
    note_unrouted(graph)  # an aggregation we run in full: inside an execution-path session it counts as a layer
    return core_gat_layer(views, x, weight, attn_l, attn_r, bias, negative_slope, dropout, seed,
                          return_attention=return_attention)


__all__ += ["gat_layer"]
