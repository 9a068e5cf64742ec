"""GraphSAINT node sets on the graph's device: :mod:`.draw`'s draws in torch ops, the same
sets for the same seed (the uniforms are :func:`~..rng.uniform53`'s, and every step after them is
exact float64 arithmetic, a ``searchsorted`` or a gather), and the pre-sampling counts of the
counted normalisation (:func:`.norm.count_inclusion`'s, with the subgraphs from
:func:`..induced.subgraph_device.induced_device`).

The tables are the host's (:class:`.draw.Tables` and the cumulative weights), copied to the
device once per graph by the caller: their float sums are numpy's sequential ones, which a
parallel scan on a GPU would round differently, and with them the draws.

Host reads: one per draw (the size of the distinct node set); the pre-sampling reads the covered
count once per pre-sample besides its draw and subgraph.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...csr import Structure
from ..induced.subgraph_device import HOST_READS as INDUCED_READS
from ..induced.subgraph_device import induced_device
from ..rng import uniform53
from .norm import check_presampling

__all__ = ["DeviceTables", "draw_node_device", "draw_edge_device", "draw_walk_device", "count_inclusion_device",
           "HOST_READS", "PRESAMPLE_READS"]

HOST_READS = 1                            # a draw's distinct node set
PRESAMPLE_READS = HOST_READS + INDUCED_READS + 1   # a pre-sample: its draw, its subgraph, its covered count


@dataclass(frozen=True, eq=False)
class DeviceTables:
    """:class:`.draw.Tables`' arrays a draw reads, on one device (int64 ids, float64 degrees)."""

    num_nodes: int
    src: torch.Tensor         # [E] source of each in-CSR position
    dst: torch.Tensor         # [E] destination of each in-CSR position
    walk_start: torch.Tensor  # [n]
    walk_deg: torch.Tensor    # [n] float64
    walk_next: torch.Tensor   # [E + dead ends]

    @classmethod
    def on(cls, t, device) -> DeviceTables:
        """The arrays of ``t`` (a :class:`.draw.Tables`) copied to ``device``."""
        put = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        return cls(t.csr.num_nodes, put(t.csr.indices).to(torch.int64), put(t.dst), put(t.walk_start),
                   put(t.walk_deg), put(t.walk_next))


def _search(cdf: torch.Tensor, seed: int, k: int) -> torch.Tensor:
    """``draw._search``: ``k`` weighted draws with replacement, sorted."""
    u = torch.sort(uniform53(seed, torch.arange(k, device=cdf.device))).values
    idx = torch.searchsorted(cdf, u * cdf[-1], right=True)  # zero-weight entries are never hit
    return idx.clamp_(max=cdf.shape[0] - 1)                  # u * total may round up to total


def draw_node_device(cdf: torch.Tensor, budget: int, seed: int) -> torch.Tensor:
    """Sorted distinct nodes of ``budget`` weighted draws with replacement (int64)."""
    return torch.unique_consecutive(_search(cdf, seed, budget))


def draw_edge_device(t: DeviceTables, cdf: torch.Tensor, budget: int, seed: int) -> torch.Tensor:
    """Sorted distinct end points of ``budget`` weighted edge draws with replacement (int64)."""
    pos = _search(cdf, seed, budget)
    return torch.unique(torch.cat([t.src[pos], t.dst[pos]]))


def draw_walk_device(t: DeviceTables, num_roots: int, length: int, seed: int) -> torch.Tensor:
    """Sorted distinct nodes visited by ``num_roots`` uniform-root walks of ``length`` hops (int64)."""
    u = uniform53(seed, torch.arange((length + 1) * num_roots, device=t.dst.device)).view(length + 1, num_roots)
    cur = (u[0] * t.num_nodes).to(torch.int64).clamp_(max=t.num_nodes - 1)
    visited = [cur]
    for s in range(length):
        deg = t.walk_deg[cur]
        pick = torch.minimum((u[s + 1] * deg).to(torch.int64), deg.to(torch.int64) - 1)  # u * deg can round up
        cur = t.walk_next[pick + t.walk_start[cur]].to(torch.int64)
        visited.append(cur)
    return torch.unique(torch.cat(visited))


def count_inclusion_device(csr: Structure, draw, train: torch.Tensor, coverage: float,
                           max_presample: int = 100_000):
    """:func:`.norm.count_inclusion` on the device: ``(C_v [n], C_uv [E] by edge id, N)``,
    int64 on the CSR's device; ``draw(i)`` gives pre-sample ``i``'s sorted distinct nodes there and
    ``train`` is the bool mask of the training nodes there."""
    c_node = torch.zeros(csr.num_rows, dtype=torch.int64, device=csr.device)
    c_edge = torch.zeros(csr.num_edges, dtype=torch.int64, device=csr.device)
    target = coverage * int(train.sum())
    covered, N = 0, 0
    while covered < target:
        nodes = draw(N)
        c_node[nodes] += 1  # nodes are distinct
        eids = induced_device(csr, nodes)[2]
        c_edge[eids] += 1   # and so are a subgraph's edges
        covered += int(train[nodes].sum())
        N += 1
        check_presampling(coverage, covered, N, target, max_presample)
    return c_node, c_edge, N
