"""The forward shared by the drop-in attention modules whose aggregation one fused op does
(:mod:`.dotgatconv`, :mod:`.gatv2conv`): DGL's own forward where the fused op does not compute
exactly what it would or where the routed ops are faster (:mod:`dgl_accel.policies.attention`), else
DGL's zero-in-degree check (its message, before any work) and the module's fused forward."""
from __future__ import annotations

from dgl.base import DGLError

from ..patching import enabled
from ..policies.attention import choose_attention
from .gatconv import ZERO_IN_DEGREE


class FusedAttentionForward:
    """A mixin before the DGL module in the bases; the module defines ``attention_op`` (its op's name
    in :mod:`dgl_accel.policies.attention`), ``_fused_applies(graph, feat)`` and
    ``_fused_forward(graph, feat, get_attention)``."""

    attention_op = ""

    def forward(self, graph, feat, get_attention=False):
        choice = self._choice(feat) if self._fused_applies(graph, feat) else None
        if choice is None or not choice.fused:  # DGL's forward, on the routes the choice names (None: all)
            with enabled(None if choice is None else choice.routes):
                return super().forward(graph, feat, get_attention=get_attention)
        if not self._allow_zero_in_degree and bool((graph.in_degrees() == 0).any()):
            raise DGLError(ZERO_IN_DEGREE)  # DGL's check and message, before any work
        return self._fused_forward(graph, feat, get_attention)

    def _choice(self, feat):
        """The shape rule of :func:`dgl_accel.policies.attention.choose_attention` for this layer."""
        like = feat[0] if isinstance(feat, tuple) else feat
        return choose_attention(self.attention_op, self._num_heads, self._out_feats, like)

