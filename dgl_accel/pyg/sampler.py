"""``NeighborSampler``: dgl-accel's neighbour sampling as a PyG sampler (a
``torch_geometric.sampler.BaseSampler``), for PyG's ``NodeLoader``, ``LinkLoader``, ``NeighborLoader``
(``neighbor_sampler=``) and ``LinkNeighborLoader``, without pyg-lib or torch-sparse.

It takes PyG's ``NeighborSampler`` arguments in PyG's order (a positional call written for PyG means
the same here) and returns PyG's ``SamplerOutput`` / ``HeteroSamplerOutput`` layout: ``node`` the
sampled global ids per node type, seeds first, then each hop's new nodes; ``row`` / ``col`` local
indices into ``node`` of each sampled edge's source and destination (messages flow row -> col, the
seeds are destinations of hop 0); ``edge`` the original edge ids (positions in ``edge_index``, so
``edge_permutation`` is None and ``e_id`` / edge attributes come out right); ``num_sampled_nodes``
(seeds, then per hop) and ``num_sampled_edges`` (per hop); ``batch`` None, or with
``disjoint=True`` each node's seed (its position among the seeds of its type): one subgraph per
seed, a node reached from two seeds listed once in each.
Within a hop the new nodes are listed in increasing id (PyG's sampler: first appearance).

The graph is read once (:mod:`.sampler_graph`: one in-CSR per edge type, on the device of its
``edge_index``); a call samples hop by hop (:mod:`dgl_accel.core.sampling.neighbor.hops`) with the core's counter-based
choice, so on a CUDA graph everything stays on the device (the core's device pipeline) and the CPU
gives the same samples.  Each hop draws ``min(fanout, in-degree)`` distinct in-edges of each node
first reached at the previous hop (``replace=True``: ``fanout`` draws with replacement; -1: every
in-edge).

Randomness: call ``c`` (in this process, or this DataLoader worker ``w``) is keyed by
``call_seed(seed, c, w + 1)`` (``w + 1`` = 0 outside workers; the core's
:class:`~dgl_accel.core.sampling.seeds.CallSeeds`, as the DGL adapter's samplers); ``seed`` defaults
to a draw from torch's generator at construction, so ``torch.manual_seed`` makes runs reproducible.
``calls`` counts the calls that sampled; ``reset(c)`` rewinds it.

Supported: homogeneous graphs and heterographs (``num_neighbors`` a list for every edge type, or a
dict {edge type: list} as in PyG), ``subgraph_type`` "directional", "bidirectional" (PyG's own
conversion) and "induced" (below), ``replace``, node-wise and link-wise loaders (negative sampling
through PyG's helper), ``Data`` / ``HeteroData`` / ``(FeatureStore, GraphStore)``, ``disjoint``,
temporal sampling (``time_attr`` a node or an edge attribute, seed times, ``temporal_strategy``
"uniform" or "last": :mod:`dgl_accel.core.sampling.neighbor.temporal`; always disjoint, as in PyG).
Refused with ``NotImplementedError``, before any sampling: temporal and weighted sampling together,
and ``sample_direction="backward"``.

``subgraph_type="induced"`` (or PyG's deprecated ``directed=False``, which warns as PyG does): PyG
2.8's definition (its torch-sparse path, ``directed=False``; pyg-lib has none): the nodes are sampled
as above, then the batch holds every edge of the graph among them instead of the sampled ones
(:func:`dgl_accel.core.sampling.neighbor.hops.induced_hops`, the core's node-induced subgraph): per
edge type, the in-edges of each sampled node of its destination type whose source is a sampled node
of its source type, grouped by destination in ``node`` order, each destination's in CSR order
(``edge_index`` order; PyG's unstable CSC sort leaves that order open), ``edge`` their original ids;
``num_sampled_nodes``, ``num_sampled_edges`` and ``batch`` None, as PyG returns them.  As in PyG it is
not disjoint: ``disjoint=True`` or temporal sampling (always disjoint) with it raises PyG's
``ValueError`` when the sampler is built (PyG: at the first batch).  ``weight_attr`` with it samples
the nodes by weight (PyG's torch-sparse path ignores the weights).

``weight_attr`` (PyG's biased sampling; pyg-lib >= 0.3 there) names an edge attribute of
non-negative weights, on every edge type of a ``HeteroData``: a hop draws in-edges with
probability proportional to their weight (without replacement: successive weighted draws;
zero-weight edges never), the core's weighted choice
(:func:`dgl_accel.core.sampling.neighbor.choice.weighted_neighbor_choice`), on the device for a CUDA graph.

>>> import torch
>>> from torch_geometric.data import Data
>>> from torch_geometric.loader import NodeLoader
>>> data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[1, 2, 3, 0], [0, 0, 1, 2]]))
>>> loader = NodeLoader(data, node_sampler=NeighborSampler(data, [2, 2], seed=0), input_nodes=torch.tensor([0]),
...                     batch_size=1)
>>> batch = next(iter(loader))
>>> batch.n_id.tolist(), batch.edge_index.tolist(), batch.e_id.tolist(), batch.num_sampled_edges
([0, 1, 2, 3], [[1, 2, 3, 0], [0, 0, 1, 2]], [0, 1, 2, 3], [2, 2])
"""
from __future__ import annotations

