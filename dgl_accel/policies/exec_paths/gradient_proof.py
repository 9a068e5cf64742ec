"""Proving from the autograd graph, instead of reading the gradient, that a backward step may keep
to the training rows.

A restricted backward step is exact only if the gradient it receives is 0 outside the frontier of
the training nodes.  Reading that gradient costs a pass over every row outside the frontier (74k x
16 floats on Slashdot: 0.20 ms, a quarter of the step it guards).  In the usual training step the
answer is already in the graph autograd recorded: the model output reaches the loss only through
``out[train_idx]`` (``IndexBackward0``), possibly after row-wise ops (bias, activation, dropout,
``log_softmax`` over features, a linear head).  Such a gradient is 0 outside ``train_idx`` by
construction.  :meth:`BackwardCall.proves_rows` says yes only when every path from a root of the
backward call to the current node passes a selection of training rows through ops from a short
list that keep rows apart; anything else (a slice, a view, a reduction, a custom Function, a node
that is itself a root, a tensor hook on the way) gives no proof, and the caller reads the gradient
as before.  So the proof can only make the guard cheaper, never looser.  Hooks are seen when they
are registered with ``Tensor.register_hook`` while a session is open (the tensors of a training
step are made inside the block); a hook put on an autograd node directly
(``grad_fn.register_prehook``) is not seen (documented in ``execution_paths``).

The roots are those of the ``backward()``/``autograd.grad`` call in flight: :func:`tracking_roots`
wraps torch's two entry points while a session is open (reference-counted, restored when the last
session closes) and hands the root nodes to the sessions open in the calling thread for the call's
duration.
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch

# Ops whose gradient to their input keeps row i of the output in row i of the input (the node dim
# stays dim 0; checked with the ranks below).  Unary elementwise ops and softmax over a non-zero dim:
_ROWWISE_UNARY = frozenset({
    "ReluBackward0", "LeakyReluBackward0", "EluBackward0", "GeluBackward0", "SiluBackward0",
    "SigmoidBackward0", "TanhBackward0", "NegBackward0", "ExpBackward0", "LogBackward0", "PowBackward0",
    "CloneBackward0", "ToCopyBackward0", "NativeDropoutBackward0", "HardtanhBackward0",
    "AddBackward1", "SubBackward1", "MulBackward1", "DivBackward1",  # with a Python number
})
# Broadcasting elementwise ops of two tensors: each input gets the output gradient (times something
# elementwise), summed over the dims it was broadcast along, never over the node dim (the rank check
# of BackwardCall.proves_rows).
_ROWWISE_BINARY = frozenset({"AddBackward0", "SubBackward0", "MulBackward0", "DivBackward0"})
_SOFTMAX = frozenset({"LogSoftmaxBackward0", "SoftmaxBackward0"})
# Matrix products where the row operand is input `slot`: out = x @ W keeps row i of x in row i.
_MATMUL_ROW_SLOT = {"MmBackward0": 0, "AddmmBackward0": 1}

MAX_NODES = 4096  # a bigger autograd graph is not worth walking: read the gradient instead


class BackwardCall:
    """The autograd graph of one backward call, read before it runs (saved index tensors are freed
    once their node has run): who consumes each node's output, and what each consumer does to rows."""

    __slots__ = ("roots", "consumers", "kinds", "_alive")

    def __init__(self, roots, train_mask: torch.Tensor, num_train: int, known):
        self.roots = tuple(r for r in roots if r is not None)
        self.consumers: dict = {}  # id(node) -> [(consumer, input slot)]
        self.kinds: dict = {}      # id(node) -> what the node does to rows (see _kind)
        # Python wrappers of C++ nodes are made on demand: holding them keeps every id() unique
        self._alive: list = []
        seen: set = set()
        stack = list(self.roots)
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            if len(seen) >= MAX_NODES:
                self.roots = ()  # too big to walk: no proofs in this call
                return
            seen.add(id(n))
            self._alive.append(n)
            self.kinds[id(n)] = _kind(n, train_mask, num_train, known)
            for slot, (nxt, _) in enumerate(n.next_functions):
                if nxt is not None:
                    self.consumers.setdefault(id(nxt), []).append((n, slot))
                    stack.append(nxt)

    def proves_rows(self, node, rank: int, num_rows: int, trusted) -> bool:
        """Whether every gradient reaching autograd ``node``'s output (``rank`` dims, ``num_rows``
        rows, one per node) is 0 outside the training rows, or outside the rows that the consumers
        ``trusted(consumer)`` accepts (a restricted step of ours that already wrote its gradient)."""
        if node is None or not self.roots or num_rows < 2:
            return False
        roots = {id(r) for r in self.roots}
        memo: dict = {}
        if _hooked.get("overflow"):
            return False

        def confined(n) -> bool:
            if id(n) not in memo:
                memo[id(n)] = False  # autograd graphs have no cycles; this only bounds the recursion
                uses = self.consumers.get(id(n), ())
                # a hook on n's output tensor may rewrite the gradient that reaches n: no proof
                memo[id(n)] = (id(n) not in roots and bool(uses) and n._sequence_nr() not in _hooked
                               and all(use_confined(u, slot) for u, slot in uses))
            return memo[id(n)]

        def use_confined(use, slot) -> bool:
            kind = self.kinds.get(id(use))
            if kind is None:
                return slot == 0 and trusted(use)
            what, detail = kind
            if what == "select":  # detail: (rows inside the training set, sizes of the tensor read)
                return detail[0] and len(detail[1]) == rank and detail[1][0] == num_rows
            if what == "softmax" and detail % rank == 0:
                return False  # a softmax over nodes mixes every row
            if what == "matmul" and (detail != slot or rank != 2):
                return False
            return confined(use)

        return confined(node)


