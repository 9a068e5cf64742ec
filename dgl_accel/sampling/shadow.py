"""shaDow-GNN samplers (Zeng et al., NeurIPS'21, "decoupled depth and scope"): a small subgraph
around each target (its k-hop neighbourhood or its top-K personalised-PageRank nodes) on which a GNN
deeper than the scope runs, read out at the target (:class:`dgl_accel.nn.ShaDowReadout`).

* :class:`ShaDowKHopSampler`: a drop-in for ``dgl.dataloading.ShaDowKHopSampler`` (one subgraph
  induced by the merged k-hop nodes of the batch); ``per_target=True`` gives the paper's form.
* :class:`ShaDowPPRSampler`: per-target top-K PPR scopes (approximate push, one per target).

Per-target output (``per_target=True`` and the PPR sampler): ``(input_nodes, output_nodes, sg)``,
``sg`` one graph holding the disjoint per-target induced subgraphs side by side (as ``dgl.batch``:
``sg.batch_num_nodes()`` / ``batch_num_edges()`` set, ``dgl.unbatch(sg)`` splits it), subgraph
``t`` for ``output_nodes[t]``, its nodes in increasing original id.  ``sg.ndata[dgl.NID]`` /
``edata[dgl.EID]``: original ids (a node in several scopes appears once per scope);
``sg.ndata[GRAPH_ID]``: the subgraph index of every node; ``sg.ndata[IS_TARGET]``: True at each
subgraph's target; ``sg.ndata[PPR_SCORE]`` (PPR sampler): each node's PPR estimate for its target
(float32; ``ShaDowReadout``'s ``weights``).  ``input_nodes = sg.ndata[dgl.NID]`` (so prefetching and
``x[input_nodes]`` give one feature row per batch node).  :func:`shadow_index` returns
``(graph_ids, target_pos)`` for the readout::

    for input_nodes, output_nodes, sg in loader:
        h = model(sg, feats[input_nodes])                      # L' layers on the scopes
        logits = readout(h, *shadow_index(sg))                 # one row per output node

The maths (PPR push and its error bound, k-hop draws, batched induced subgraphs) is DGL-free in
:mod:`dgl_accel.core.sampling.shadow.ppr` and :mod:`dgl_accel.core.sampling.shadow.scope`.
"""
from __future__ import annotations

import dgl
import numpy as np
import torch
from dgl.dataloading import Sampler
from dgl.dataloading.base import set_edge_lazy_features, set_node_lazy_features

from ..core.backend import choose_path
from ..core.sampling.arrays import np64, offsets
from ..core.sampling.checks import (
    check_bool,
    check_fanouts,
    excluded_edge_ids,
    expected,
    seed_batch,
)
from ..core.sampling.induced.subgraph import induced_symmetric_coo
from ..core.sampling.induced.subgraph_device import induced_device, induced_sets_device
from ..core.sampling.neighbor.choice import weight_tables
from ..core.sampling.neighbor.sample import sample_layers
from ..core.sampling.seeds import CallSeeds
from ..core.sampling.shadow.ppr import PPRTable, check_ppr, ppr_node_sets
from ..core.sampling.shadow.scope import (
    NodeSets,
    induced_batch,
    induced_batch_symmetric,
    khop_node_sets,
    merged_khop_nodes,
)
from ..graph.structure import cached, in_csr
from .blocks import check_homogeneous, device_subgraph, new_subgraph, np_idtype
from .errors import dgl_errors
from .induced import cpu_in_csr, half_csr

__all__ = ["ShaDowKHopSampler", "ShaDowPPRSampler", "shadow_index", "GRAPH_ID", "IS_TARGET", "PPR_SCORE"]

GRAPH_ID = "shadow_graph_id"    # ndata of per-target output: subgraph index of each node (int64)
IS_TARGET = "shadow_is_target"  # ndata of per-target output: True at each subgraph's target
PPR_SCORE = "shadow_ppr"        # ndata of ShaDowPPRSampler's output: each node's PPR estimate in its scope


def shadow_index(sg) -> tuple[torch.Tensor, torch.Tensor]:
    """``(graph_ids, target_pos)`` of a per-target batch: the subgraph index of every node and the
    position of each subgraph's target (int64, on ``sg``'s device), for
    :class:`dgl_accel.nn.ShaDowReadout`."""
    return sg.ndata[GRAPH_ID], torch.nonzero(sg.ndata[IS_TARGET]).reshape(-1)


