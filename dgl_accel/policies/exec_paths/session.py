"""Per-block state of execution paths: which aggregation of the training step runs now, and the
layer plans handed to the core (see ``dgl_accel.policies.exec_paths`` for the method)."""
from __future__ import annotations

import contextlib
import threading
import warnings
import weakref

import dgl
import torch

from ...core.jit import runtime as jit_runtime
from ...core.jit.aggregation import count_nonzero_rows
from ...graph.structure import cached, check_graph, structure_id
from .gradient_proof import BackwardCall, tracking_roots
from .paths import Paths
from .plan import LayerPlan

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


def _tensor_version(t) -> int | None:
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


class Session:
    """Per-block state: counts aggregations of one training step to know each one's depth."""

    def __init__(self, graph, train_idx, restrict_forward: bool, num_layers: int | None, strict: bool = False):
        self.graph = graph
        self.strict = strict
        self.warned = False
        self._confined: dict = {}  # id -> (weakref, version, depth) of gradients our restricted steps wrote
        self._idx, self._key = _checked(graph, train_idx)
        # the user's index object, checked at this version: `out[train_idx]` proves rows by identity
        self._known = (train_idx, _tensor_version(train_idx)) if isinstance(train_idx, torch.Tensor) else (None, None)
        self.call = None  # the backward call in flight, read before it ran (gradient_proof.tracking_roots)
        self._trusted: dict = {}  # id(node) -> (node, graph task, depth): our steps that wrote 0 outside N^depth
        self._sid = structure_id(graph)
        self._sizes = (graph.num_src_nodes(), graph.num_dst_nodes(), graph.num_edges())
        self.restrict_forward = restrict_forward
        self.num_layers = num_layers  # L, given or learned from the first step
        self.calls = 0                 # aggregations so far in the current step
        self.backward_seen = False
        self.proofs = self.scans = 0   # guard checks settled by the autograd graph / by reading rows

    @property
    def paths(self) -> Paths:
        return _cached_paths(self.graph, self._idx, self._key)  # rebuilt if the graph was mutated

    def on_forward(self, graph) -> int | None:
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

    def forward_depth(self, layer: int) -> int | None:
        """Frontier depth whose rows the forward of aggregation ``layer`` must compute, if known."""
        if not self.restrict_forward or self.num_layers is None:
            return None
        return self.num_layers - layer

    def backward_depth(self, layer: int) -> int:
        self.backward_seen = True
        return max(0, self.calls - layer)

    def confine(self, tensor: torch.Tensor, depth: int) -> None:
        """Remember that a restricted backward step wrote ``tensor`` as 0 outside N^depth.  Autograd
        hands it to the next step as the same object unless another gradient was added to it (a
        new object, or a new version if added in place), so :meth:`restricts` may trust it."""
        if len(self._confined) > 16:
            self._confined.clear()
            self._trusted.clear()
        self._confined[id(tensor)] = (weakref.ref(tensor), tensor._version, depth)
        node, task = _current_node(), _graph_task()
        if node is not None and task is not None:  # for proofs through row-wise ops (e.g. dropout)
            self._trusted[id(node)] = (node, task, depth)

    def read_backward_call(self, roots) -> BackwardCall:
        return BackwardCall(roots, self.paths.frontier(0), self._idx.numel(), self._known)

    def _trusts(self, node, depth: int) -> bool:
        hit = self._trusted.get(id(node))
        return hit is not None and hit[0] is node and hit[1] == _graph_task() and hit[2] <= depth

    def restricts(self, grad: torch.Tensor, depth: int, what: str) -> bool:
        """Whether a backward op whose incoming gradient is ``grad`` (one row per node) may keep to
        N^depth: only if that gradient is exactly 0 outside N^depth, which holds when the loss reads
        only the training rows and everything between aggregations is row-wise.  Checked at every
        restricted op (a gradient can also enter in the middle, e.g. a penalty on hidden
        activations): otherwise this op runs in full (a warning, once per block), or raises with
        ``strict=True``, and always raises under ``restrict_forward=True``, whose forward computed
        the rows in question as 0."""
        hit = self._confined.get(id(grad))
        if hit is not None and hit[0]() is grad and hit[1] == grad._version and hit[2] <= depth:
            return True  # written by a restricted step of ours, unchanged since: 0 outside N^hit[2]
        outside = self.paths.outside(depth)
        if outside.numel() == 0 or grad.shape[0] != self._sizes[1]:
            return outside.numel() == 0
        # the loss reads out[train_idx] (through row-wise ops): 0 outside N^0, a subset of N^depth
        if self.call is not None and self.call.proves_rows(_current_node(), grad.dim(), grad.shape[0],
                                                           lambda node: self._trusts(node, depth)):
            self.proofs += 1
            return True
        self.scans += 1
        if not _nonzero_rows(grad, outside):
            return True
        problem = (f"expected the gradient reaching {what} to be 0 outside the {depth}-hop frontier of the "
                   f"training nodes (got nonzero rows there: the loss, or a term added to it, reads rows "
                   f"beyond train_idx)")
        if self.restrict_forward:
            raise RuntimeError(f"{problem}. With restrict_forward=True the forward pass computed those rows as "
                               f"0, so the loss itself is wrong. Fix: compute the loss on out[train_idx] only, "
                               f"or use restrict_forward=False.")
        if self.strict:
            raise ValueError(f"{problem}. Fix: compute the loss on out[train_idx] only, or drop strict=True to "
                             f"let such steps run their backward in full.")
        if not self.warned:
            self.warned = True
            warnings.warn(f"{problem}; those backward steps run in full, so gradients stay exact but the "
                          f"execution paths save nothing there. Fix: compute the loss on out[train_idx] only.",
                          RuntimeWarning, stacklevel=2)
        return False


