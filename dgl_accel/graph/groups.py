"""Neighbour groups of a DGL graph's CSR views, cached per (graph, direction, gs); see dgl_accel.core.groups."""
from __future__ import annotations

from ..core.groups import Groups, build_groups
from .structure import cached, in_csr, out_csr

__all__ = ["Groups", "build_groups", "groups_for"]


def groups_for(g, direction: str, gs: int) -> Groups:
    """Cached groups of ``in_csr(g)`` (``"in"``: forward) or ``out_csr(g)`` (``"out"``: backward)."""
    structure = in_csr(g) if direction == "in" else out_csr(g)
    return cached(g, f"groups_{direction}_{gs}", lambda _: build_groups(structure, gs))