def _subgraph(g, sets: NodeSets, excl, per_target: bool):
    """The (batched) induced subgraph of ``sets`` with original ids, minus excluded edge ids.  On a
    symmetric graph without parallel edges: the half-CSR paths (half the entries filtered; edges
    come as a COO, each set's together); else the CSC of :func:`induced_batch`.  On the Triton
    path (a CUDA graph) the CSC is built on the device (``induced_sets_device``)."""
    N, T = sets.nodes.numel(), sets.offsets.numel() - 1
    csr = in_csr(g)
    if choose_path(csr.indptr) == "triton":  # a CUDA graph: the batch built on the device
        offs, excl_t = sets.offsets.to(csr.device), None if excl is None else torch.from_numpy(excl)
        indptr, local, eids = induced_sets_device(csr, offs, sets.nodes, excl_t)
        sg = device_subgraph(indptr, local, sets.nodes.to(csr.device), eids, g.idtype)
        return _mark_sets(sg, sets, indptr[offs].diff(), g.idtype) if per_target else sg
    nodes = sets.nodes.numpy()
    half = half_csr(g)
    if half is not None:
        if per_target:
            src, dst, eids, ecount = induced_batch_symmetric(half, sets)
        else:
            src, dst, eids = induced_symmetric_coo(half, nodes, np_idtype(g.idtype))
            ecount = np.array([eids.shape[0]])
        if excl is not None and excl.size and eids.size:
            keep = ~np.isin(eids, excl)
            owner = np.repeat(np.arange(T, dtype=np.int64), ecount)[keep]
            src, dst, eids, ecount = src[keep], dst[keep], eids[keep], np.bincount(owner, minlength=T)
        sg = new_subgraph("coo", (src, dst), N, g.idtype, nodes, eids)
    else:
        csr = cpu_in_csr(g)
        indptr, local, eids = induced_batch(csr.indptr, csr.indices, csr.eids, sets)
        if excl is not None and excl.size and eids.size:
            keep = ~np.isin(eids, excl)
            row = np.repeat(np.arange(N, dtype=np.int64), np.diff(indptr))[keep]
            indptr, local, eids = offsets(np.bincount(row, minlength=N)), local[keep], eids[keep]
        ecount = np.diff(indptr[sets.offsets.numpy()])
        sg = new_subgraph("csc", (indptr, local), N, g.idtype, nodes, eids)
    return _mark_sets(sg, sets, torch.from_numpy(ecount), g.idtype) if per_target else sg


def _mark_sets(sg, sets: NodeSets, ecount: torch.Tensor, idtype):
    """A per-target batch's node data (set index, target flag, PPR score) and batch sizes, on
    ``sg``'s device; ``ecount``: the edges of each set."""
    dev = sg.device
    sg.ndata[GRAPH_ID] = sets.graph_ids().to(dev)
    is_target = torch.zeros(sets.nodes.numel(), dtype=torch.bool, device=dev)
    is_target[sets.target_pos.to(dev)] = True
    sg.ndata[IS_TARGET] = is_target
    if sets.scores is not None:  # float32, as node features are (weights for ShaDowReadout's pool)
        sg.ndata[PPR_SCORE] = sets.scores.to(device=dev, dtype=torch.float32)
    sg.set_batch_num_nodes(sets.offsets.diff().to(device=dev, dtype=idtype))
    sg.set_batch_num_edges(ecount.to(device=dev, dtype=idtype))
    return sg


class _ShaDowBase(Sampler):
    """Prefetching, output device and the (input_nodes, output_nodes, subgraph) triple."""

    def _finish(self, g, seed_nodes, sets: NodeSets, exclude_eids, per_target: bool):
        return self._deliver(seed_nodes, _subgraph(g, sets, excluded_edge_ids(exclude_eids), per_target), g.device)

    def _deliver(self, seed_nodes, sg, graph_device=None):
        """(input nodes, output nodes, subgraph) on the output device, features prefetched lazily."""
        dev = (graph_device or sg.device) if self.output_device is None else torch.device(self.output_device)
        if sg.device != dev:
            sg = sg.to(dev)
        set_node_lazy_features(sg, self.prefetch_node_feats)
        set_edge_lazy_features(sg, self.prefetch_edge_feats)
        return sg.ndata[dgl.NID], seed_nodes, sg


