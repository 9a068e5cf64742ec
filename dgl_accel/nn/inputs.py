"""The input checks of the drop-ins' own paths: a drop-in takes its path only for the inputs that
path computes exactly as DGL's forward would; anything else takes DGL's forward (and DGL's errors)."""
from __future__ import annotations

import contextlib

import torch

from ..graph.structure import is_supported_graph


def plain_features(graph, feat) -> bool:
    """A graph of one relation the fused ops support, and features (or a pair) of 2-D float tensors."""
    if not is_supported_graph(graph, relation=True):
        return False
    feats = feat if isinstance(feat, tuple) else (feat,)
    return all(isinstance(f, torch.Tensor) and f.dim() == 2 and f.is_floating_point() for f in feats)


def one_tensor_on_sources(graph, feat, width: int, *, blocks: bool) -> bool:
    """One 2-D float tensor of ``width`` columns and a row per source, on a graph of one relation
    whose destinations are its first sources: as many of both, or (``blocks``) any block."""
    return (isinstance(feat, torch.Tensor) and feat.dim() == 2 and feat.is_floating_point()
            and feat.shape[1] == width and is_supported_graph(graph, relation=True)
            and ((blocks and graph.is_block) or graph.num_src_nodes() == graph.num_dst_nodes())
            and feat.shape[0] == graph.num_src_nodes())


def feature_pair(graph, feat) -> bool:
    """A pair (source features, destination features) of 2-D float tensors with a row per source
    and per destination of a graph of one relation the fused ops support."""
    return (isinstance(feat, tuple) and len(feat) == 2 and plain_features(graph, feat)
            and feat[0].shape[0] == graph.num_src_nodes() and feat[1].shape[0] == graph.num_dst_nodes())


def one_weight_per_edge(graph, edge_weight) -> bool:
    """No edge weights, or a 1-D tensor of one per edge."""
    return edge_weight is None or (isinstance(edge_weight, torch.Tensor) and edge_weight.dim() == 1
                                   and edge_weight.shape[0] == graph.num_edges())


class _Widened(torch.nn.Module):
    """A projection whose output is widened to fp32 (it runs in the autocast dtype as before)."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        out = self.inner(x)
        return out.float() if out.dtype in (torch.float16, torch.bfloat16) else out


@contextlib.contextmanager
def widened_projections(module: torch.nn.Module, choice):
    """Inside: the attention module's projections (``fc``, ``fc_src``, ``fc_dst``) give fp32 outputs
    when ``choice.widen`` says so (DGL's forward under autocast on the routed ops); restored after,
    also on an error.  The parameters and ``state_dict`` are untouched."""
    if choice is None or not getattr(choice, "widen", False):
        yield
        return
    names = [n for n in ("fc", "fc_src", "fc_dst") if isinstance(module._modules.get(n), torch.nn.Module)]
    saved = {n: module._modules[n] for n in names}
    try:
        for n in names:
            module._modules[n] = _Widened(saved[n])
        yield
    finally:
        module._modules.update(saved)