import warnings

from ..core.extras import missing_extra

try:
    import torch_geometric  # noqa: F401  (first, so that without PyG the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import torch
from torch_geometric.sampler import BaseSampler, HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler.base import NumNeighbors, SubgraphType
from torch_geometric.sampler.neighbor_sampler import edge_sample, node_sample

from ..core.sampling.checks import SamplingInputError, check_fanout, check_nodes, expected
from ..core.sampling.neighbor.hops import induced_hops, sample_hops
from ..core.sampling.neighbor.temporal import STRATEGIES
from ..core.sampling.seeds import CallSeeds
from .sampler_graph import read_graph, with_times, with_weights

__all__ = ["NeighborSampler"]


def _refuse(what: str, fix: str):
    return NotImplementedError(f"dgl_accel.pyg.NeighborSampler does not support {what}. Fix: {fix}.")


def _hop_list(values, name: str) -> list[int]:
    """One edge type's fanouts: a list (or tuple) of ints >= -1, one per hop."""
    if not isinstance(values, (list, tuple)):
        raise expected(f"{name} to be a list of ints, one per hop (-1 = every in-neighbour)",
                       f"{type(values).__name__} {values!r}", "pass e.g. num_neighbors=[15, 10].")
    return [check_fanout(f, f"{name}[{i}]") for i, f in enumerate(values)]


