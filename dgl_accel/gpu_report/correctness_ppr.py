"""The PPR device pipeline (``core/sampling/shadow/ppr_device.py`` and its kernel ``kernels/ppr.py``,
shaDow-GNN's PPR scope) on the report's device against the numpy reference
(``ppr_node_sets(..., compiled=False)`` on the CPU): the same node sets and the same push estimates
bit for bit (the kernel adds residuals in the CPU's order, ``core/sampling/shadow/ppr.py``).
One check each for int32 and int64 neighbour ids, targets with a hub among them,
``topk`` the node count so every positive estimate is compared."""
from __future__ import annotations

import dataclasses

import torch

from ..core.backend import use_backend
from ..core.sampling.shadow.ppr import ppr_node_sets
from .correctness_sampling import assert_same, structure
from .graphs import Graph

ALPHA = 0.15


def _sets(g: Graph, device, idtype, targets: torch.Tensor, eps: float):
    s = structure(g, device)
    s = dataclasses.replace(s, indices=s.indices.to(idtype), eids=s.eids.to(idtype))
    return tuple(ppr_node_sets(s, targets, topk=g.num_nodes, alpha=ALPHA, eps=eps, compiled=False))


def run(checks, g: Graph, device, tiny: bool) -> None:
    degree = torch.bincount(g.dst.cpu(), minlength=g.num_nodes)
    hub = int(degree.argmax())
    gen = torch.Generator().manual_seed(19)
    targets = torch.cat([torch.tensor([hub, hub]), torch.randint(g.num_nodes, (2 if tiny else 30,), generator=gen)])
    eps = 1e-3 if tiny else 1e-5  # tiny: fewer push rounds for the interpreter; full: shaDow-GNN's eps
    for idtype in (torch.int32, torch.int64):
        def check(idtype=idtype):
            ours = _sets(g, device, idtype, targets, eps)
            with use_backend("native"):
                ref = _sets(g, "cpu", idtype, targets, eps)
            assert_same(ours, ref, "PPR sets (offsets, nodes, target_pos, scores)")
        checks.run("ppr", f"{g.name} {str(idtype)[6:]} {targets.numel()} targets eps={eps:g}", check)