@dgl_errors
class ShaDowKHopSampler(CallSeeds, _ShaDowBase):
    """k-hop scopes of shaDow-GNN; a drop-in for ``dgl.dataloading.ShaDowKHopSampler``.

    Parameters are DGL's, in its order and with its defaults (homogeneous graphs):

    fanouts : list[int]
        Neighbours per node for each layer, input layer first (-1: all in-neighbours).
    replace : bool
        Sample with replacement.
    prob : str, optional
        Name of an ``edata`` field of non-negative edge weights (merged mode only).
    prefetch_node_feats, prefetch_edge_feats, output_device :
        As DGL's (``output_device`` None: the graph's device).

    Ours, keyword-only (after DGL's parameters, the rule of issue 17): ``per_target`` (bool): the
    paper's per-target scopes instead of DGL's merged subgraph (output layout in
    :mod:`dgl_accel.sampling.shadow`); ``seed`` (int in [0, 2^64), default drawn from torch's
    generator): call ``c`` in worker ``w`` draws with ``call_seed(seed, c, w + 1)`` (:mod:`.base`),
    so equal seeds give equal samples.

    Merged mode (``per_target=False``) returns what DGL's does: ``sg`` induced by the sampled nodes,
    ``input_nodes = sg.ndata[dgl.NID]`` starting with ``output_nodes``; each layer samples
    in-neighbours of every node reached so far, as DGL's ``to_block`` chain does, with the draws
    of :class:`NeighborSampler` (so ``input_nodes`` equal its ``input_nodes`` for one call key).
    Only the order of the non-seed nodes differs from DGL's (increasing id per layer, see
    NeighborSampler); the node set and the edges (with ids) are DGL's for full neighbourhoods.
    Seeds must be distinct in merged mode (the DataLoader's batches are).

    Per-target mode: target ``t``'s scope is its own k-hop expansion (hop ``k`` expands the nodes
    first reached at hop ``k - 1``), draws keyed by (seed, target, hop, node)
    (:func:`dgl_accel.core.sampling.shadow.scope.khop_node_sets`); fanouts are read target side first
    (``fanouts[-1]`` at the first hop, as the merged mode's layers).

    >>> g = dgl.graph(([1, 2, 0, 3], [0, 1, 2, 2]))
    >>> inp, out, sg = ShaDowKHopSampler([-1, -1], seed=0).sample(g, torch.tensor([0]))
    >>> inp.tolist(), sg.num_edges()
    ([0, 1, 2], 3)
    >>> inp, out, sg = ShaDowKHopSampler([-1], per_target=True, seed=0).sample(g, torch.tensor([0, 2]))
    >>> inp.tolist(), shadow_index(sg)[1].tolist()
    ([0, 1, 0, 2, 3], [0, 3])
    """

    def __init__(self, fanouts, replace=False, prob=None, prefetch_node_feats=None, prefetch_edge_feats=None,
                 output_device=None, *, per_target=False, seed=None):
        super().__init__()
        self.fanouts = check_fanouts(fanouts)
        self.replace = check_bool(replace, "replace")
        if prob is not None and not isinstance(prob, str):
            raise expected("prob to be the name of an edata field", type(prob).__name__,
                           "store the weights with g.edata['p'] = weights and pass prob='p'.")
        self.per_target = check_bool(per_target, "per_target")
        if prob is not None and self.per_target:
            raise expected("prob=None with per_target=True (weighted per-target scopes are not implemented)",
                           f"prob={prob!r}", "drop prob, or use the merged mode (per_target=False).")
        self.prob = prob
        self.prefetch_node_feats = prefetch_node_feats
        self.prefetch_edge_feats = prefetch_edge_feats
        self.output_device = output_device
        self.init_seeds(seed)

    def sample(self, g, seed_nodes, exclude_eids=None):
        check_homogeneous(g, "use dgl.dataloading.ShaDowKHopSampler for heterographs.")
        seeds = seed_batch(seed_nodes, g.num_nodes())
        csr = in_csr(g)
        key = self.next_key()
        if self.per_target:
            sets = khop_node_sets(csr, seeds, list(reversed(self.fanouts)), replace=self.replace, seed=key)
            return self._finish(g, seed_nodes, sets, exclude_eids, True)
        tables = None
        if self.prob is not None:
            if self.prob not in g.edata:
                raise expected(f"g.edata to have the prob field {self.prob!r}", f"fields {list(g.edata.keys())}",
                               f"set g.edata[{self.prob!r}] = weights.")
            tables = weight_tables(csr.indptr, csr.eids, g.edata[self.prob], name=f"g.edata[{self.prob!r}]")
        excl = excluded_edge_ids(exclude_eids)
        if choose_path(csr.indptr) == "triton":  # a CUDA graph: the scope and its subgraph on the device
            excl_t = None if excl is None else torch.from_numpy(excl)
            nodes = sample_layers(csr, seeds, self.fanouts, seed=key, replace=self.replace, tables=tables,
                                  exclude=excl_t).input_nodes  # merged_khop_nodes' list
            indptr, local, eids = induced_device(csr, nodes, excl_t)
            sg = device_subgraph(indptr, local, nodes, eids, g.idtype)
            return self._deliver(seed_nodes, sg)
        nodes = merged_khop_nodes(csr, np64(seeds), self.fanouts, seed=key, replace=self.replace, tables=tables,
                                  excl=excl)
        N = nodes.shape[0]
        sets = NodeSets(torch.tensor([0, N]), torch.from_numpy(nodes), torch.zeros(1, dtype=torch.int64))
        return self._finish(g, seed_nodes, sets, exclude_eids, False)


