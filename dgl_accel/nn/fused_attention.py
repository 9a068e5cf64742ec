"""The forward shared by the drop-in attention modules whose aggregation one fused op does
(:mod:`.dotgatconv`, :mod:`.gatv2conv`): DGL's own forward where the fused op does not compute exactly
what it would, else DGL's zero-in-degree check (its message, before any work) and the module's fused
forward."""
from __future__ import annotations

import torch
from dgl.base import DGLError

from ..graph.structure import is_supported_graph
from ..patching import enabled
from .gatconv import ZERO_IN_DEGREE


class FusedAttentionForward:
    """A mixin before the DGL module in the bases; the module defines ``_fused_applies(graph, feat)``
    and ``_fused_forward(graph, feat, get_attention)``."""

    def forward(self, graph, feat, get_attention=False):
        if not self._fused_applies(graph, feat):
            with enabled():
                return super().forward(graph, feat, get_attention=get_attention)
        if not self._allow_zero_in_degree and bool((graph.in_degrees() == 0).any()):
            raise DGLError(ZERO_IN_DEGREE)  # DGL's check and message, before any work
        return self._fused_forward(graph, feat, get_attention)


def plain_features(graph, feat) -> bool:
    """A graph of one relation the fused ops support, and features (or a pair) of 2-D float tensors."""
    if not is_supported_graph(graph, relation=True):
        return False
    feats = feat if isinstance(feat, tuple) else (feat,)
    return all(isinstance(f, torch.Tensor) and f.dim() == 2 and f.is_floating_point() for f in feats)
