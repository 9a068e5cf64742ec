"""Layer-wise importance samplers (FastGCN, ICLR'18; LADIES, NeurIPS'19) as DGL block samplers.

Both samplers build one block per GNN layer, from the output layer backwards, exactly like
:class:`dgl.dataloading.NeighborSampler` does, but instead of drawing ``fanout`` neighbours per
destination they draw ``s = num_nodes_per_layer[i]`` source nodes *for the whole layer* and keep
every edge from a drawn node into the layer's destination set ``V``.  The normalised adjacency,
the distributions, the random-number layout and the edge weights are specified in
:mod:`dgl_accel.core.sampling.layer.importance`.

Seeds: ``call_seed = mix(seed, calls, worker id)`` (splitmix64), where ``calls`` (also named
``call_index``) counts this sampler's ``sample_blocks`` calls (``reset()`` rewinds it; the counter is
the core's :class:`~dgl_accel.core.sampling.seeds.CallSeeds`) and the worker id is that of a
``torch.utils.data`` worker (0 in the main process).  Two samplers built with the same ``seed``
return the same blocks call for call.  ``seed=None`` draws the base seed from torch's global
generator at construction, so ``torch.manual_seed`` makes it reproducible too.

Block layout (DGL's ``to_block`` convention)
    dst nodes = ``V`` in the given order; src nodes = ``V`` first (same order), then the drawn
    nodes not in ``V`` in ascending id order; ``srcdata[dgl.NID]``/``dstdata[dgl.NID]`` are the
    original ids, ``edata[dgl.EID]`` the original edge ids, ``edata[weight]`` the edge weights.
    Edges: every graph edge ``u -> v`` with ``u`` drawn and ``v in V`` (minus ``exclude_eids``).
    The dst nodes are in the src list only so each destination keeps its own row
    (``h_dst = h_src[:num_dst]``) and the blocks chain; a destination that was not itself drawn
    gets *no* extra self edge, so the weighted aggregation stays the plain importance-sampling
    estimator.  The next layer's ``V`` is ``block.srcdata[dgl.NID]``.
"""
from __future__ import annotations

import dgl
import torch
from dgl.dataloading import BlockSampler

from ..core.sampling.checks import check_bool, check_sizes, expected
from ..core.sampling.layer.importance import (
    fastgcn_from_edges,
    ladies_from_edges,
    layer_weights,
    member,
    sample_layer_nodes,
)
from ..core.sampling.seeds import CallSeeds
from ..graph.structure import cached
from .blocks import layer_block
from .bulk_ladies import BulkLADIES
from .errors import dgl_errors
from .layer_graph import (
    check_layer_graph,
    check_norm,
    gather_in_edges,
    layer_exclude,
    layer_seed_nodes,
    node_factors,
)

__all__ = ["LADIESSampler", "FastGCNSampler", "ladies_probabilities", "fastgcn_probabilities", "edge_norm"]


def edge_norm(g, norm: str = "both") -> torch.Tensor:
    """``c(e)`` for every edge of ``g`` in edge-id order (float64): the entries of ``Â``."""
    check_layer_graph(g)
    fd, fs = node_factors(g, check_norm(norm))
    src, dst = g.edges(order="eid")
    return fd[dst.long()] * fs[src.long()]


def ladies_probabilities(g, dst_nodes, norm: str = "both", exclude_eids=None):
    """LADIES' layer distribution for destination set ``dst_nodes``: ``(candidates, p)`` with
    ``candidates`` the in-neighbours of ``dst_nodes`` in ascending id order and
    ``p[k] ∝ sum_{v in dst_nodes} Â[v, candidates[k]]^2`` (float64, sums to 1)."""
    check_layer_graph(g)
    norm = check_norm(norm)
    v = layer_seed_nodes(g, dst_nodes)
    row_pos, src, _ = gather_in_edges(g, v, layer_exclude(g, exclude_eids))
    cols, p, _ = ladies_from_edges(node_factors(g, norm), row_pos, src, v, g.num_nodes())
    return cols, p


def fastgcn_probabilities(g, norm: str = "both") -> torch.Tensor:
    """FastGCN's distribution over all nodes: ``p[u] ∝ ||Â[:, u]||^2`` (float64, cached per graph)."""
    check_layer_graph(g)
    norm = check_norm(norm)

    def build(h):
        src, dst = h.edges(order="eid")
        return fastgcn_from_edges(src.to(torch.int64), dst.to(torch.int64), node_factors(h, norm), h.num_nodes())

    return cached(g, f"fastgcn_p:{norm}", build)


