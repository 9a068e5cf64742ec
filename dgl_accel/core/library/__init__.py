"""The core's graph ops as torch custom ops (``torch.library.custom_op``, torch >= 2.4), so that
``torch.compile`` traces a model that calls them whole: no graph break, ``fullgraph=True`` works.

A :class:`TracedGraph` stands where the core ops take their views (``aggregate(views, ...)``):
the graph as tensors, ``edge_index`` [2, E] (row 0 the sources, row 1 the destinations), the node
counts and a ``kind`` naming how to turn them into views.  The core entries
(:func:`~.aggregation.function.aggregate`, :func:`~.extrema.aggregate_extrema`,
:func:`~.aggregation.copy_u_sum_self.copy_u_sum_self`, :func:`~.attention.gat.gat_layer`,
:func:`~.attention.gat.gat_attention`, :func:`~.attention.gatv2.gatv2_attention`,
:func:`~.attention.dot.dot_attention`) hand a call on
such a graph to its method here, which calls the custom op ``torch.ops.dgl_accel.<name>``.  The
op's real implementation is the eager core op on the views :func:`resolve` gives (where the real
tensors are: a front door's caches keyed on the graph's storage serve it, and its id checks run
there); its fake gives the output's shape and dtype.  Eager calls never come here.

``kind`` is ``"edges"`` (views built from ``edge_index`` on every call, no cache) or a name a
front door registered with :func:`register_graph_kind` (``"pyg"``: the PyG adapter's cached
views), optionally ``"<name>:<detail>"`` for a graph the front door derives from ``edge_index``
and keeps with it (PyG's GAT self-loops, GCN's normalised edges).  A derived graph may carry its
own edge weights (GCN's); a :class:`TracedGraph` with ``weighted=True`` multiplies every message
by them.

Ops (``torch.ops.dgl_accel.*``) and their gradients (``register_autograd``, built from the ops):

* ``aggregate`` (copy_u / u_mul_e, sum / mean, ``transposed``, ``keep_acc``): the input gradient
  is the same op on the transposed graph, the edge-weight gradient ``aggregate_edge_grad`` (the
  eager op's SDDMM);
* ``aggregate_extrema`` (copy_u max / min) returns the argument positions as a second output and
  ``aggregate_extrema_backward`` scatters the gradient there (the eager backward);
* ``copy_u_sum_self`` (GIN's fused sum with a number or one-element tensor scale): the gradient
  through the transposed sum;
* ``attention`` (``gat_layer``, ``gat_attention``, ``gatv2_attention``, ``dot_attention``) returns the output and
  lse[v, h]; ``attention_backward`` runs the eager Function's backward on the saved inputs and
  lse (:class:`~.graphs.Ctx` stands in for its ctx), so nothing of size E x H x D is kept between the
  passes, as in the eager ops;
* ``add_relu_sum`` (and ``add_relu_sum_projected``), ``gsddmm``, ``aggregate_extrema_edges``
  (max/min of u_add_e, u_mul_e, copy_e) and ``in_degrees``: :mod:`.edges` (GINEConv's and
  EdgeConv's ops; the entries :func:`~.add_relu_sum.add_relu_sum` and
  :func:`~.sddmm.function.gsddmm` hand theirs over too).

GAT's attention dropout (``gat_layer``, ``gat_attention``) rides along: the op takes the probability
and a seed tensor drawn in the graph (``torch.randint``: no graph break), and its forward and
backward hash one mask from it (:mod:`~.attention.dropout`).

Not taken here (the PyG drop-ins keep their compile boundary for them): ``return_attention``,
max/min on a derived graph's own weights, a double backward through the attention and the edge ops.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .. import backend
from ..aggregation.copy_u_sum_self import composed_dtype, copy_u_sum_self
from ..aggregation.function import make_aggregation, run_aggregation
from ..aggregation.plan import TRANSPOSED
from ..aggregation.scales import acc_dtype
from ..attention import gat_paths
from ..attention.dot import DOT
from ..attention.dropout import make_dropout
from ..attention.gat import GAT, GATLayerFunction
from ..attention.gatv2 import GATV2
from ..attention.variant import VariantAttentionFunction
from ..extrema import aggregate_extrema, extrema_backward, extrema_backward_compiled
from ..jit import runtime as jit_runtime
from ..sampling.checks import check_seed
from . import edges
from .graphs import AVAILABLE, GRAPH, Ctx, fresh, register_graph_kind, resolve

__all__ = ["AVAILABLE", "TracedGraph", "register_graph_kind", "resolve"]

class TracedGraph:
    """A graph as the custom ops take it, standing in for the core's views in a traced call.
    ``num_edges`` is ``edge_index``'s column count, None for a derived graph (``kind`` with a
    detail), whose edges are the front door's own."""

    traced = True
    sparse = False

    def __init__(self, edge_index: torch.Tensor, num_src: int, num_dst: int, homogeneous: bool,
                 kind: str = "edges", weighted: bool = False):
        self.edge_index, self.num_src, self.num_dst = edge_index, num_src, num_dst
        self.homogeneous, self.kind, self.weighted = homogeneous, kind, weighted
        self.device = edge_index.device
        self.num_edges = None if ":" in kind else edge_index.shape[1]

    def derived(self, detail: str, weighted: bool = False) -> TracedGraph:
        """The graph the front door derives from this one under ``detail``."""
        name = self.kind.partition(":")[0]
        return TracedGraph(self.edge_index, self.num_src, self.num_dst, self.homogeneous, f"{name}:{detail}",
                           weighted)

    def args(self) -> tuple:
        return self.edge_index, self.num_src, self.num_dst, self.homogeneous, self.kind

    def aggregate(self, op: str, reduce: str, ufeat, efeat=None, keep_acc: bool = False) -> torch.Tensor:
        if self.weighted:  # the derived graph's own weights on every message
            op, efeat = "u_mul_e", None
        return torch.ops.dgl_accel.aggregate(*self.args(), op, reduce, False, keep_acc, ufeat, efeat)

    def aggregate_extrema(self, op: str, reduce: str, ufeat, efeat=None, fill: float = 0.0, return_arg=False):
        if self.weighted:
            raise ValueError("expected a graph without its own edge weights for max/min under torch.compile. "
                             "Fix: run this call eagerly (torch.compiler.disable).")
        want_arg = return_arg or (torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (ufeat, efeat)))
        if op == "copy_u" and efeat is None:
            out, arg = torch.ops.dgl_accel.aggregate_extrema(*self.args(), reduce, float(fill), want_arg, ufeat)
        else:  # edge features (.edges)
            out, arg = torch.ops.dgl_accel.aggregate_extrema_edges(*self.args(), op, reduce, float(fill), want_arg,
                                                                   ufeat, efeat)
        return (out, arg) if return_arg else out

    def add_relu_sum(self, x, w, weight=None, bias=None) -> torch.Tensor:
        if weight is not None:  # inference: the op projects w (per edge inside the pass where it can)
            return torch.ops.dgl_accel.add_relu_sum_projected(*self.args(), x, w, weight, bias)
        return torch.ops.dgl_accel.add_relu_sum(*self.args(), x, w)

    def gsddmm(self, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> torch.Tensor:
        if self.num_edges is None:
            raise ValueError("expected a graph whose edges are edge_index's for gsddmm under torch.compile.")
        return torch.ops.dgl_accel.gsddmm(*self.args(), op, lhs, rhs, lhs_target, rhs_target)

    def in_degrees(self) -> torch.Tensor:
        return torch.ops.dgl_accel.in_degrees(*self.args())

    def cached(self, name: str, build: Callable):
        """``build()``: no cache while tracing (the ops' real views keep theirs)."""
        return build()

    def copy_u_sum_self(self, x, self_scale=1.0, divisor=None, bias=None) -> torch.Tensor:
        if divisor is not None or bias is not None or self.weighted:
            raise ValueError("expected no divisor and no bias for copy_u_sum_self under torch.compile. "
                             "Fix: compose aggregate and torch ops.")
        tensor = isinstance(self_scale, torch.Tensor)
        return torch.ops.dgl_accel.copy_u_sum_self(*self.args(), x, self_scale if tensor else None,
                                                   0.0 if tensor else float(self_scale))

    def attention(self, name: str, slope: float, *inputs, dropout: float = 0.0, seed=None) -> torch.Tensor:
        """``name``'s output; GAT's attention ``dropout`` hashed from ``seed`` (an int or a one-element
        integer tensor), drawn in the graph from torch's generator where None (a tensor: no graph break)."""
        seed_t = None
        if dropout and seed is None:
            seed_t = torch.randint(2**62, (1,))
        elif dropout:
            if not isinstance(seed, torch.Tensor) and check_seed(seed) >= 2**63:
                raise ValueError(f"expected a seed below 2^63 under torch.compile (got {seed}). Fix: seed % 2**63.")
            seed_t = torch.as_tensor(seed, dtype=torch.int64).view(1)
        tensors = list(inputs[:-1]) if inputs and inputs[-1] is None else list(inputs)  # gat_layer's bias
        return torch.ops.dgl_accel.attention(*self.args(), name, float(slope), float(dropout), seed_t, tensors)[0]


# ------------------------------------------------------------------------------------ the real ops
def _aggregate(edge_index, num_src, num_dst, homogeneous, kind, op, reduce, transposed, keep_acc, x, w):
    views, weight = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    if w is None and op == "u_mul_e":
        w = weight
    return run_aggregation(views, op, reduce, x, w, "none", None, None, TRANSPOSED if transposed else None,
                           keep_acc).contiguous()


def _edge_grad(edge_index, num_src, num_dst, homogeneous, kind, reduce, transposed, x, grad, w):
    views, _ = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    agg, x2, w2, _ = make_aggregation(views, "u_mul_e", reduce, x, w, "none", None, None)
    g = grad.reshape(grad.shape[0], x2.shape[1])
    src_side, dst_side = (g, x2) if transposed else (x2, g)
    grad_w = agg.edge_grad(views, src_side, dst_side, w2.shape[1] > 1, w.dtype).reshape(w.shape)
    return grad_w.to(w.dtype).contiguous()


def _extrema(edge_index, num_src, num_dst, homogeneous, kind, reduce, fill, want_arg, x):
    views, _ = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    if not want_arg:
        with torch.no_grad():
            out = aggregate_extrema(views, "copy_u", reduce, x, fill=fill)
        return out.contiguous(), torch.empty((0,) + tuple(x.shape[1:]), dtype=torch.int64, device=x.device)
    out, arg = aggregate_extrema(views, "copy_u", reduce, x, fill=fill, return_arg=True)
    return out.contiguous(), arg.contiguous()


def _extrema_backward(edge_index, num_src, num_dst, homogeneous, kind, arg, grad, x):
    views, _ = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    rows = views.csr("in")
    width = math.prod(x.shape[1:])
    shape = (x.shape[0], width)
    g, a = grad.reshape(rows.num_rows, width), arg.reshape(rows.num_rows, width)
    compiled = grad.device.type == "cpu" and jit_runtime.worth(rows.num_edges)
    run = extrema_backward_compiled if compiled else extrema_backward
    grad_x, _ = run(rows, "copy_u", a, None, None, g, shape, None, True, False)
    return grad_x.to(x.dtype).reshape(x.shape).contiguous()


def _copy_u_sum_self(edge_index, num_src, num_dst, homogeneous, kind, x, scale, scale_value):
    views, _ = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    return copy_u_sum_self(views, x, self_scale=scale_value if scale is None else scale).contiguous()


def _attention_call(views, name: str, slope: float, dropout: float, seed, inputs):
    """(the eager Function, its leading arguments, its tensor inputs) of an attention op; GAT's
    ``dropout`` a mask hashed from ``seed`` (the same in the forward and the backward op)."""
    x = inputs[0]
    path = backend.choose_path(x)
    if name == "gat_layer":
        drop = make_dropout(dropout, seed, inputs[2].shape[-2])
        return GATLayerFunction, (views, path, (float(slope), drop), False), list(inputs) + [None] * (5 - len(inputs))
    if name == "gat_attention":
        drop = make_dropout(dropout, seed, x.shape[1])
        return VariantAttentionFunction, (GAT, views, path, (float(slope), drop), False), list(inputs)
    if dropout:
        raise ValueError(f"expected no attention dropout for {name} (got {dropout}). Fix: dropout=0.0.")
    if name == "gatv2_attention":
        fs, fd, attn = inputs
        return VariantAttentionFunction, (GATV2, views, path, float(slope), False), [fs, fd, attn.reshape(fs.shape[1:])]
    if name == "dot_attention":  # slope: the scale of the dot products
        return VariantAttentionFunction, (DOT, views, path, float(slope), False), list(inputs)
    raise ValueError(f"expected an attention op {', '.join(ATTENTION)} (got {name!r}).")


ATTENTION = ("gat_layer", "gat_attention", "gatv2_attention", "dot_attention")


def _attention(edge_index, num_src, num_dst, homogeneous, kind, name, slope, dropout, seed, inputs):
    """(out, lse [num_dst, H]): the eager Function's forward."""
    views, _ = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    function, lead, tensors = _attention_call(views, name, slope, dropout, seed, inputs)
    backend.record(GAT.name if name == "gat_layer" else lead[0].name, lead[-3], inputs[0].device)
    ctx = Ctx()
    with torch.no_grad():
        out = function.forward(ctx, *lead, *tensors)
    return out.contiguous(), ctx.saved_tensors[6 if name == "gat_layer" else 3].contiguous()


def _attention_backward(edge_index, num_src, num_dst, homogeneous, kind, name, slope, dropout, seed, inputs, needs,
                        lse, grad):
    """One gradient per input with ``needs``: the eager Function's backward on the saved inputs and lse."""
    views, _ = resolve(edge_index, num_src, num_dst, homogeneous, kind)
    function, lead, tensors = _attention_call(views, name, slope, dropout, seed, inputs)
    offset = len(lead)
    ctx = Ctx(views=views, path=lead[-3], param=lead[-2], needs_input_grad=(False,) * offset + tuple(needs))
    if name == "gat_layer":
        x, weight, attn_l, attn_r, bias = tensors
        ctx.h = torch.mm(x, weight.t()).view(x.shape[0], *attn_l.shape[-2:])
        el, er = gat_paths.score_halves(ctx.h, attn_l, attn_r, views.num_dst)
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.save_for_backward(x, weight, attn_l, attn_r, el, er, lse, bias)
    else:
        ctx.variant, ctx.out_like = lead[0], (grad.shape, grad.dtype)
        ctx.save_for_backward(*tensors, lse)
    with torch.no_grad():
        grads = function.backward(ctx, grad.contiguous())[offset:]
    taken = {t.untyped_storage().data_ptr() for t in (*inputs, grad) if t is not None}
    return [fresh(g.reshape(t.shape).contiguous(), taken) if g is not None else t.new_zeros(t.shape)
            for t, g, need in zip(inputs, grads, needs) if need]


# ------------------------------------------------------------------------------------ registration
def _register() -> None:
    lib = "dgl_accel::"

    def define(name: str, schema: str, impl: Callable, fake: Callable):
        op = torch.library.custom_op(lib + name, impl, mutates_args=(), schema=schema)
        op.register_fake(fake)
        return op

    def aggregate_fake(ei, ns, nd, h, k, op, reduce, transposed, keep_acc, x, w):
        return x.new_empty(((ns if transposed else nd),) + x.shape[1:], dtype=acc_dtype(x.dtype) if keep_acc else None)

    aggregate = define("aggregate", f"({GRAPH}, str op, str reduce, bool transposed, bool keep_acc, Tensor x, "
                       "Tensor? w) -> Tensor", _aggregate, aggregate_fake)
    edge_grad = define(
        "aggregate_edge_grad", f"({GRAPH}, str reduce, bool transposed, Tensor x, Tensor grad, Tensor w) -> Tensor",
        _edge_grad, lambda ei, ns, nd, h, k, reduce, transposed, x, grad, w: w.new_empty(w.shape))

    def aggregate_setup(ctx, inputs, output):
        ctx.graph, ctx.options, ctx.x_dtype = inputs[:5], inputs[5:8], inputs[9].dtype
        w = inputs[10]
        ctx.save_for_backward(inputs[9] if w is not None else None, w)

    def aggregate_grad(ctx, grad):
        x, w = ctx.saved_tensors
        op, reduce, transposed = ctx.options
        grad_x = grad_w = None
        if ctx.needs_input_grad[9]:  # keep_acc: fp32 gradient rows for bf16 features, rounded once here
            grad_x = aggregate(*ctx.graph, op, reduce, not transposed, False, grad, w).to(ctx.x_dtype)
        if w is not None and ctx.needs_input_grad[10]:
            grad_w = edge_grad(*ctx.graph, reduce, transposed, x, grad, w)
        return (None,) * 9 + (grad_x, grad_w)

    aggregate.register_autograd(aggregate_grad, setup_context=aggregate_setup)

    def extrema_fake(ei, ns, nd, h, k, reduce, fill, want_arg, x):
        feat = tuple(x.shape[1:])
        return x.new_empty((nd,) + feat), x.new_empty(((nd if want_arg else 0),) + feat, dtype=torch.int64)

    extrema = define("aggregate_extrema", f"({GRAPH}, str reduce, float fill, bool want_arg, Tensor x) -> "
                     "(Tensor, Tensor)", _extrema, extrema_fake)
    extrema_grad_op = define("aggregate_extrema_backward", f"({GRAPH}, Tensor arg, Tensor grad, Tensor x) -> Tensor",
                             _extrema_backward, lambda ei, ns, nd, h, k, arg, grad, x: x.new_empty(x.shape))

    def extrema_setup(ctx, inputs, output):
        ctx.graph = inputs[:5]
        ctx.save_for_backward(output[1], inputs[8])

    def extrema_grad(ctx, grad, _grad_arg):
        arg, x = ctx.saved_tensors
        grad_x = extrema_grad_op(*ctx.graph, arg, grad, x) if ctx.needs_input_grad[8] else None
        return (None,) * 8 + (grad_x,)

    extrema.register_autograd(extrema_grad, setup_context=extrema_setup)

    def sum_self_fake(ei, ns, nd, h, k, x, scale, scale_value):
        return x.new_empty((nd,) + x.shape[1:], dtype=composed_dtype(x, 1.0 if scale is None else scale, None))

    sum_self = define("copy_u_sum_self", f"({GRAPH}, Tensor x, Tensor? scale, float scale_value) -> Tensor",
                      _copy_u_sum_self, sum_self_fake)

    def sum_self_setup(ctx, inputs, output):
        ctx.graph, ctx.scale_value, ctx.x_dtype = inputs[:5], inputs[7], inputs[5].dtype
        scale = inputs[6]
        ctx.save_for_backward(inputs[5] if scale is not None else None, scale)

    def sum_self_grad(ctx, grad):
        x, scale = ctx.saved_tensors
        nd = ctx.graph[2]
        s = ctx.scale_value if scale is None else scale
        grad_x = grad_scale = None
        if ctx.needs_input_grad[5]:
            spread = aggregate(*ctx.graph, "copy_u", "sum", True, False, grad, None)
            grad_x = torch.cat([spread[:nd] + s * grad, spread[nd:]]).to(ctx.x_dtype)
        if scale is not None and ctx.needs_input_grad[6]:
            grad_scale = (grad * x[:nd]).sum_to_size(scale.shape)
        return (None,) * 5 + (grad_x, grad_scale, None)

    sum_self.register_autograd(sum_self_grad, setup_context=sum_self_setup)

    def attention_fake(ei, ns, nd, h, k, name, slope, dropout, seed, inputs):
        feat = inputs[0]
        head_dims = tuple(inputs[2].shape[-2:]) if name in ("gat_layer", "dot_attention") else tuple(feat.shape[1:])
        return feat.new_empty((nd,) + head_dims), feat.new_empty((nd, head_dims[0]), dtype=acc_dtype(feat.dtype))

    # inputs: tensors only (gat_layer without its bias: four); a None in a tensor list would leave the
    # output without autograd (torch's custom ops do not differentiate through it)
    head = f"{GRAPH}, str name, float slope, float dropout, Tensor? seed, Tensor[] inputs"
    attention = define("attention", f"({head}) -> (Tensor, Tensor)", _attention, attention_fake)
    attention_grad_op = define(
        "attention_backward", f"({head}, bool[] needs, Tensor lse, Tensor grad) -> Tensor[]", _attention_backward,
        lambda ei, ns, nd, h, k, name, slope, dropout, seed, inputs, needs, lse, grad: [
            t.new_empty(t.shape) for t, need in zip(inputs, needs) if need])

    def attention_setup(ctx, inputs, output):
        ctx.graph, ctx.name, ctx.slope, ctx.dropout = inputs[:5], inputs[5], inputs[6], inputs[7]
        ctx.needs = [t.requires_grad for t in inputs[9]]
        ctx.save_for_backward(inputs[8], *inputs[9], output[1])

    def attention_grad(ctx, grad, _grad_lse):
        seed, *inputs, lse = ctx.saved_tensors
        needs = ctx.needs
        grads = iter(attention_grad_op(*ctx.graph, ctx.name, ctx.slope, ctx.dropout, seed, inputs, needs, lse, grad)
                     if any(needs) else ())
        return (None,) * 9 + ([next(grads) if need else None for need in needs],)

    attention.register_autograd(attention_grad, setup_context=attention_setup)
    edges.register(define)


if AVAILABLE:
    _register()
