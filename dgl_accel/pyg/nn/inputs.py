"""What every PyG drop-in checks and converts before the core runs.

* :func:`machinery_reason`: why PyG's own ``propagate`` machinery must run (explain mode, message
  passing hooks, ``decomposed_layers``, the ``target_to_source`` flow), or None.
* :func:`graph_reason`: checks ``edge_index`` (PyG's ValueError for a malformed one, with the fix)
  and says why a graph input kind is left to PyG (``torch_sparse.SparseTensor``, ``EdgeIndex``,
  CSC or uncoalesced COO adjacencies), or None.
* :func:`node_sets`: ``x`` or ``(x_src, x_dst)`` and ``size`` as the source and target counts PyG
  would use, with PyG's ValueError where they disagree; :func:`graph_for`: the cached core views of
  that graph after the id-range check (PyG's IndexError).
* :func:`prepare` / :func:`run_aggregation`: all of the above for the layers that aggregate source
  rows (SAGEConv, GINConv), then their ``aggr`` on the core (sum/mean, or max/min on the extrema op).
* :func:`fall_back`: PyG's forward on the module, counted in ``dgl_accel.stats()`` as
  ``pyg.<Layer>: fallthrough: <reason>``.
* :func:`compile_boundary` / :func:`compiling`: under ``torch.compile`` (torch >= 2.4) the layer
  is traced, its core ops the custom ops of :mod:`dgl_accel.core.library` on a
  :class:`~dgl_accel.core.library.TracedGraph` (:func:`graph_for`), whose graph kind ``"pyg"``
  (:func:`traced_views`) serves the cached views and derived graphs (:func:`self_loop_graph`,
  :func:`gcn_graph`) inside them; calls the ops do not take (:func:`untraced_reason`) and torch
  2.2 keep a compile boundary.
"""
from __future__ import annotations

import copy
import functools

import torch
from torch.nn.parameter import UninitializedTensorMixin
from torch_geometric import EdgeIndex
from torch_geometric.inspector import Inspector
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import add_self_loops, remove_self_loops

from ...core import backend
from ...core.aggregation.checks import FLOAT_DTYPES, describe
from ...core.aggregation.function import aggregate
from ...core.extrema import aggregate_extrema
from ...core.library import AVAILABLE as TRACEABLE
from ...core.library import TracedGraph, register_graph_kind
from ..graph import INDEX_DTYPES, SPARSE_LAYOUTS, edges_of, sparse_values

HOOKS = ("_propagate_forward_pre_hooks", "_propagate_forward_hooks", "_message_forward_pre_hooks",
         "_message_forward_hooks", "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks",
         "_message_and_aggregate_forward_pre_hooks", "_message_and_aggregate_forward_hooks",
         "_edge_update_forward_pre_hooks", "_edge_update_forward_hooks")
REDUCES = {"add": "sum", "sum": "sum", "mean": "mean", "max": "max", "min": "min"}  # PyG aggr -> the core's


def dropin(pyg_class, *calls: str, untraced=None):
    """Class decorator of a drop-in: ``<call>_type`` for each of ``calls`` (:func:`call_types`),
    ``__prepare_scriptable__`` (:func:`scriptable`), and its ``forward`` as ``torch.compile`` sees
    it (:func:`compile_boundary`; ``untraced(module, *args, **kwargs)``: why a call stays behind the
    boundary, or None); the class itself overrides ``forward`` only."""
    def wrap(cls):
        for call in calls:
            setattr(cls, f"{call}_type", call_types(pyg_class, call))
        cls.__prepare_scriptable__ = lambda self: scriptable(self, pyg_class)
        cls.forward = compile_boundary(cls.forward, untraced)
        return cls
    return wrap