@dgl_errors
class _LayerSampler(CallSeeds, BlockSampler):
    WORKER_OFFSET = 0  # worker w keys its calls by w (the other samplers: w + 1)

    def __init__(self, num_nodes_per_layer, weight: str = "w", replace: bool = False, seed: int | None = None,
                 norm: str = "both", prefetch_node_feats=None, prefetch_labels=None, prefetch_edge_feats=None,
                 output_device=None):
        super().__init__(prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        self.num_nodes_per_layer = check_sizes(num_nodes_per_layer)
        if not isinstance(weight, str) or not weight:
            raise expected("weight to be a non-empty edge-feature name", repr(weight), "pass e.g. weight='w'.")
        self.replace = check_bool(replace, "replace")
        self.init_seeds(seed)  # first: a default seed is drawn before norm is checked, as it always was
        self.weight, self.norm = weight, check_norm(norm)

    @property
    def call_index(self) -> int:
        """The call counter under these samplers' own name: :attr:`calls` (``reset()`` rewinds it)."""
        return self.calls

    @call_index.setter
    def call_index(self, value: int) -> None:
        self.calls = value

    def _distribution(self, g, v, row_pos, src):
        """(candidates ascending, p over them, c(e) per gathered edge)."""
        raise NotImplementedError

    def _layer(self, g, v, layer, s, key, exclude):
        row_pos, src, eid = gather_in_edges(g, v, exclude)
        cand, p, c = self._distribution(g, v, row_pos, src)
        drawn = sample_layer_nodes(cand, p, s, replace=self.replace, seed=key, layer=layer)
        keep = member(drawn.nodes, src)
        row_pos, src, eid, c = row_pos[keep], src[keep], eid[keep], c[keep]
        w = layer_weights(c, src, drawn, cand, p, s, self.replace)
        return layer_block(g, v, row_pos, src, eid, w, self.weight)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        check_layer_graph(g)
        seeds = layer_seed_nodes(g, seed_nodes)
        exclude = layer_exclude(g, exclude_eids)
        key = self.next_key()
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


@dgl_errors
class LADIESSampler(_LayerSampler):
    """Layer-dependent importance sampling (Zou et al., NeurIPS'19).

    ``num_nodes_per_layer[i]`` is the node budget of ``blocks[i]`` (input layer first, like DGL's
    ``fanouts``).  Per layer, ``p(u) ∝ sum_{v in V} Â[v, u]^2`` over the in-neighbours of the
    layer's destinations ``V``; see the module docstring for ``Â``, the random-number layout, the
    block layout and the edge weights ``block.edata[weight]``.

    >>> g = dgl.graph(([1, 2, 0, 2], [0, 0, 1, 1]))
    >>> input_nodes, output_nodes, blocks = LADIESSampler([2], seed=0).sample_blocks(g, torch.tensor([0, 1]))
    >>> blocks[0].dstdata[dgl.NID].tolist(), "w" in blocks[0].edata
    ([0, 1], True)
    """

    def __init__(self, num_nodes_per_layer, weight: str = "w", replace: bool = False, seed: int | None = None,
                 norm: str = "both", prefetch_node_feats=None, prefetch_labels=None, prefetch_edge_feats=None,
                 output_device=None, bulk: int | None = None, spgemm=None):
        super().__init__(num_nodes_per_layer, weight=weight, replace=replace, seed=seed, norm=norm,
                         prefetch_node_feats=prefetch_node_feats, prefetch_labels=prefetch_labels,
                         prefetch_edge_feats=prefetch_edge_feats, output_device=output_device)
        # bulk=k: matrix-based bulk sampling (dgl_accel/sampling/bulk_ladies.py): k minibatches per
        # pass, drawn by inverse transform sampling (same distribution, other random stream than the
        # node-at-a-time path above).  None keeps the node-at-a-time path.
        self.bulk = None
        if bulk is not None or spgemm is not None:
            self.bulk = BulkLADIES(self, 1 if bulk is None else bulk, spgemm)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        if self.bulk is None:
            return super().sample_blocks(g, seed_nodes, exclude_eids)
        return self.bulk.sample_blocks(g, seed_nodes, exclude_eids)

    def _distribution(self, g, v, row_pos, src):
        return ladies_from_edges(node_factors(g, self.norm), row_pos, src, v, g.num_nodes())


@dgl_errors
class FastGCNSampler(_LayerSampler):
    """FastGCN (Chen et al., ICLR'18): layer-independent ``p(u) ∝ ||Â[:, u]||^2`` over the whole
    graph, computed once per graph and cached.  Nodes are drawn from all nodes with ``p > 0``;
    drawn nodes with no edge into ``V`` are dropped (they would contribute nothing).  Same
    arguments, block layout and weights as :class:`LADIESSampler`.

    >>> g = dgl.graph(([1, 2, 0, 2], [0, 0, 1, 1]))
    >>> _, _, blocks = FastGCNSampler([3], seed=0).sample_blocks(g, torch.tensor([0]))
    >>> blocks[0].dstdata[dgl.NID].tolist(), blocks[0].num_edges()
    ([0], 2)
    """

    def _distribution(self, g, v, row_pos, src):
        p = fastgcn_probabilities(g, self.norm)
        fd, fs = node_factors(g, self.norm)
        cand = torch.arange(p.numel(), device=p.device)
        return cand, p, fd[v[row_pos]] * fs[src]
