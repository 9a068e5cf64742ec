"""Layer-wise importance samplers (FastGCN, ICLR'18; LADIES, NeurIPS'19) as DGL block samplers.

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
      (see :func:`ladies_probabilities`); recomputed per layer and per mini-batch.
    * FastGCN: ``p(u) ∝ sum_v Â[v, u]^2`` over the whole graph (see
      :func:`fastgcn_probabilities`); layer-independent, computed once per graph and cached
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

Block layout (DGL's ``to_block`` convention)
    dst nodes = ``V`` in the given order; src nodes = ``V`` first (same order), then the drawn
    nodes not in ``V`` in ascending id order; ``srcdata[dgl.NID]``/``dstdata[dgl.NID]`` are the
    original ids, ``edata[dgl.EID]`` the original edge ids.  Edges: every graph edge ``u -> v``
    with ``u`` drawn and ``v in V`` (minus ``exclude_eids``).  The dst nodes are in the src list
    only so each destination keeps its own row (``h_dst = h_src[:num_dst]``) and the blocks
    chain; a destination that was not itself drawn gets *no* extra self edge, so the weighted
    aggregation stays the plain importance-sampling estimator below.  The next layer's ``V`` is
    ``block.srcdata[dgl.NID]``.

Edge weights ``block.edata[weight]`` (float32), per edge ``e = (u -> v)``
    * with replacement: ``c(e) * n_u / (s * p(u))`` with ``n_u`` the number of times ``u`` was
      drawn (the LADIES/FastGCN estimator ``(1/s) sum_j Â[v,u_j] x_{u_j} / p(u_j)`` with repeats
      merged); ``E[sum_u w_uv x_u] = (Â x)[v]`` exactly;
    * without replacement: ``c(e) / min(1, s * p(u))``: ``s p(u)`` approximates ``u``'s inclusion
      probability and is clipped at 1 as in the LADIES reference code (nearly-certain nodes keep
      their true weight); when ``s`` covers every candidate, every candidate is taken and the
      weight is ``c(e)`` (the exact aggregation).  This is approximately, not exactly, unbiased.
"""
from __future__ import annotations

from typing import Optional, Sequence

import dgl
import torch
from dgl.dataloading import BlockSampler

from ..graph.structure import cached, check_graph, in_csr
from .rng import call_seed, philox_uniform

__all__ = [
    "LADIESSampler",
    "FastGCNSampler",
    "LayerSample",
    "ladies_probabilities",
    "fastgcn_probabilities",
    "edge_norm",
    "sample_layer_nodes",
    "call_seed",
]

NORMS = ("both", "right", "left", "none")
_MAX_NODES = 1 << 31


def _offsets(layer: int, kind: int, idx: torch.Tensor) -> torch.Tensor:
    return ((2 * layer + kind) << 32) | idx.to(torch.int64)


# ------------------------------------------------------------------------------ validation
def _check_graph(g) -> None:
    if not isinstance(g, dgl.DGLGraph):
        raise ValueError(f"expected a dgl.DGLGraph (got {type(g).__name__}). Fix: build one with dgl.graph(...).")
    check_graph(g)
    if g.is_block:
        raise ValueError("expected a homogeneous DGLGraph to sample from (got a block). "
                         "Fix: sample from the original graph, not from a sampled block.")
    if g.num_nodes() >= _MAX_NODES:
        raise ValueError(f"expected fewer than 2^31 nodes (got {g.num_nodes()}). "
                         "Fix: partition the graph; the counter layout keys draws by 31-bit node ids.")


def _check_norm(norm) -> str:
    if norm not in NORMS:
        raise ValueError(f"expected norm to be one of {NORMS} (got {norm!r}). Fix: pass e.g. norm='both'.")
    return norm


def _check_sizes(sizes) -> list[int]:
    if isinstance(sizes, (int, torch.Tensor)) or not isinstance(sizes, Sequence):
        raise ValueError(f"expected num_nodes_per_layer to be a list of positive ints, one per layer "
                         f"(got {sizes!r}). Fix: pass e.g. [512, 512].")
    sizes = list(sizes)
    if not sizes:
        raise ValueError("expected num_nodes_per_layer to name at least one layer (got []). "
                         "Fix: pass one positive node budget per GNN layer, e.g. [512, 512].")
    for i, s in enumerate(sizes):
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise ValueError(f"expected num_nodes_per_layer[{i}] to be a positive int (got {s!r}). "
                             "Fix: every layer needs a budget of at least one node.")
    return sizes


