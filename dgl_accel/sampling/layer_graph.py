"""The DGL side of the layer-wise samplers (:mod:`dgl_accel.sampling.layer` and its bulk engine
:mod:`dgl_accel.sampling.bulk_ladies`): argument checks against a graph, and the graph's cached
normalisation factors and in-edge gathers (the maths are in :mod:`dgl_accel.core.sampling.layer.importance`)."""
from __future__ import annotations

import torch

from ..core.sampling.checks import check_below, check_choice, check_nodes, expected, single_type_seeds
from ..core.sampling.layer import importance as core
from ..graph.structure import cached, in_csr
from .blocks import check_homogeneous

__all__ = ["check_layer_graph", "check_norm", "layer_seed_nodes", "layer_exclude", "node_factors",
           "gather_in_edges"]

_MAX_NODES = 1 << 31


def check_layer_graph(g) -> None:
    """A homogeneous graph (not a block) with fewer than 2^31 nodes (the counters key by node id)."""
    check_homogeneous(g, "sample from a homogeneous DGLGraph (dgl.to_homogeneous(g)), not from a sampled block.")
    check_below("the number of nodes", g.num_nodes(), "2^31", _MAX_NODES,
                "partition the graph; the counter layout keys draws by 31-bit node ids.")


def check_norm(norm) -> str:
    return check_choice(norm, "norm", core.NORMS)


def layer_seed_nodes(g, seed_nodes) -> torch.Tensor:
    """Distinct seed ids of ``g`` as int64 on the graph's device."""
    seeds = single_type_seeds(seed_nodes, g.ntypes)
    check_nodes(seeds, g.num_nodes(), "seed node ids", distinct=True)
    return seeds.to(device=g.device, dtype=torch.int64)


def layer_exclude(g, exclude_eids) -> torch.Tensor | None:
    """DGL's ``exclude_eids`` (a tensor, or a dict with the one edge type) as int64 on the graph's device."""
    if exclude_eids is None:
        return None
    if isinstance(exclude_eids, dict):
        if len(exclude_eids) != 1:
            raise expected("excluded edge ids of the graph's single edge type", f"keys {list(exclude_eids)}",
                           "pass a 1-D tensor of edge ids.")
        exclude_eids = next(iter(exclude_eids.values()))
    ex = torch.as_tensor(exclude_eids)
    if ex.is_floating_point() or ex.dim() != 1:
        raise expected("exclude_eids as a 1-D integer tensor", f"dtype {ex.dtype}, shape {tuple(ex.shape)}",
                       "pass edge ids as an int64 tensor.")
    return ex.to(device=g.device, dtype=torch.int64)


def node_factors(g, norm: str):
    """:func:`dgl_accel.core.sampling.layer.importance.node_factors` of ``g`` (cached per graph version)."""
    return cached(g, f"layer_sampler_factors:{norm}", lambda h: core.node_factors(in_csr(h), norm))


def gather_in_edges(g, rows: torch.Tensor, exclude: torch.Tensor | None):
    """:func:`dgl_accel.core.sampling.layer.importance.gather_in_edges` on ``g``'s in-CSR."""
    return core.gather_in_edges(in_csr(g), rows, exclude)