def compile_boundary(forward, untraced=None):
    """``forward`` as ``torch.compile`` sees it.  Under compile on torch >= 2.4 dynamo traces
    ``forward``, whose core ops run as torch custom ops on the graph as tensors (:func:`graph_for`
    gives a :class:`~dgl_accel.core.library.TracedGraph` there): no graph break, ``fullgraph=True``
    works.  Elsewhere (torch 2.2, and the calls :func:`untraced_reason` or the class's
    ``untraced(module, *args, **kwargs)`` name) the layer is a boundary: dynamo stops at it (one
    graph break each side), runs it eagerly and compiles the rest of the model.  (Tracing the eager
    code itself went into numba's dispatchers and compiler: torch 2.11 failed inside numba's parfor
    lowering for GATConv, torch 2.2 on the environment read of the backend choice.)  Eager calls go
    through the boundary too (``torch.compiler.disable``'s wrapper, as before the custom ops).  A
    layer whose settings alone send it to PyG's forward (:func:`static_reason`) is traced as PyG's
    is: no break."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None) or torch._dynamo.disable
    eager = disable(forward)

    @functools.wraps(forward)
    def run(self, *args, **kwargs):
        if static_reason(self) is not None:
            return forward(self, *args, **kwargs)
        if compiling() and untraced_reason(self, args, kwargs) is None and (
                untraced is None or untraced(self, *args, **kwargs) is None):
            return forward(self, *args, **kwargs)
        # not traced: eagerly, or where dynamo gave this frame up (a sparse adjacency broke the graph
        # above): the boundary, so that dynamo never compiles ``forward``'s frames on their own
        return eager(self, *args, **kwargs)
    return run


def compiling() -> bool:
    """Whether dynamo is tracing this call and the core's ops trace (torch >= 2.4: custom ops)."""
    return TRACEABLE and backend.tracing()


def untraced_reason(module, args, kwargs) -> str | None:
    """Why a call under ``torch.compile`` stays behind the boundary (run eagerly), or None: a graph
    input other than a dense ``edge_index`` tensor, an argument ``True`` (GAT's
    ``return_attention_weights``).  Attention dropout while training is traced: GAT's inside the
    custom op (a seed drawn in the graph), GATv2's and TransformerConv's through PyG's own forward."""
    edge_index = kwargs.get("edge_index", args[1] if len(args) > 1 else None)
    if type(edge_index) is not torch.Tensor or edge_index.layout != torch.strided:
        return "a graph input other than a dense edge_index"
    if any(a is True for a in args[2:]) or any(v is True for v in kwargs.values()):
        return "return_attention_weights"
    return None


def is_lazy(param) -> bool:
    """``torch.nn.parameter.is_lazy`` as dynamo traces it (an isinstance; torch's own function is a
    graph break: a torch function returning a bool)."""
    return isinstance(param, UninitializedTensorMixin)


def static_reason(module) -> str | None:
    """Why the layer's settings alone (not its inputs) send every call to PyG's forward, or None."""
    return machinery_reason(module) or (f"aggr {module.aggr!r}" if reduce_of(module) is None else None)


def call_types(pyg_class, call: str) -> dict:
    """``{name: type}`` of the keyword arguments ``pyg_class``'s forward passes to ``self.<call>(...)``,
    read by a fresh ``Inspector`` of PyG's class: the value of our drop-in's ``<call>_type``
    attribute.  PyG builds a layer's ``propagate`` / ``edge_updater`` template from those arguments,
    reading class sources cached by class NAME, which our subclass shares with PyG's; without the
    attribute our source stands in for PyG's, no arguments are found, and PyG's own forward (a
    fallback) fails where our class was built before PyG's."""
    found = Inspector(pyg_class).get_params_from_method_call(call, exclude=[0, "edge_index", "size"])
    return {name: param.type for name, param in found.items()}


def scriptable(module, pyg_class):
    """What ``torch.jit.script`` compiles for a drop-in (its ``__prepare_scriptable__``): a shallow
    copy with PyG's class, sharing the parameters.  Our forward is Python (the core's kernels run
    outside TorchScript), so a scripted layer runs PyG's own forward, as it would unswapped."""
    twin = copy.copy(module)
    twin.__class__ = pyg_class
    for name in ("propagate", "edge_updater"):  # per-instance bindings (decomposition, explain) are not scripted
        twin.__dict__.pop(name, None)
    twin._set_jittable_templates()  # PyG's class templates, where no PyG layer of the class was built yet
    return twin


def fall_back(module, pyg_class, reason: str, *args, **kwargs):
    """``pyg_class.forward`` on ``module`` (PyG's own computation and errors), counted with ``reason``."""
    backend.record_fallthrough(f"pyg.{pyg_class.__name__}", reason)
    if module.explain or module.decomposed_layers > 1:
        # PyG binds the class's ``_orig_propagate`` here, which for a subclass compiled after its
        # parent is the parent's template (no explain, no decomposition): bind the generic one.
        module.propagate = MessagePassing.propagate.__get__(module, MessagePassing)
    return pyg_class.forward(module, *args, **kwargs)