def _check_seed_nodes(g, seed_nodes) -> torch.Tensor:
    if isinstance(seed_nodes, dict):
        if len(seed_nodes) != 1 or next(iter(seed_nodes)) not in g.ntypes:
            raise ValueError(f"expected seed nodes of the graph's single node type {g.ntypes} "
                             f"(got keys {list(seed_nodes)}). Fix: pass a 1-D tensor of node ids.")
        seed_nodes = next(iter(seed_nodes.values()))
    seeds = torch.as_tensor(seed_nodes)
    if seeds.dtype in (torch.bool,) or seeds.is_floating_point() or seeds.is_complex() or seeds.dim() != 1:
        raise ValueError(f"expected seed nodes as a 1-D integer tensor (got dtype {seeds.dtype}, shape "
                         f"{tuple(seeds.shape)}). Fix: pass torch.tensor([...], dtype=torch.int64).")
    seeds = seeds.to(device=g.device, dtype=torch.int64)
    n = g.num_nodes()
    if seeds.numel():
        lo, hi = int(seeds.min()), int(seeds.max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise ValueError(f"expected seed node ids in [0, {n}) (got {bad}). "
                             "Fix: pass ids of nodes of this graph.")
        if torch.unique(seeds).numel() != seeds.numel():
            raise ValueError(f"expected distinct seed nodes (got {seeds.numel()} ids, "
                             f"{torch.unique(seeds).numel()} distinct). Fix: pass torch.unique(seeds).")
    return seeds


def _check_exclude(g, exclude_eids) -> Optional[torch.Tensor]:
    if exclude_eids is None:
        return None
    if isinstance(exclude_eids, dict):
        if len(exclude_eids) != 1:
            raise ValueError(f"expected excluded edge ids of the graph's single edge type "
                             f"(got keys {list(exclude_eids)}). Fix: pass a 1-D tensor of edge ids.")
        exclude_eids = next(iter(exclude_eids.values()))
    ex = torch.as_tensor(exclude_eids)
    if ex.is_floating_point() or ex.dim() != 1:
        raise ValueError(f"expected exclude_eids as a 1-D integer tensor (got dtype {ex.dtype}, shape "
                         f"{tuple(ex.shape)}). Fix: pass edge ids as an int64 tensor.")
    return ex.to(device=g.device, dtype=torch.int64)


# ----------------------------------------------------------------------- normalised adjacency
def _node_factors(g, norm: str):
    """(dst factor per node, src factor per node) in float64, cached per graph version."""

    def build(h):
        csr = in_csr(h)
        n = h.num_nodes()
        indeg = (csr.indptr[1:] - csr.indptr[:-1]).clamp(min=1).to(torch.float64)
        outdeg = torch.bincount(csr.indices.to(torch.int64), minlength=n).clamp(min=1).to(torch.float64)
        one = torch.ones(n, dtype=torch.float64, device=indeg.device)
        return {
            "both": (indeg.rsqrt(), outdeg.rsqrt()),
            "right": (1.0 / indeg, one),
            "left": (one, 1.0 / outdeg),
            "none": (one, one),
        }[norm]

    return cached(g, f"layer_sampler_factors:{norm}", build)


def edge_norm(g, norm: str = "both") -> torch.Tensor:
    """``c(e)`` for every edge of ``g`` in edge-id order (float64): the entries of ``Â``."""
    _check_graph(g)
    fd, fs = _node_factors(g, _check_norm(norm))
    src, dst = g.edges(order="eid")
    return fd[dst.long()] * fs[src.long()]


def _gather_in_edges(g, rows: torch.Tensor, exclude: Optional[torch.Tensor]):
    """In-edges of ``rows``: (row position in ``rows``, source id, edge id), grouped by row."""
    csr = in_csr(g)
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


def _column_sq_norms(row_key: torch.Tensor, src: torch.Tensor, c: torch.Tensor, n: int):
    """Merge parallel edges into entries Â[row, u], then sum Â^2 per column: (columns, sums)."""
    if src.numel() == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=src.device)
        return empty, torch.zeros(0, dtype=torch.float64, device=src.device)
    pairs, inv = torch.unique(row_key * n + src, return_inverse=True)  # row_key < 2^31, n < 2^31
    entry = torch.zeros(pairs.numel(), dtype=torch.float64, device=src.device).index_add_(0, inv, c)
    cols, cinv = torch.unique(pairs % n, return_inverse=True)
    sq = torch.zeros(cols.numel(), dtype=torch.float64, device=src.device).index_add_(0, cinv, entry * entry)
    return cols, sq


def _ladies_from_edges(g, row_pos, src, norm, dst_nodes):
    fd, fs = _node_factors(g, norm)
    c = fd[dst_nodes[row_pos]] * fs[src]
    cols, sq = _column_sq_norms(row_pos, src, c, g.num_nodes())
    total = sq.sum()
    p = sq / total if cols.numel() else sq
    return cols, p, c


