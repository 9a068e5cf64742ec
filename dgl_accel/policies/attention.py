"""Which path a drop-in attention layer runs (issue 31): the fused op, or DGL's own forward through
our routed ops (``apply_edges`` / ``edge_softmax`` / ``update_all`` under ``dgl_accel.enabled()``).

The fused ops (:mod:`dgl_accel.core.attention`) do the scores, the softmax and the weighted sum in
one pass per destination and recompute the attention in backward, so nothing of size E x H is
stored.  On the CPU their compiled loops pay a fixed price per (edge, head): the score, one scalar
``exp`` (numba calls libm once per entry; numpy's exp on the routed path is vectorised), the
dropout hash, and in backward both again in each of two passes; the D-long products are the only
part that grows with the head width.  With many narrow heads that fixed price dominates and the
routed ops win; with wide heads, or one head, the fused loops do.

Measured on this workplace's 2-core machine (2026-11-27, evening, with the compiled backward that
keeps p_e per edge between its passes; Amazon-CS with self-loops, 505k edges, one ``GATConv``
training step in 767 -> H x D, one thread, interleaved; ratio = DGL's time / ours):

=========  =====  =====  =====  =====  =====  =====  =====
H x D      1 x 8  2 x 8  8 x 8  4 x 16 8 x 16 4 x 32 1 x 64
fused      1.12   1.08   1.07   1.10   1.18   1.68   1.73
routed     0.92   1.10   1.32   1.29   1.53   1.30   0.96
=========  =====  =====  =====  =====  =====  =====  =====

``DotGatConv``, the same step (2 x 8, 8 x 8, 4 x 16, 4 x 32): fused 1.28, 1.37, 1.75, 2.04; routed
0.98, 1.05, 0.90, 0.99 (its fused loops have no leaky ReLU or dropout hash per edge and head: fused
at every width).  ``GATv2Conv`` (earlier loops; 4x32 / 8x8): fused 2.28 / 1.09, routed 1.43 / 1.68.

Those tables are an AMD CPU's.  On an Intel one (2026-11-29, a Xeon with AVX-512; Cora, one
``GATConv`` / ``GATv2Conv`` training step in 128 -> 8 x 8, one thread, interleaved, ratio = DGL's
time / ours) DGL's C kernels for ``apply_edges`` and ``update_all`` beat our routed ones, and only
the edge softmax still wins: GAT fused 1.03, routed 0.91, DGL's forward with only ``edge_softmax``
routed 1.07 (1.34 on Amazon-CS; the GAT recipe's 767 -> 8 x 8 with dropout on Cora: 0.96 / 0.95 /
1.03); GATv2 fused 1.28, routed 1.02 (recipe: 1.02 / 0.99).

Under ``torch.autocast`` on the features' device DGL's own forward raises (its projected features come
out in the autocast dtype, its scores in fp32, and its message passing wants one dtype): the fused op
runs, in the autocast dtype as torch's ``scaled_dot_product_attention`` does, wherever it would run in
fp32, and for GATv2 and the dot product at every shape (their fused ops beat DGL's fp32 step under
autocast at 8 x 8 too); for GAT at the CPU shapes where the routed ops win (several narrow heads),
DGL's forward runs with the projection in the autocast dtype and its output widened to fp32
(``widen``), the attention routed in fp32 (the GAT paper's 767 -> 8 x 8 layer on Amazon-CS, one
thread: 323 ms a training step fused in bf16, DGL's 313 ms in fp32).
Otherwise (CPU tensors on the native path): fused where one head, or heads of at least :func:`fused_min_dim`
(op) features (:data:`FUSED_MIN_DIM`; on Intel CPUs :data:`FUSED_MIN_DIM_INTEL`); otherwise DGL's
forward with the routes of :data:`ROUTES_INTEL` on Intel CPUs, every route elsewhere. CUDA tensors and
the Triton backend keep the fused kernels (their rule is the GPU report's to fit).
:func:`choose_attention` returns the choice with its reason; ``dgl_accel.explain(graph, dim, heads=H)``
prints it for a graph. ``with use_attention_path("fused")`` (or ``"routed"``) overrides the rule, e.g.
to keep the fused op's memory saving where the routed ops would be faster.
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch

from ..core import backend
from ..core.autocast import autocast_dtype
from ..core.launch import kernel_module
from ..core.machine import intel_cpu

__all__ = ["FUSED_MIN_DIM", "FUSED_MIN_DIM_INTEL", "MODES", "ROUTES_INTEL", "AttentionChoice",
           "choose_attention", "fused_min_dim", "use_attention_path"]

# per op, the per-head width from which the fused CPU loops beat the routed ops (tables above)
FUSED_MIN_DIM = {"gat": 32, "gatv2": 32, "dot": 1}
FUSED_MIN_DIM_INTEL = {"gat": 32, "gatv2": 1, "dot": 1}
# per op, the routes DGL's forward takes where the fused op does not run, on Intel CPUs (default: all)
ROUTES_INTEL = {"gat": ("edge_softmax",)}
OPS = tuple(FUSED_MIN_DIM)
MODES = ("auto", "fused", "routed")
_mode = "auto"


@contextlib.contextmanager
def use_attention_path(mode: str):
    """Inside the block every drop-in attention layer takes ``mode``'s path: ``"auto"`` (the rule),
    ``"fused"`` (wherever the fused op computes what DGL would) or ``"routed"``.

    >>> with use_attention_path("fused"):
    ...     choose_attention("gat", 8, 8, torch.zeros(1)).fused
    True
    """
    global _mode
    if mode not in MODES:
        raise ValueError(f"expected an attention path in {MODES} (got {mode!r}). Fix: use_attention_path('auto').")
    old, _mode = _mode, mode
    try:
        yield
    finally:
        _mode = old


def fused_min_dim(op: str) -> int:
    """The per-head width from which the fused CPU loops run (this CPU's table)."""
    return (FUSED_MIN_DIM_INTEL if intel_cpu() else FUSED_MIN_DIM)[op]


@dataclasses.dataclass(frozen=True)
class AttentionChoice:
    """``fused``: whether the fused op runs; ``path``: the backend path (native / triton); ``reason``;
    ``routes``: where DGL's forward runs instead, the ops it routes (names of ``dgl_accel.patching.ROUTES``
    for ``dgl_accel.enabled(routes)``; None: every one); ``widen``: under autocast, DGL's forward
    with the projection in the autocast dtype and its output widened to fp32, so the attention
    runs in one dtype (DGL's own forward raises there)."""

    op: str
    heads: int
    dim: int
    path: str
    fused: bool
    reason: str
    routes: tuple | None = None
    widen: bool = False  # DGL's forward under autocast: the projection's output widened to fp32 first

    def __str__(self) -> str:
        what = "the fused op" if self.fused else (
            "DGL's forward on dgl-accel's routed ops" if self.routes is None else
            f"DGL's forward with only {', '.join(self.routes)} routed through dgl-accel")
        return f"{self.op} attention, {self.heads} head(s) x {self.dim} on the {self.path} path: {what} ({self.reason})"


def choose_attention(op: str, heads: int, dim: int, like: torch.Tensor) -> AttentionChoice:
    """The path of one attention layer call with ``heads`` x ``dim`` outputs on tensors like ``like``.

    >>> choose_attention("gat", 8, 8, torch.zeros(1)).fused
    False
    >>> choose_attention("gat", 4, 32, torch.zeros(1)).fused, choose_attention("gat", 1, 8, torch.zeros(1)).fused
    (True, True)
    """
    if op not in OPS:
        raise ValueError(f"expected op in {OPS} (got {op!r}). Fix: the attention module's kind.")
    path = backend.choose_path(like)
    if _mode != "auto":
        return AttentionChoice(op, heads, dim, path, _mode == "fused", f"use_attention_path({_mode!r})")
    amp = autocast_dtype(like.device.type) is not None
    if amp and (op != "gat" or path != "native" or like.device.type != "cpu" or heads == 1 or dim >= fused_min_dim(op)):
        return AttentionChoice(op, heads, dim, path, True, "torch.autocast: DGL's forward raises on the mixed dtypes")
    if amp:  # several narrow heads on the CPU: the routed ops win in fp32 too
        return AttentionChoice(op, heads, dim, path, False,
                               f"torch.autocast, {heads} heads of {dim} < {fused_min_dim(op)} features: the "
                               f"projection in the autocast dtype, the routed attention on its output in fp32",
                               ROUTES_INTEL.get(op) if intel_cpu() else None, widen=True)
    if path != "native" or like.device.type != "cpu":
        return AttentionChoice(op, heads, dim, path, True, f"the Triton kernels, {_grid(op, heads, dim)}")
    if heads == 1:
        return AttentionChoice(op, heads, dim, path, True, "one head: the per-head work is the whole row")
    least = fused_min_dim(op)
    if dim >= least:
        return AttentionChoice(op, heads, dim, path, True, f"heads of {dim} >= {least} features")
    routes = ROUTES_INTEL.get(op) if intel_cpu() else None
    return AttentionChoice(op, heads, dim, path, False,
                           f"{heads} heads of {dim} < {least} features: the fused loops' fixed cost per "
                           f"(edge, head) outweighs their saving", routes)


# per op, its module of all-heads kernels (one program per row covering every head)
ALL_HEADS = {"gat": "gat_heads", "gatv2": "gatv2_heads", "dot": "dot_heads"}


def _grid(op: str, heads: int, dim: int) -> str:
    """How the op's fused kernels split the work (``tiles`` of its :data:`ALL_HEADS` module)."""
    tile = kernel_module(ALL_HEADS[op]).tiles(heads, dim)
    if tile:
        return f"one program per row covering every head (tile {tile[0]} heads x {tile[1]} features)"
    return "one program per row and head"