class NeighborSampler(CallSeeds, BaseSampler):
    """PyG's in-memory neighbour sampler on dgl-accel's core (see the module docstring).

    Parameters are ``torch_geometric.sampler.NeighborSampler``'s, in its order and with its defaults;
    ``is_sorted`` (the edges are sorted here either way, stably) and ``share_memory`` (CPU tensors
    moved to shared memory) are accepted.

    Keyword-only: ``seed`` (int in [0, 2^64)), the sampler seed; default: drawn from torch's
    generator at construction.
    """

    def __init__(self, data, num_neighbors, subgraph_type="directional", replace=False, disjoint=False,
                 temporal_strategy="uniform", time_attr=None, weight_attr=None, is_sorted=False, share_memory=False,
                 directed=True, sample_direction="forward", *, seed=None):
        if not directed:  # PyG's deprecated spelling of induced subgraphs, with PyG's warning
            subgraph_type = SubgraphType.induced
            warnings.warn(f"The usage of the 'directed' argument in '{self.__class__.__name__}' is deprecated. "
                          f"Use `subgraph_type='induced'` instead.", stacklevel=2)
        try:
            self.subgraph_type = SubgraphType(subgraph_type)
        except ValueError:
            raise expected("subgraph_type to be 'directional', 'bidirectional' or 'induced'", repr(subgraph_type),
                           "pass subgraph_type='directional'.") from None
        if not isinstance(disjoint, bool):
            raise expected("disjoint to be a bool", repr(disjoint), "pass disjoint=True or disjoint=False.")
        if self.subgraph_type == SubgraphType.induced and (disjoint or time_attr is not None):
            got = "disjoint=True" if disjoint else f"temporal sampling (time_attr={time_attr!r}), which is disjoint"
            raise SamplingInputError(
                f"'disjoint' sampling not supported for neighbor sampling with `subgraph_type='induced'` (PyG's "
                f"rule; got {got}). Fix: drop disjoint / time_attr, or use subgraph_type='directional'.")
        self._disjoint = disjoint
        if temporal_strategy not in STRATEGIES:
            raise expected(f"temporal_strategy among {STRATEGIES}", repr(temporal_strategy),
                           "pass temporal_strategy='uniform' or 'last'.")
        if time_attr is not None and weight_attr is not None:
            raise _refuse(f"temporal and weighted sampling together (time_attr={time_attr!r}, "
                          f"weight_attr={weight_attr!r})", "drop one of the two")
        if sample_direction != "forward":
            raise _refuse(f"sample_direction={sample_direction!r}", "sample in-edges (sample_direction='forward'), "
                          "or reverse the edges (edge_index.flip(0)) to sample out-edges")
        if not isinstance(replace, bool):
            raise expected("replace to be a bool", repr(replace), "pass replace=True or replace=False.")
        self.replace = replace
        self.temporal_strategy = temporal_strategy
        self.keep_orig_edges = False
        self.graph, self.node_time = read_graph(data), None
        if weight_attr is not None:
            self.graph = with_weights(self.graph, data, weight_attr)
        if time_attr is not None:
            self.graph, self.node_time = with_times(self.graph, data, time_attr)
        self.weight_attr, self.time_attr = weight_attr, time_attr
        self.num_neighbors = num_neighbors
        self.init_seeds(seed)
        for rel in self.graph.rels:
            if rel.csr.device.type == "cpu":
                if share_memory:  # first: it moves the storage that the host arrays below may view
                    for t in (rel.csr.indptr, rel.csr.indices, rel.csr.eids):
                        t.share_memory_()
                rel.host()  # the CPU path's arrays, built here so that forked DataLoader workers share them
                if self.subgraph_type == SubgraphType.induced:
                    rel.host_induced()

    # ------------------------------------------------------------------------------ attributes
    @property
    def is_hetero(self) -> bool:
        return self.graph.node_types is not None

    @property
    def node_types(self):
        return self.graph.node_types

    @property
    def edge_types(self):
        return self.graph.edge_types

    @property
    def num_nodes(self):
        """PyG's: an int on a homogeneous graph, {node type: count} on a heterograph."""
        g = self.graph
        return dict(zip(g.node_types, g.num_nodes)) if self.is_hetero else g.num_nodes[0]

    @property
    def disjoint(self) -> bool:
        return self._disjoint or self.is_temporal  # PyG's rule: temporal sampling is disjoint

    @property
    def is_temporal(self) -> bool:
        return self.time_attr is not None

    def _node_time_arg(self):
        """PyG's ``node_time`` for negative sampling: a tensor, or {node type: tensor}."""
        if self.node_time is None:
            return None
        return dict(zip(self.graph.node_types, self.node_time)) if self.is_hetero else self.node_time[0]

    @property
    def num_neighbors(self) -> NumNeighbors:
        return self._num_neighbors

    @num_neighbors.setter
    def num_neighbors(self, num_neighbors):
        """Checked here, before any sampling: per edge type one list of fanouts, all of one length."""
        values, default = (num_neighbors.values, num_neighbors.default) if isinstance(num_neighbors, NumNeighbors) \
            else (num_neighbors, None)
        if not self.is_hetero:
            if isinstance(values, dict):
                raise expected("num_neighbors to be a list of ints on a homogeneous graph", "a dict per edge type",
                               "pass one list, e.g. num_neighbors=[15, 10].")
            self._fanouts = [_hop_list(values, "num_neighbors")]
        else:
            if not isinstance(values, dict):
                values = _hop_list(values, "num_neighbors")
            for k, v in (values.items() if isinstance(values, dict) else ()):
                _hop_list(v, f"num_neighbors[{k!r}]")
            if default is not None:
                _hop_list(default, "num_neighbors.default")
            per_type = NumNeighbors(values, default).get_values(self.edge_types)  # PyG's rules: names, one length
            self._fanouts = [_hop_list(per_type[et], f"num_neighbors[{et!r}]") for et in self.edge_types]
        self._num_neighbors = num_neighbors if isinstance(num_neighbors, NumNeighbors) else NumNeighbors(values)

    # ------------------------------------------------------------------------------- sampling
    def sample_from_nodes(self, inputs, **kwargs):
        out = node_sample(inputs, self._sample)
        if self.subgraph_type == SubgraphType.bidirectional:
            out = out.to_bidirectional(keep_orig_edges=self.keep_orig_edges)
        return out

    def sample_from_edges(self, inputs, neg_sampling=None):
        out = edge_sample(inputs, self._sample, self.num_nodes, self.disjoint, self._node_time_arg(), neg_sampling)
        if self.subgraph_type == SubgraphType.bidirectional:
            out = out.to_bidirectional(keep_orig_edges=self.keep_orig_edges)
        return out

    def _seeds(self, seed) -> list[torch.Tensor]:
        """One checked 1-D id tensor per node type."""
        g = self.graph
        if not self.is_hetero:
            if isinstance(seed, dict):
                raise expected("seed nodes as a tensor on a homogeneous graph", f"a dict with keys {list(seed)}",
                               "pass the node ids as one tensor.")
            check_nodes(seed, g.num_nodes[0], "seed nodes")
            return [seed]
        if not isinstance(seed, dict):
            raise expected("seed nodes as a dict {node type: ids} on a heterograph", type(seed).__name__,
                           f"name the seeds' type, e.g. input_nodes=({g.node_types[0]!r}, ids).")
        for nt in seed:
            if nt not in g.node_types:
                raise expected(f"seed node types among {g.node_types}", repr(nt), "use the graph's node type names.")
        out = []
        for nt, n in zip(g.node_types, g.num_nodes):
            ids = seed.get(nt, torch.empty(0, dtype=torch.int64))
            check_nodes(ids, n, f"seed nodes of type {nt!r}")
            out.append(ids)
        return out

    def _seed_time(self, seeds: list[torch.Tensor], seed_time) -> torch.Tensor | None:
        """The time of each subgraph (seed ``i`` of any type starts subgraph ``i``): the given seed
        times, else (node-level time) the seeds' own times; None without ``time_attr``."""
        if not self.is_temporal:
            if seed_time is not None:
                raise expected("seed times only with time_attr", "input_time / edge_label_time without time_attr",
                               "pass time_attr=<the time attribute> to the loader, or drop the seed times.")
            return None
        if seed_time is None:
            if self.node_time is None:
                raise expected("seed times for edge-level temporal sampling", "none",
                               "pass input_time (NeighborLoader) or edge_label_time (LinkNeighborLoader).")
            per_type = [None if t is None else t[s.long()] for t, s in zip(self.node_time, seeds)]
        elif isinstance(seed_time, dict):
            per_type = [seed_time.get(nt) for nt in self.graph.node_types]
        else:
            per_type = [seed_time]
        counts = [s.numel() for s in seeds]
        times = None
        for t, s, n in zip(per_type, seeds, counts):
            if t is None or n == 0:
                continue
            if not isinstance(t, torch.Tensor) or t.shape != s.shape:
                raise expected(f"one seed time per seed node ({n})", f"{getattr(t, 'shape', type(t).__name__)}",
                               "pass input_time with one time per input node.")
            if times is None or t.numel() > times.numel():
                times = t  # seeds of two types (links between types) carry the same times, edge by edge
        return times if times is not None else torch.empty(0)

    def _sample(self, seed, seed_time=None, **kwargs):
        """One mini-batch (``node_sample`` / ``edge_sample`` call this): seeds as a tensor, or a dict
        {node type: ids} on a heterograph."""
        seeds = self._seeds(seed)
        g = self.graph
        times = self._seed_time(seeds, seed_time)
        with self.counted_call() as key:  # only a call that sampled counts
            hops = sample_hops(g.rels, seeds, self._fanouts, key=key, replace=self.replace, num_nodes=g.num_nodes,
                               disjoint=self.disjoint, seed_time=times, strategy=self.temporal_strategy)
            if self.subgraph_type == SubgraphType.induced:  # every edge among the sampled nodes
                row, col, edge = induced_hops(g.rels, hops.nodes)
        if self.subgraph_type == SubgraphType.induced:  # PyG's layout: no per-hop counts, no batch
            if not self.is_hetero:
                return SamplerOutput(node=hops.nodes[0], row=row[0], col=col[0], edge=edge[0])
            return HeteroSamplerOutput(node=dict(zip(g.node_types, hops.nodes)), row=dict(zip(g.edge_types, row)),
                                       col=dict(zip(g.edge_types, col)), edge=dict(zip(g.edge_types, edge)))
        if not self.is_hetero:
            return SamplerOutput(node=hops.nodes[0], row=hops.row[0], col=hops.col[0], edge=hops.edge[0],
                                 batch=hops.batch[0] if self.disjoint else None,
                                 num_sampled_nodes=hops.num_sampled_nodes[0],
                                 num_sampled_edges=hops.num_sampled_edges[0])
        return HeteroSamplerOutput(
            node=dict(zip(g.node_types, hops.nodes)), row=dict(zip(g.edge_types, hops.row)),
            col=dict(zip(g.edge_types, hops.col)), edge=dict(zip(g.edge_types, hops.edge)),
            batch=dict(zip(g.node_types, hops.batch)) if self.disjoint else None,
            num_sampled_nodes=dict(zip(g.node_types, hops.num_sampled_nodes)),
            num_sampled_edges=dict(zip(g.edge_types, hops.num_sampled_edges)))