def ladies_probabilities(g, dst_nodes, norm: str = "both", exclude_eids=None):
    """LADIES' layer distribution for destination set ``dst_nodes``: ``(candidates, p)`` with
    ``candidates`` the in-neighbours of ``dst_nodes`` in ascending id order and
    ``p[k] ∝ sum_{v in dst_nodes} Â[v, candidates[k]]^2`` (float64, sums to 1)."""
    _check_graph(g)
    norm = _check_norm(norm)
    v = _check_seed_nodes(g, dst_nodes)
    row_pos, src, _ = _gather_in_edges(g, v, _check_exclude(g, exclude_eids))
    cols, p, _ = _ladies_from_edges(g, row_pos, src, norm, v)
    return cols, p


def fastgcn_probabilities(g, norm: str = "both") -> torch.Tensor:
    """FastGCN's distribution over all nodes: ``p[u] ∝ ||Â[:, u]||^2`` (float64, cached per graph)."""
    _check_graph(g)
    norm = _check_norm(norm)

    def build(h):
        n = h.num_nodes()
        src, dst = h.edges(order="eid")
        src, dst = src.to(torch.int64), dst.to(torch.int64)
        fd, fs = _node_factors(h, norm)
        cols, sq = _column_sq_norms(dst, src, fd[dst] * fs[src], n)
        p = torch.zeros(n, dtype=torch.float64, device=src.device)
        p[cols] = sq
        return p / p.sum() if cols.numel() else p

    return cached(g, f"fastgcn_p:{norm}", build)


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
        u = philox_uniform(seed, _offsets(layer, 1, torch.arange(s, device=cand.device))).to(torch.float64)
        cdf = torch.cumsum(pc, 0)
        idx = torch.searchsorted(cdf, u * cdf[-1], right=True).clamp_(max=n - 1)
        nodes, counts = torch.unique(cand[idx], return_counts=True)
        return LayerSample(nodes, counts, False)
    if s >= n:
        return LayerSample(cand, torch.ones(n, dtype=torch.int64, device=cand.device), True)
    u = philox_uniform(seed, _offsets(layer, 0, cand)).to(torch.float64)
    keys = torch.log(u) / pc  # log(U^(1/p)); U == 0 gives -inf: drawn last
    order = torch.sort(keys, descending=True, stable=True).indices[:s]  # stable: ties -> lower id
    nodes = torch.sort(cand[order]).values
    return LayerSample(nodes, torch.ones(s, dtype=torch.int64, device=cand.device), False)