def machinery_reason(module) -> str | None:
    """Why ``module`` needs PyG's ``propagate`` (hooks, explain, decomposition, flow), or None."""
    if getattr(module, "_explain", None):
        return "explain mode"
    if any(getattr(module, name, None) for name in HOOKS):
        return "message passing hooks"
    if getattr(module, "decomposed_layers", 1) != 1:
        return "decomposed_layers > 1"
    if module.flow != "source_to_target":
        return f"flow {module.flow!r}"
    return None


def reduce_of(module) -> str | None:
    """The core's reduce for the module's ``aggr`` (None: an aggregation the core does not run)."""
    return REDUCES.get(module.aggr) if isinstance(module.aggr, str) else None


def graph_reason(edge_index, sparse_ok: bool = True) -> str | None:
    """Check ``edge_index`` as PyG's ``propagate`` does, before any work (ValueError with the fix),
    and return why this kind of graph input goes to PyG, or None when the core takes it."""
    if isinstance(edge_index, SparseTensor):  # only where torch_sparse is installed
        return "torch_sparse.SparseTensor input"
    if not isinstance(edge_index, torch.Tensor):
        raise ValueError(f"Expected 'edge_index' to be an integer tensor of shape [2, num_edges], a "
                         f"torch.sparse adjacency or a SparseTensor (got {describe(edge_index)}). "
                         f"Fix: torch.as_tensor(edge_index, dtype=torch.long).")
    if isinstance(edge_index, EdgeIndex):
        return "EdgeIndex input"
    if edge_index.layout != torch.strided:
        if not sparse_ok:
            return "torch.sparse adjacency"
        if edge_index.layout not in SPARSE_LAYOUTS:
            return f"sparse layout {edge_index.layout}"
        if edge_index.layout == torch.sparse_coo and not edge_index.is_coalesced():
            return "uncoalesced COO adjacency"
        if edge_index.dim() != 2 or edge_index.dense_dim() != 0:
            return "sparse adjacency with dense dimensions"
        return None
    if edge_index.dtype not in INDEX_DTYPES:
        raise ValueError(f"Expected 'edge_index' to be of integer type (got '{edge_index.dtype}'). "
                         f"Fix: edge_index.long().")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"Expected 'edge_index' of shape [2, num_edges] (got {list(edge_index.shape)}). "
                         f"Fix: stack sources and targets as rows, e.g. torch.stack([src, dst]) "
                         f"(an [E, 2] list of pairs: edge_index.t().contiguous()).")
    return None


def features_reason(*xs) -> str | None:
    """Why the node features go to PyG (not [N, F] float tensors of one dtype: batched static
    graphs, integer inputs, mixed dtypes), or None."""
    tensors = [x for x in xs if x is not None]
    for x in tensors:
        if not isinstance(x, torch.Tensor):
            return f"features of type {type(x).__name__}"
        if x.dim() != 2:
            return f"features of shape {list(x.shape)} (not [num_nodes, channels])"
        if x.dtype not in FLOAT_DTYPES:
            return f"features of dtype {x.dtype}"
    if len({x.dtype for x in tensors}) > 1:
        return "features of different dtypes"
    return None


def check_size(size):
    """``size`` as PyG takes it: None or two ints (either may be None); else PyG's TypeError."""
    if size is None:
        return None
    ok = isinstance(size, (tuple, list)) and len(size) == 2 and all(
        s is None or (isinstance(s, int) and not isinstance(s, bool) and s >= 0) for s in size)
    if not ok:  # PyG's TypeError
        raise TypeError(f"Expected 'size' to be None or (num_source_nodes, num_target_nodes) (got {size!r}). "
                         f"Fix: size=(x_src.size(0), x_dst.size(0)), or leave it out.")
    return tuple(size)


