"""The result of :func:`reduce_redundancy`: pre-add schedule, rewritten graph, and its savings.

Definitions (GraphACT, Zeng & Prasanna FPGA'20, Sec. "redundancy reduction"; Zeng's thesis), for
the aggregation h_v = sum_{u in N(v)} x_u with E edges, of which every edge reads one source
feature vector and every non-empty target folds its d_v vectors with d_v - 1 additions:

* original:  reads R0 = E,           additions A0 = E - |{v : d_v >= 1}|
* rewritten: reads R1 = 2P + E',     additions A1 = P + E' - |{v : d'_v >= 1}|

where P is the number of pair nodes (each pre-add p = x_a + x_b reads two vectors and adds once)
and E' the edge count of the rewritten graph (its targets are non-empty exactly where the
original ones were: a rewrite replaces two edges by one).  Then

    gamma_read = R0 / R1        gamma_add = A0 / A1

both "original over rewritten", so > 1 means the rewrite saves work (1.0 when there is nothing
to count).  A pair shared by c targets saves c - 1 additions but only c - 2 reads, which is why
theta = 2 can improve gamma_add while leaving gamma_read unchanged.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..aggregation.views import TensorGraph
from .aggregate import aggregate

__all__ = ["RedundancyPlan", "RoundStats"]


@dataclass(frozen=True)
class RoundStats:
    pairs: int               # pair nodes added in this round
    candidate_pairs: int     # pairs with count >= theta among the candidate sources
    candidate_sources: int   # sources the pair count was restricted to
    restricted: bool         # True when the work budget cut candidate sources (see pairs.py)


@dataclass(eq=False)
class RedundancyPlan:
    """Pre-add schedule + rewritten graph of one graph's aggregation.

    Pair node ``num_src + i`` is ``pair_a[i] + pair_b[i]`` (ids of original sources or earlier pair
    nodes); round r's pairs are ``round_bounds[r]:round_bounds[r + 1]`` and only read earlier
    rows.  ``rewritten`` is the rewritten graph (a bipartite
    :class:`~dgl_accel.core.aggregation.views.TensorGraph`) with ``num_src + P`` sources and the original
    ``num_dst`` targets; ``pair_count[i]`` targets read pair node i.  Degrees are the ORIGINAL graph's.
    """

    num_src: int
    num_dst: int
    num_edges: int
    pair_a: torch.Tensor
    pair_b: torch.Tensor
    pair_count: torch.Tensor
    round_bounds: tuple
    rewritten: object
    in_degrees: torch.Tensor
    out_degrees: torch.Tensor
    theta: int
    rounds: tuple
    transform_seconds: float
    # (src, dst, num_src, num_dst) -> the GraphViews the rewritten graph aggregates on; None: a TensorGraph.
    # A host library's adapter passes its own (the DGL adapter: DGL's compiled CPU SpMM)
    make_views: Callable | None = field(default=None, repr=False)
    _on_device: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ counts
    @property
    def num_pair_nodes(self) -> int:
        return int(self.pair_a.numel())

    @property
    def num_edges_rewritten(self) -> int:
        return int(self.rewritten.num_edges)

    @property
    def nonempty_targets(self) -> int:
        return int((self.in_degrees > 0).sum())

    @property
    def reads_original(self) -> int:
        return self.num_edges

    @property
    def adds_original(self) -> int:
        return self.num_edges - self.nonempty_targets

    @property
    def reads_rewritten(self) -> int:
        return 2 * self.num_pair_nodes + self.num_edges_rewritten

    @property
    def adds_rewritten(self) -> int:
        return self.num_pair_nodes + self.num_edges_rewritten - self.nonempty_targets

    @property
    def gamma_read(self) -> float:
        return self.reads_original / self.reads_rewritten if self.reads_rewritten else 1.0

    @property
    def gamma_add(self) -> float:
        return self.adds_original / self.adds_rewritten if self.adds_rewritten else 1.0

    def summary(self) -> dict:
        return {"edges": self.num_edges, "edges_rewritten": self.num_edges_rewritten,
                "pair_nodes": self.num_pair_nodes, "rounds": len(self.rounds),
                "gamma_read": self.gamma_read, "gamma_add": self.gamma_add,
                "transform_seconds": self.transform_seconds}

    # ------------------------------------------------------------------ execution
    def on(self, device: torch.device):
        """(rewritten graph, pair_a, pair_b) on ``device``, moved once and kept (with the graph's own
        per-graph caches: its CSRs and groups are built once per device)."""
        key = str(device)
        if key not in self._on_device:
            src, dst = (t.to(device) for t in self.rewritten.edges_by_id())
            ns, nd = self.rewritten.num_src, self.rewritten.num_dst
            if self.make_views is not None:
                views = self.make_views(src, dst, ns, nd)
            elif torch.device(device).type == "cpu":
                views = self.rewritten
            else:
                views = TensorGraph(src, dst, num_src=ns, num_dst=nd)
            self._on_device[key] = (views, self.pair_a.to(device), self.pair_b.to(device))
        return self._on_device[key]

    def aggregate(self, feat: torch.Tensor, reduce: str = "sum", norm: str | None = None) -> torch.Tensor:
        """sum / mean / GCN-normalised aggregation of ``feat`` through the plan (differentiable)."""
        return aggregate(self, feat, reduce=reduce, norm=norm)