def _current_node():
    """The autograd node whose backward runs now on this thread (None where torch cannot say)."""
    current = getattr(torch._C, "_current_autograd_node", None)
    return current() if current is not None else None


def _graph_task():
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task() if task is not None else None


def _nonzero_rows(grad: torch.Tensor, rows: torch.Tensor) -> bool:
    """Whether ``grad`` has a nonzero entry in ``rows``: one compiled read where possible (a copy of
    the rows cost as much as the restricted aggregation it guards), else torch."""
    if (grad.device.type == "cpu" and grad.dim() == 2 and grad.is_contiguous() and jit_runtime.enabled()
            and grad.dtype in (torch.float32, torch.float64)):
        return count_nonzero_rows(grad.detach().numpy(), rows.numpy()) > 0
    return bool(torch.count_nonzero(grad.index_select(0, rows)))


def active_session():
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def begin_layer(graph) -> LayerPlan | None:
    """Register one aggregation over ``graph`` with the active session (None: run all-active)."""
    session = active_session()
    if session is None:
        return None
    layer = session.on_forward(graph)
    return None if layer is None else LayerPlan(session, layer)


def note_unrouted(graph) -> None:
    """Count an aggregation over ``graph`` that dgl-accel does not run (DGL's fallthrough, a UDF
    reducer) in the active session's training step.  It runs all-active with DGL's own backward,
    but it is an aggregation: every layer before it needs one more frontier in its backward, so
    leaving it out of the count would make those layers drop nonzero gradient rows."""
    session = active_session()
    if session is not None:
        session.on_forward(graph)


@contextlib.contextmanager
def open_session(graph, train_idx, *, restrict_forward: bool = False, num_layers: int | None = None,
                 model: torch.nn.Module | None = None, strict: bool = False):
    """Make a session for ``graph`` and ``train_idx`` the active one inside the block; the public
    ``dgl_accel.execution_paths`` adds the switch of DGL's message passing around it."""
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
    session = Session(graph, train_idx, restrict_forward, num_layers, strict)  # bad input fails here
    paths = session.paths  # build N^0 now, outside the timed step
    if session.num_layers is None:
        session.num_layers = paths.learned_layers
    stack.append(session)
    try:
        with tracking_roots(session):
            yield session
    finally:
        stack.pop()
        if restrict_forward and session.calls and session.backward_seen:
            # Later blocks on the same (graph, Vt) restrict their forward from their first step.
            paths.learned_layers = max(session.num_layers or 0, session.calls)
