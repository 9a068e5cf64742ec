"""Layer-wise importance sampling (FastGCN, ICLR'18; LADIES, NeurIPS'19): the DGL-free maths of
:class:`dgl_accel.sampling.LADIESSampler` and :class:`dgl_accel.sampling.FastGCNSampler` (the
normalised adjacency, the layer distributions, the node draws and the edge weights), on CSR views.

Both samplers build one block per GNN layer, from the output layer backwards, exactly like
:class:`dgl.dataloading.NeighborSampler` does, but instead of drawing ``fanout`` neighbours per
destination they draw ``s = num_nodes_per_layer[i]`` source nodes *for the whole layer* and keep
every edge from a drawn node into the layer's destination set ``V``.

Normalised adjacency
    ``Â[v, u] = sum over edges e = (u -> v) of c(e)`` with, like ``dgl.nn.GraphConv``'s ``norm``:

    * ``"both"``:  ``c(e) = 1 / sqrt(d_in(v) * d_out(u))``
    * ``"right"``: ``c(e) = 1 / d_in(v)``
    * ``"left"``:  ``c(e) = 1 / d_out(u)``
    * ``"none"``:  ``c(e) = 1``

    Degrees are those of the *full* graph (parallel edges counted, ``exclude_eids`` ignored) and
    clamped to ``>= 1`` (as GraphConv does), which only matters for nodes without edges, whose
    columns/rows of ``Â`` are empty anyway.  Self-loops are ordinary edges: for GCN's
    ``Ã = A + I`` call ``dgl.add_self_loop(g)`` before sampling.

Sampling probabilities
    * LADIES: ``p(u) ∝ sum_{v in V} Â[v, u]^2`` over the in-neighbours ``u`` of the current ``V``
      (see :func:`ladies_from_edges`); recomputed per layer and per mini-batch.
    * FastGCN: ``p(u) ∝ sum_v Â[v, u]^2`` over the whole graph (see
      :func:`fastgcn_from_edges`); layer-independent, computed once per graph and cached
      (the cache is dropped when the graph is mutated in place).  Drawn nodes without an edge into
      ``V`` contribute nothing to any destination and are dropped from the block.

Random numbers (counter layout)
    Every draw is ``philox_uniform(call_seed, offset)`` with a 64-bit counter
    ``offset = ((2 * layer + kind) << 32) | idx`` where ``layer`` is the block index ``i``
    (``blocks[i]``, 0 = input layer, as ``num_nodes_per_layer`` is indexed), and

    * ``kind = 0``, ``idx = node id``: the Efraimidis-Spirakis key of node ``idx`` (without
      replacement): ``key(u) = log(U_u) / p(u)``, the ``s`` largest keys win (ties: lower id);
    * ``kind = 1``, ``idx = j``: the ``j``-th inverse-CDF draw (with replacement) over the
      candidates in ascending id order.

    So a layer's sample depends only on (call seed, layer, the *set* ``V``), never on the order
    of the seeds or on how edges are stored.  ``call_seed = mix(seed, call_index, worker id)``
    (splitmix64), where ``call_index`` counts this sampler's ``sample_blocks`` calls (``reset()``
    rewinds it) and the worker id is that of a ``torch.utils.data`` worker (0 in the main
    process).  Two samplers built with the same ``seed`` return the same blocks call for call.
    ``seed=None`` draws the base seed from torch's global generator at construction, so
    ``torch.manual_seed`` makes it reproducible too.  Node ids must be ``< 2^31``.

Edge weights (the blocks' ``edata[weight]``, float32), per kept edge ``e = (u -> v)`` (:func:`layer_weights`)
    * with replacement: ``c(e) * n_u / (s * p(u))`` with ``n_u`` the number of times ``u`` was
      drawn (the LADIES/FastGCN estimator ``(1/s) sum_j Â[v,u_j] x_{u_j} / p(u_j)`` with repeats
      merged); ``E[sum_u w_uv x_u] = (Â x)[v]`` exactly;
    * without replacement: ``c(e) / min(1, s * p(u))``: ``s p(u)`` approximates ``u``'s inclusion
      probability and is clipped at 1 as in the LADIES reference code (nearly-certain nodes keep
      their true weight); when ``s`` covers every candidate, every candidate is taken and the
      weight is ``c(e)`` (the exact aggregation).  This is approximately, not exactly, unbiased.

>>> drawn = sample_layer_nodes(torch.tensor([3, 5, 8]), torch.tensor([0.5, 0.0, 0.5]), 2, replace=False,
...                            seed=0, layer=0)
>>> drawn.nodes.tolist(), drawn.full      # node 5 has p = 0: never drawn
([3, 8], True)
"""
from __future__ import annotations