def _lookup(sorted_keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """values[k] where sorted_keys[k] == query (every query must be present)."""
    return values[torch.searchsorted(sorted_keys, query)]


def _member(sorted_keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    if sorted_keys.numel() == 0:
        return torch.zeros(query.shape, dtype=torch.bool, device=query.device)
    idx = torch.searchsorted(sorted_keys, query).clamp_(max=sorted_keys.numel() - 1)
    return sorted_keys[idx] == query


def layer_block(g, v, row_pos, src, eid, w, weight: str):
    """The block of one layer (module docstring's layout) from its kept edges: destination
    position ``row_pos`` in ``v``, source id, edge id and weight per edge.  Returns (block, src nodes)."""
    # Src nodes: V first, then drawn nodes with an edge into V that are not in V (ascending).
    used = torch.unique(src)
    v_sorted, v_perm = torch.sort(v)
    new = used[~_member(v_sorted, used)]
    src_nodes = torch.cat([v, new])
    all_sorted, all_perm = torch.sort(src_nodes)
    src_local = all_perm[torch.searchsorted(all_sorted, src)]
    block = dgl.create_block((src_local, row_pos), num_src_nodes=src_nodes.numel(), num_dst_nodes=v.numel(),
                             idtype=g.idtype, device=g.device)
    block.srcdata[dgl.NID] = src_nodes.to(g.idtype)
    block.dstdata[dgl.NID] = v.to(g.idtype)
    block.edata[dgl.EID] = eid.to(g.idtype)
    block.edata[weight] = w.to(torch.float32)
    return block, src_nodes


class _LayerSampler(BlockSampler):
    _kind = "layer"

    def __init__(self, num_nodes_per_layer, weight: str = "w", replace: bool = False, seed: Optional[int] = None,
                 norm: str = "both", prefetch_node_feats=None, prefetch_labels=None, prefetch_edge_feats=None,
                 output_device=None):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        self.num_nodes_per_layer = _check_sizes(num_nodes_per_layer)
        if not isinstance(weight, str) or not weight:
            raise ValueError(f"expected weight to be a non-empty edge-feature name (got {weight!r}). Fix: e.g. 'w'.")
        if not isinstance(replace, bool):
            raise ValueError(f"expected replace to be a bool (got {replace!r}). Fix: pass True or False.")
        if seed is None:
            seed = int(torch.randint(0, 2**62, ()).item())
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"expected seed to be None or an int in [0, 2^64) (got {seed!r}). Fix: e.g. seed=0.")
        self.weight, self.replace, self.seed, self.norm = weight, replace, seed, _check_norm(norm)
        self.call_index = 0

    def reset(self, call_index: int = 0) -> None:
        """Rewind the call counter: the next calls repeat the blocks of calls ``call_index, ...``."""
        self.call_index = call_index

    def _distribution(self, g, v, row_pos, src):
        """(candidates ascending, p over them, c(e) per gathered edge)."""
        raise NotImplementedError

    def _layer(self, g, v, layer, s, key, exclude):
        row_pos, src, eid = _gather_in_edges(g, v, exclude)
        cand, p, c = self._distribution(g, v, row_pos, src)
        drawn = sample_layer_nodes(cand, p, s, replace=self.replace, seed=key, layer=layer)
        keep = _member(drawn.nodes, src)
        row_pos, src, eid, c = row_pos[keep], src[keep], eid[keep], c[keep]
        if self.replace:
            w = c * _lookup(drawn.nodes, drawn.counts, src).to(torch.float64) / (s * _lookup(cand, p, src))
        elif drawn.full:
            w = c
        else:
            w = c / torch.clamp(s * _lookup(cand, p, src), max=1.0)
        return layer_block(g, v, row_pos, src, eid, w, self.weight)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        _check_graph(g)
        seeds = _check_seed_nodes(g, seed_nodes)
        exclude = _check_exclude(g, exclude_eids)
        info = torch.utils.data.get_worker_info()
        key = call_seed(self.seed, self.call_index, info.id if info is not None else 0)
        self.call_index += 1
        v, blocks = seeds, []
        for layer in reversed(range(len(self.num_nodes_per_layer))):
            block, v = self._layer(g, v, layer, self.num_nodes_per_layer[layer], key, exclude)
            blocks.insert(0, block)
        if self.output_device is not None:
            blocks = [b.to(self.output_device) for b in blocks]
        out_seeds = seeds.to(g.idtype)
        input_nodes = blocks[0].srcdata[dgl.NID]
        return input_nodes, out_seeds, blocks

    def __repr__(self):
        return (f"{type(self).__name__}(num_nodes_per_layer={self.num_nodes_per_layer}, weight={self.weight!r}, "
                f"replace={self.replace}, seed={self.seed}, norm={self.norm!r})")


class LADIESSampler(_LayerSampler):
    """Layer-dependent importance sampling (Zou et al., NeurIPS'19).

    ``num_nodes_per_layer[i]`` is the node budget of ``blocks[i]`` (input layer first, like DGL's
    ``fanouts``).  Per layer, ``p(u) ∝ sum_{v in V} Â[v, u]^2`` over the in-neighbours of the
    layer's destinations ``V``; see the module docstring for ``Â``, the random-number layout, the
    block layout and the edge weights ``block.edata[weight]``.
    """

    def __init__(self, num_nodes_per_layer, weight: str = "w", replace: bool = False, seed: Optional[int] = None,
                 norm: str = "both", prefetch_node_feats=None, prefetch_labels=None, prefetch_edge_feats=None,
                 output_device=None, bulk: Optional[int] = None, spgemm=None):
        super().__init__(num_nodes_per_layer, weight=weight, replace=replace, seed=seed, norm=norm,
                         prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        # bulk=k: matrix-based bulk sampling (dgl_accel/sampling/bulk_ladies.py): k minibatches per
        # pass, drawn by inverse transform sampling (same distribution, other random stream than the
        # node-at-a-time path above).  None keeps the node-at-a-time path.
        self.bulk = None
        if bulk is not None or spgemm is not None:
            from .bulk_ladies import BulkLADIES

            self.bulk = BulkLADIES(self, 1 if bulk is None else bulk, spgemm)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        if self.bulk is None:
            return super().sample_blocks(g, seed_nodes, exclude_eids)
        return self.bulk.sample_blocks(g, seed_nodes, exclude_eids)

    def _distribution(self, g, v, row_pos, src):
        return _ladies_from_edges(g, row_pos, src, self.norm, v)


class FastGCNSampler(_LayerSampler):
    """FastGCN (Chen et al., ICLR'18): layer-independent ``p(u) ∝ ||Â[:, u]||^2`` over the whole
    graph, computed once per graph and cached.  Nodes are drawn from all nodes with ``p > 0``;
    drawn nodes with no edge into ``V`` are dropped (they would contribute nothing).  Same
    arguments, block layout and weights as :class:`LADIESSampler`.
    """

    def _distribution(self, g, v, row_pos, src):
        p = fastgcn_probabilities(g, self.norm)
        fd, fs = _node_factors(g, self.norm)
        cand = torch.arange(p.numel(), device=p.device)
        return cand, p, fd[v[row_pos]] * fs[src]