def node_sets(x_src: torch.Tensor, x_dst: torch.Tensor | None, size) -> tuple[int, int]:
    """(num_src, num_dst) as PyG's ``propagate`` sizes them: the feature rows, else ``size``, else
    the other side's count; PyG's ValueError where ``size`` and the features disagree."""
    size = [None, None] if size is None else list(check_size(size))
    for dim, x in ((0, x_src), (1, x_dst)):
        if x is None:
            continue
        if size[dim] is not None and size[dim] != x.shape[0]:
            side = ("source", "x_src") if dim == 0 else ("target", "x_dst")
            raise ValueError(f"Encountered tensor with size {x.shape[0]} in dimension 0, but expected size "
                             f"{size[dim]} (the {side[0]} count of 'size'). Fix: pass {side[1]} with one row per "
                             f"{side[0]} node, or size=None.")
        size[dim] = x.shape[0]
    num_src = size[0] if size[0] is not None else size[1]
    num_dst = size[1] if size[1] is not None else size[0]
    return num_src, num_dst


def check_device(edge_index: torch.Tensor, *tensors) -> None:
    """Features and edge data on ``edge_index``'s device (ValueError with the fix)."""
    for t in tensors:
        if t is not None and t.device != edge_index.device:
            raise ValueError(f"Expected 'edge_index' and the features on one device (got edge_index on "
                             f"{edge_index.device}, a tensor on {t.device}). Fix: edge_index.to({str(t.device)!r}).")


def check_edge_weight(edge_weight, num_edges: int, x: torch.Tensor) -> None:
    """``edge_weight`` None or a float [num_edges] tensor of x's dtype and device (ValueError)."""
    if edge_weight is None:
        return
    if not isinstance(edge_weight, torch.Tensor) or not edge_weight.is_floating_point():
        raise ValueError(f"Expected 'edge_weight' to be a float tensor of shape [num_edges] (got "
                         f"{describe(edge_weight)}). Fix: edge_weight.float().")
    if tuple(edge_weight.shape) != (num_edges,):
        raise ValueError(f"Expected 'edge_weight' of shape [{num_edges}], one weight per column of "
                         f"'edge_index' (got {list(edge_weight.shape)}). Fix: edge_weight.view(-1) if it "
                         f"holds one weight per edge.")
    if edge_weight.device != x.device:
        raise ValueError(f"Expected 'edge_weight' on the features' device {x.device} (got {edge_weight.device}). "
                         f"Fix: edge_weight.to({str(x.device)!r}).")


def graph_for(edge_index: torch.Tensor, num_src: int, num_dst: int, homogeneous: bool):
    """(:class:`~dgl_accel.pyg.graph.Edges`, the core's views) of a checked graph input over
    ``num_src`` sources and ``num_dst`` targets, after PyG's id-range IndexError.  Under
    ``torch.compile`` (a dense ``edge_index``): a :class:`~dgl_accel.core.library.TracedGraph`
    twice, the graph as tensors for the core's custom ops, which fetch these views and run the
    id-range check inside."""
    if compiling() and edge_index.layout == torch.strided:
        traced = TracedGraph(edge_index, num_src, num_dst, homogeneous, "pyg")
        return traced, traced
    if edge_index.layout != torch.strided and tuple(edge_index.shape) != (num_dst, num_src):
        raise ValueError(f"Expected a sparse adjacency of shape [num_target_nodes, num_source_nodes] = "
                         f"[{num_dst}, {num_src}] (got {list(edge_index.shape)}). Fix: pass adj_t, the "
                         f"transposed adjacency, sized by the feature rows.")
    edges = edges_of(edge_index)
    edges.check_ids(num_src, num_dst)
    return edges, edges.views(num_src, num_dst, homogeneous)


def prepare(module, x, edge_index, size):
    """For the layers that aggregate source rows (SAGEConv, GINConv): ``(x_src, x_dst, edges,
    views)`` after every check, or the reason the call goes to PyG.  ``x`` becomes ``(x, x)`` as in
    PyG; ``x_dst`` may be None (then ``size`` or the source count gives the targets)."""
    why = machinery_reason(module) or graph_reason(edge_index)
    if why is not None:
        return why
    reduce = reduce_of(module)
    if reduce is None:
        return f"aggr {module.aggr!r}"
    if isinstance(x, torch.Tensor):
        x_src = x_dst = x
    elif isinstance(x, (tuple, list)) and len(x) == 2 and x[0] is not None:
        x_src, x_dst = x
    else:
        return "features neither a tensor nor a pair (x_src, x_dst)"
    why = features_reason(x_src, x_dst)
    if why is not None:
        return why
    sparse = edge_index.layout != torch.strided
    if sparse:
        if reduce in ("max", "min"):
            return f"{reduce} over a sparse adjacency"
        if x_dst is None:
            return "a sparse adjacency without target features"
        if sparse_values(edge_index).dtype != x_src.dtype:
            return "sparse values of another dtype than the features"
    check_device(edge_index, x_src, x_dst)
    num_src, num_dst = node_sets(x_src, x_dst, None if sparse else size)
    edges, views = graph_for(edge_index, num_src, num_dst, homogeneous=isinstance(x, torch.Tensor))
    return x_src, x_dst, edges, views