import torch

from ...csr import Structure
from ..rng import philox_uniform

__all__ = ["NORMS", "layer_offsets", "node_factors", "gather_in_edges", "column_sq_norms", "ladies_from_edges",
           "fastgcn_from_edges", "LayerSample", "sample_layer_nodes", "lookup", "member", "layer_weights"]

NORMS = ("both", "right", "left", "none")


def layer_offsets(layer: int, kind: int, idx: torch.Tensor) -> torch.Tensor:
    """Philox counters ``((2 * layer + kind) << 32) | idx`` (module docstring)."""
    return ((2 * layer + kind) << 32) | idx.to(torch.int64)


# ----------------------------------------------------------------------- normalised adjacency
def node_factors(csr: Structure, norm: str):
    """(dst factor per node, src factor per node) in float64 of ``c(e) = dst[v] * src[u]`` for the
    in-CSR ``csr`` of a graph (degrees of the full graph, clamped at 1)."""
    n = csr.num_rows
    indeg = (csr.indptr[1:] - csr.indptr[:-1]).clamp(min=1).to(torch.float64)
    outdeg = torch.bincount(csr.indices.to(torch.int64), minlength=n).clamp(min=1).to(torch.float64)
    one = torch.ones(n, dtype=torch.float64, device=indeg.device)
    return {
        "both": (indeg.rsqrt(), outdeg.rsqrt()),
        "right": (1.0 / indeg, one),
        "left": (one, 1.0 / outdeg),
        "none": (one, one),
    }[norm]


def gather_in_edges(csr: Structure, rows: torch.Tensor, exclude: torch.Tensor | None):
    """In-edges of ``rows``: (row position in ``rows``, source id, edge id), grouped by row, minus
    the edge ids ``exclude``."""
    start = csr.indptr[rows]
    cnt = csr.indptr[rows + 1] - start
    total = int(cnt.sum()) if rows.numel() else 0
    dev = rows.device
    ends = torch.cumsum(cnt, 0)
    k = torch.arange(total, device=dev)
    # row of the k-th gathered edge (torch.repeat_interleave costs ~8 ms per call on CPU here)
    row_pos = torch.searchsorted(ends, k, right=True)
    pos = start[row_pos] + k - (ends - cnt)[row_pos]
    src = csr.indices[pos].to(torch.int64)
    eid = csr.eids[pos].to(torch.int64)
    if exclude is not None and exclude.numel() and total:
        keep = ~torch.isin(eid, exclude)
        row_pos, src, eid = row_pos[keep], src[keep], eid[keep]
    return row_pos, src, eid


def column_sq_norms(row_key: torch.Tensor, src: torch.Tensor, c: torch.Tensor, n: int):
    """Merge parallel edges into entries Â[row, u], then sum Â^2 per column: (columns, sums)."""
    if src.numel() == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=src.device)
        return empty, torch.zeros(0, dtype=torch.float64, device=src.device)
    pairs, inv = torch.unique(row_key * n + src, return_inverse=True)  # row_key < 2^31, n < 2^31
    entry = torch.zeros(pairs.numel(), dtype=torch.float64, device=src.device).index_add_(0, inv, c)
    cols, cinv = torch.unique(pairs % n, return_inverse=True)
    sq = torch.zeros(cols.numel(), dtype=torch.float64, device=src.device).index_add_(0, cinv, entry * entry)
    return cols, sq