@dgl_errors
class ShaDowPPRSampler(_ShaDowBase):
    """Personalised-PageRank scopes of shaDow-GNN: per target, the target and its ``topk - 1``
    best other nodes by approximate PPR (push method, one push per target; the algorithm, its
    error bound and the tie rule: :mod:`dgl_accel.core.sampling.shadow.ppr`), and the subgraph they induce.

    topk : int >= 1 (shaDow-GNN: 200; 150 on ogbn-products); alpha : teleport probability in (0, 1)
    (0.15); eps : push threshold > 0 (1e-5): a node pushes while its residual is >= eps x degree;
    threshold : optional minimum score of the non-target nodes.  The push follows in-edges (the
    same as out-edges on the symmetric graphs shaDow-GNN uses).  Deterministic (no seed).
    cache : bool (keyword-only, default True): keep each target's set once computed, per graph
    (:class:`~dgl_accel.core.sampling.shadow.ppr.PPRTable`, 16 bytes x nodes x topk; the push is
    deterministic, so later epochs only build subgraphs, as shaDow-GNN's precomputation).
    Output: the per-target layout of :mod:`dgl_accel.sampling.shadow`.

    >>> g = dgl.graph(([0, 1, 1, 2], [1, 0, 2, 1]))                  # path 0 - 1 - 2
    >>> inp, out, sg = ShaDowPPRSampler(topk=2).sample(g, torch.tensor([0, 1]))
    >>> inp.tolist(), sg.ndata["shadow_graph_id"].tolist()
    ([0, 1, 0, 1], [0, 0, 1, 1])
    """

    def __init__(self, topk=200, alpha=0.15, eps=1e-5, threshold=None, prefetch_node_feats=None,
                 prefetch_edge_feats=None, output_device=None, *, cache=True):
        super().__init__()
        self.topk, self.alpha, self.eps, self.threshold = check_ppr(topk, alpha, eps, threshold)
        self.cache = check_bool(cache, "cache")
        self.prefetch_node_feats = prefetch_node_feats
        self.prefetch_edge_feats = prefetch_edge_feats
        self.output_device = output_device

    def sample(self, g, seed_nodes, exclude_eids=None):
        check_homogeneous(g, "convert it with dgl.to_homogeneous(g) first.")
        seeds = seed_batch(seed_nodes, g.num_nodes())
        csr = in_csr(g)
        if self.cache:
            key = f"shadow.ppr_table:{self.topk}:{self.alpha!r}:{self.eps!r}:{self.threshold!r}"
            table = cached(g, key, lambda h: PPRTable(csr, topk=self.topk, alpha=self.alpha, eps=self.eps,
                                                      threshold=self.threshold))
            sets = table.node_sets(csr, seeds)
        else:
            sets = ppr_node_sets(csr, seeds, topk=self.topk, alpha=self.alpha, eps=self.eps, threshold=self.threshold)
        return self._finish(g, seed_nodes, sets, exclude_eids, True)