def run_aggregation(module, edges, views, edge_index, x_src: torch.Tensor) -> torch.Tensor:
    """The module's ``aggr`` of ``x_src`` into the targets on the core: sum/mean (weighted by a
    sparse adjacency's values), or max/min on the extrema op with 0 where no edge comes in."""
    reduce = reduce_of(module)
    if reduce in ("max", "min"):
        return aggregate_extrema(views, "copy_u", reduce, x_src, fill=0.0)
    weight = sparse_values(edge_index) if edges.sparse else None
    return aggregate(views, "copy_u" if weight is None else "u_mul_e", reduce, x_src, weight)


def self_loop_graph(edges, edge_index: torch.Tensor, m: int) -> torch.Tensor:
    """PyG's ``remove_self_loops`` then ``add_self_loops`` for the first ``m`` nodes (GAT's graph),
    computed once per graph and kept with it."""
    return edges.derived(("attention_self_loops", m),
                         lambda: add_self_loops(remove_self_loops(edge_index)[0], num_nodes=m)[0])


def gcn_graph(edges, edge_index: torch.Tensor, args: tuple):
    """(edges, weights) of PyG's ``gcn_norm(edge_index, None, *args)``, computed once per graph and
    ``args`` (num_nodes, improved, add_self_loops, flow, dtype) and kept with it."""
    return edges.derived(("gcn_norm", *args), lambda: gcn_norm(edge_index, None, *args))


def gcn_detail(improved: bool, add_self_loops: bool, dtype: torch.dtype) -> str:
    """The ``detail`` of :func:`traced_views` that names GCN's normalised graph."""
    return f"gcn_norm:{int(improved)}:{int(add_self_loops)}:{dtype}"


def traced_views(edge_index: torch.Tensor, num_src: int, num_dst: int, homogeneous: bool, detail: str):
    """The graph kind ``"pyg"`` of :mod:`dgl_accel.core.library` (what the custom ops run on): the
    cached views after PyG's id-range check; ``detail`` ``"self_loops"``: GAT's graph
    (:func:`self_loop_graph`); ``"gcn_norm:<improved>:<add_self_loops>:<dtype>"``: GCN's normalised
    graph and its weights (:func:`gcn_graph`, the entry GCNConv's eager forward uses)."""
    edges = edges_of(edge_index)
    edges.check_ids(num_src, num_dst)
    if not detail:
        return edges.views(num_src, num_dst, homogeneous), None
    if detail == "self_loops":
        graph = self_loop_graph(edges, edge_index, min(num_src, num_dst))
        return edges_of(graph).views(num_src, num_dst, homogeneous), None
    name, improved, loops, dtype = detail.split(":")  # gcn_detail's
    if name != "gcn_norm":
        raise ValueError(f"expected a graph detail 'self_loops' or 'gcn_norm:...' (got {detail!r}).")
    graph, weight = gcn_graph(edges, edge_index, (num_src, improved == "1", loops == "1", "source_to_target",
                                                  getattr(torch, dtype.removeprefix("torch."))))
    return edges_of(graph).views(num_src, num_dst, homogeneous), weight


if TRACEABLE:
    register_graph_kind("pyg", traced_views)


__all__ = ["prepare", "run_aggregation", "fall_back", "machinery_reason", "reduce_of", "graph_reason",
           "features_reason", "check_size", "node_sets", "check_device", "check_edge_weight", "graph_for", "REDUCES",
           "compiling", "is_lazy", "self_loop_graph", "gcn_graph", "traced_views"]