def ladies_from_edges(factors, row_pos, src, dst_nodes, n: int):
    """LADIES' distribution from the gathered in-edges of ``dst_nodes``: ``(candidates ascending,
    p over them (float64, sums to 1), c(e) per edge)``; ``factors``: :func:`node_factors`."""
    fd, fs = factors
    c = fd[dst_nodes[row_pos]] * fs[src]
    cols, sq = column_sq_norms(row_pos, src, c, n)
    total = sq.sum()
    p = sq / total if cols.numel() else sq
    return cols, p, c


def fastgcn_from_edges(src: torch.Tensor, dst: torch.Tensor, factors, n: int) -> torch.Tensor:
    """FastGCN's distribution over all ``n`` nodes from every edge (``src``, ``dst`` int64):
    ``p[u] ∝ ||Â[:, u]||^2`` (float64)."""
    fd, fs = factors
    cols, sq = column_sq_norms(dst, src, fd[dst] * fs[src], n)
    p = torch.zeros(n, dtype=torch.float64, device=src.device)
    p[cols] = sq
    return p / p.sum() if cols.numel() else p


# ---------------------------------------------------------------------------------- sampling
class LayerSample:
    """Drawn nodes of one layer: ascending ``nodes``, their draw ``counts`` (1 without
    replacement), and ``full`` (without replacement, the budget covered every candidate)."""

    __slots__ = ("nodes", "counts", "full")

    def __init__(self, nodes, counts, full):
        self.nodes, self.counts, self.full = nodes, counts, full


def sample_layer_nodes(candidates: torch.Tensor, p: torch.Tensor, s: int, *, replace: bool, seed: int,
                       layer: int) -> LayerSample:
    """Draw ``s`` nodes from ``candidates`` (ascending ids) with probabilities ``p`` using the
    counter layout in the module docstring.  Candidates with ``p == 0`` are never drawn."""
    pos = p > 0
    cand, pc = candidates[pos].to(torch.int64), p[pos].to(torch.float64)
    n = cand.numel()
    if n == 0:
        return LayerSample(cand, torch.zeros(0, dtype=torch.int64, device=cand.device), True)
    if replace:
        u = philox_uniform(seed, layer_offsets(layer, 1, torch.arange(s, device=cand.device))).to(torch.float64)
        cdf = torch.cumsum(pc, 0)
        idx = torch.searchsorted(cdf, u * cdf[-1], right=True).clamp_(max=n - 1)
        nodes, counts = torch.unique(cand[idx], return_counts=True)
        return LayerSample(nodes, counts, False)
    if s >= n:
        return LayerSample(cand, torch.ones(n, dtype=torch.int64, device=cand.device), True)
    u = philox_uniform(seed, layer_offsets(layer, 0, cand)).to(torch.float64)
    keys = torch.log(u) / pc  # log(U^(1/p)); U == 0 gives -inf: drawn last
    order = torch.sort(keys, descending=True, stable=True).indices[:s]  # stable: ties -> lower id
    nodes = torch.sort(cand[order]).values
    return LayerSample(nodes, torch.ones(s, dtype=torch.int64, device=cand.device), False)


def lookup(sorted_keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """values[k] where sorted_keys[k] == query (every query must be present)."""
    return values[torch.searchsorted(sorted_keys, query)]


def member(sorted_keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    if sorted_keys.numel() == 0:
        return torch.zeros(query.shape, dtype=torch.bool, device=query.device)
    idx = torch.searchsorted(sorted_keys, query).clamp_(max=sorted_keys.numel() - 1)
    return sorted_keys[idx] == query


def layer_weights(c, src, drawn: LayerSample, cand, p, s: int, replace: bool):
    """Edge weights of the kept edges (module docstring): ``c(e)`` and the source ``src`` per edge,
    the layer's draw, its candidates (ascending) with probabilities ``p``, the budget ``s``."""
    if replace:
        return c * lookup(drawn.nodes, drawn.counts, src).to(torch.float64) / (s * lookup(cand, p, src))
    if drawn.full:
        return c
    return c / torch.clamp(s * lookup(cand, p, src), max=1.0)