def _kind(node, train_mask: torch.Tensor, num_train: int, known):
    """What ``node`` does to rows, read now while its saved tensors exist: ("select", (inside,
    sizes)), ("rowwise", None), ("softmax", dim), ("matmul", row slot), or None (anything else)."""
    name = type(node).__name__  # the generated node classes carry the op's name; cheaper than name()
    try:  # reading a saved tensor that was changed in place raises: no proof (backward will raise)
        if name == "IndexBackward0":
            indices = node._saved_indices
            if not indices or indices[0] is None or any(i is not None for i in indices[1:]):
                return None
            sizes = tuple(int(v) for v in node._saved_self_sym_sizes)
            return "select", (_inside(indices[0], train_mask, num_train, known), sizes)
        if name == "IndexSelectBackward0":
            sizes = tuple(int(v) for v in node._saved_self_sym_sizes)
            if node._saved_dim % len(sizes) != 0:
                return None
            return "select", (_inside(node._saved_index, train_mask, num_train, known), sizes)
        if name in _SOFTMAX:
            return "softmax", node._saved_dim
    except RuntimeError:
        return None
    if name in _ROWWISE_UNARY or name in _ROWWISE_BINARY:
        return "rowwise", None
    if name in _MATMUL_ROW_SLOT:
        return "matmul", _MATMUL_ROW_SLOT[name]
    return None


def _inside(index: torch.Tensor, train_mask: torch.Tensor, num_train: int, known) -> bool:
    """Whether ``index`` (an index or mask along the node dim) selects training rows only
    (``num_train`` of the rows of ``train_mask`` are set)."""
    num_rows = train_mask.shape[0]
    if index is known[0] and index._version == known[1]:
        return True
    if index.dim() != 1 or index.device != train_mask.device:
        return False
    if index.dtype == torch.bool:
        return index.numel() == num_rows and not bool((index & ~train_mask).any())
    # Every selection in the graph is read here, once per backward call, including a model's own
    # gathers such as h[src] over all edges: an index longer than the training set is left
    # unproved (the gradient is then read) rather than checked row by row on this path.
    if index.dtype not in (torch.int64, torch.int32) or index.numel() > num_train:
        return False
    index = torch.where(index < 0, index + num_rows, index)
    if index.numel() and bool(((index < 0) | (index >= num_rows)).any()):
        return False
    return bool(train_mask.index_select(0, index.long()).all())


def _recording(entry, first_arg: str):
    @functools.wraps(entry)
    def wrapper(*args, **kwargs):
        listeners = getattr(_listeners, "sessions", None)
        if not listeners:
            return entry(*args, **kwargs)
        tensors = args[0] if args else kwargs.get(first_arg)
        tensors = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors or ())
        roots = tuple(t.grad_fn for t in tensors if isinstance(t, torch.Tensor))
        before = [s.call for s in listeners]
        for s in listeners:
            # a nested call (e.g. reentrant checkpointing) does not see the whole graph: no proof
            # inside it, nor for the rest of the outer call
            s.call = s.read_backward_call(roots if s.call is None else ())
        try:
            return entry(*args, **kwargs)
        finally:
            for s, b in zip(listeners, before):
                s.call = b
    wrapper.__wrapped_by_dgl_accel__ = entry
    return wrapper


def _noting_hooks(register):
    @functools.wraps(register)
    def wrapper(tensor, hook):
        node = tensor.grad_fn
        if node is not None:
            # By sequence number: node wrappers come and go, and a number shared with a node of
            # another thread only costs that node its proof.
            if len(_hooked) > MAX_HOOKED:
                _hooked["overflow"] = True
            else:
                _hooked[node._sequence_nr()] = True
        return register(tensor, hook)
    return wrapper


MAX_HOOKED = 65536  # beyond this many hooked tensors in one block, no more proofs
_hooked: dict = {}  # sequence numbers of nodes whose output got a Tensor.register_hook while a session is open
_listeners = threading.local()  # sessions open in this thread, told of its backward calls
_lock = threading.Lock()
_users = 0
_saved: dict = {}


@contextlib.contextmanager
def tracking_roots(session):
    """While open, ``session.call`` holds ``session.read_backward_call(roots)`` (a
    :class:`BackwardCall`) for the torch.autograd.backward/.grad call in flight on this thread (None
    outside one).  Torch's two entry points are wrapped while any session in any thread is open (the
    wrapper passes straight through in threads without one), and so is ``Tensor.register_hook``,
    to know the nodes whose gradient a hook may rewrite."""
    global _users
    with _lock:
        if _users == 0:
            _saved["backward"], _saved["grad"] = torch.autograd.backward, torch.autograd.grad
            torch.autograd.backward = _recording(_saved["backward"], "tensors")
            torch.autograd.grad = _recording(_saved["grad"], "outputs")
            _saved["hook"] = torch.Tensor.register_hook
            torch.Tensor.register_hook = _noting_hooks(_saved["hook"])
        _users += 1
    sessions = getattr(_listeners, "sessions", None)
    if sessions is None:
        sessions = _listeners.sessions = []
    session.call = None
    sessions.append(session)
    try:
        yield
    finally:
        sessions.remove(session)
        with _lock:
            _users -= 1
            if _users == 0:
                torch.autograd.backward, torch.autograd.grad = _saved.pop("backward"), _saved.pop("grad")
                torch.Tensor.register_hook = _saved.pop("hook")
                _hooked.clear()
