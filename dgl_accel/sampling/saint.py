"""``SAINTSampler``: GraphSAINT node / edge / random-walk / frontier subgraph sampler with
GraphSAINT normalisation, a drop-in for ``dgl.dataloading.SAINTSampler``.

Use it exactly like DGL's::

    sampler = SAINTSampler("walk", (3000, 2), normalize=True, train_mask="train_mask", seed=0)
    loader = dgl.dataloading.DataLoader(g, torch.arange(num_iters), sampler)
    for sg in loader:       # node-induced subgraphs, ndata[dgl.NID] / edata[dgl.EID] set
        h = GraphConv(..., norm="none")(sg, x[sg.ndata[dgl.NID]], edge_weight=sg.edata["w"])
        loss = (sg.ndata["loss_w"] * F.cross_entropy(out, y, reduction="none"))[train].sum()

Distributions: :mod:`dgl_accel.sampling.saint_draw`; normalisation: :mod:`dgl_accel.sampling.saint_norm`;
subgraph construction: :mod:`dgl_accel.sampling.induced` (and :mod:`dgl_accel.sampling.induced_sym`
for symmetric graphs without parallel edges, detected once per graph).

Randomness is counter-based: call ``c`` of a sampler built with ``seed=s`` (in data-loader worker
``w``, 0 outside workers) draws from numpy's Philox keyed by ``call_seed(s, c, w)``, so equal seeds
give equal subgraph sequences.  Normalisation pre-sampling uses its own keys (worker id 2^32).
"""
from __future__ import annotations

import weakref

import dgl
import numpy as np
import torch
from dgl.dataloading import Sampler
from dgl.dataloading.base import set_edge_lazy_features, set_node_lazy_features

from .choice import resolve_seed
from .induced import induced_subgraph
from .induced_sym import half_csr, induced_subgraph_symmetric
from .rng import call_seed
from .saint_draw import NODE_PROBS, draw_edge, draw_node, draw_walk, edge_cdf, generator, node_cdf, tables
from .saint_norm import AGGR_NORMS, Normalization, build_normalization

__all__ = ["SAINTSampler"]

MODES = ("node", "edge", "walk", "frontier")
_PRESAMPLE_WORKER = 2**32  # worker id of normalisation pre-sampling: never a data-loader worker's


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _check_budget(mode: str, budget):
    """Budget as an int (node, edge) or a pair of ints (walk, frontier), all >= 1."""
    if mode in ("node", "edge"):
        if not _is_int(budget) or budget < 1:
            what = "nodes to draw" if mode == "node" else "edges to draw"
            raise ValueError(f"expected budget for mode {mode!r} to be an int >= 1, the number of {what} "
                             f"(got {budget!r}). Fix: pass e.g. budget=4000.")
        return int(budget)
    names = ("(num_roots, walk_length)" if mode == "walk" else "(frontier_size, num_subgraph_nodes)")
    if not isinstance(budget, (tuple, list)) or len(budget) != 2 or not all(_is_int(b) for b in budget) \
            or min(budget) < 1:
        raise ValueError(f"expected budget for mode {mode!r} to be a pair of ints >= 1 {names} "
                         f"(got {budget!r}). Fix: pass e.g. budget=(1000, 2).")
    if mode == "frontier" and budget[0] > budget[1]:
        raise ValueError(f"expected frontier_size <= num_subgraph_nodes in budget {names} (got {tuple(budget)}). "
                         f"Fix: pass a subgraph size at least the frontier size.")
    return (int(budget[0]), int(budget[1]))


def _check_graph(g, mode: str, budget) -> None:
    """Graph-dependent checks: homogeneous, has edges, budget fits the graph."""
    if not isinstance(g, dgl.DGLGraph) or g.is_block or len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        got = "a block" if isinstance(g, dgl.DGLGraph) and g.is_block else (
            f"node types {list(g.ntypes)}, edge types {list(g.canonical_etypes)}"
            if isinstance(g, dgl.DGLGraph) else type(g).__name__)
        raise ValueError(f"expected a homogeneous DGLGraph (got {got}). "
                         f"Fix: convert with dgl.to_homogeneous(g) first.")
    n, E = g.num_nodes(), g.num_edges()
    if E == 0:
        raise ValueError(f"expected a graph with at least one edge (got {n} nodes and 0 edges). "
                         f"Fix: GraphSAINT samples subgraphs by edges or walks; add edges (e.g. dgl.add_self_loop).")
    if mode == "node" and budget > n:
        raise ValueError(f"expected node budget <= number of nodes {n} (got {budget}). Fix: pass a smaller budget.")
    if mode == "edge" and budget > E:
        raise ValueError(f"expected edge budget <= number of edges {E} (got {budget}). Fix: pass a smaller budget.")
    if mode in ("walk", "frontier") and budget[0] > n:
        raise ValueError(f"expected budget[0] <= number of nodes {n} (got {budget[0]}). Fix: pass fewer roots.")
    if mode == "frontier" and budget[1] > n:
        raise ValueError(f"expected budget[1] <= number of nodes {n} (got {budget[1]}). "
                         f"Fix: pass a smaller subgraph size.")


class SAINTSampler(Sampler):
    """GraphSAINT subgraph sampler (Zeng et al., ICLR'20); returns node-induced subgraphs.

    Parameters as ``dgl.dataloading.SAINTSampler``:

    mode : "node", "edge", "walk" or "frontier"
    budget : int (node: nodes drawn with replacement; edge: edges drawn with replacement),
        (num_roots, walk_length) for walk, (frontier_size, num_subgraph_nodes) for frontier.
    cache : bool
        Cache the per-graph probability tables and normalisation (keyed by graph, so unlike DGL
        one sampler may serve several graphs even with ``cache=True``); False rebuilds them per call.
    prefetch_ndata, prefetch_edata : list[str]
        Features to attach lazily to the subgraph (fetched by the DataLoader).
    output_device : device of the returned subgraph (default: the graph's device).

    Keyword-only extras:

    seed : int in [0, 2^64); default drawn from torch's generator at construction.
    normalize : bool
        Attach GraphSAINT coefficients: ``sg.edata['w']`` (aggregation weight including the
        ``aggr_norm`` normalisation) and ``sg.ndata['loss_w']`` (loss weight); see
        :mod:`dgl_accel.sampling.saint_norm` for the exact definitions.
    train_mask : None, str or tensor
        Training nodes for the loss normalisation: None = all nodes, a str = name of a boolean
        ``g.ndata`` field, or a bool mask / index tensor.
    coverage : float
        Pre-sampling target for counted normalisation (walk / frontier): mean times each training
        node is covered.
    aggr_norm : "both" (GraphConv's default, 1/sqrt(deg_out(u) deg_in(v))), "right" (1/deg_in(v))
        or "none" (``w`` = 1/alpha only).
    exact_norm : bool
        Closed-form normalisation for node / edge modes (default); False counts as for walks.
    frontier_options : dict, optional
        Extra keyword arguments for ``frontier_sample`` (eta, degree_clip).
    node_prob : "norm" (default: GraphSAINT's ``P(v) ∝ ||Ã[:, v]||²``, Ã = D_in^-1 A) or "degree"
        (DGL's ``P(v) ∝ max(deg_out(v), 1)``), for mode "node".
    """

    def __init__(self, mode, budget, cache=True, prefetch_ndata=None, prefetch_edata=None, output_device=None,
                 *, seed=None, normalize=False, train_mask=None, coverage=50, aggr_norm="both", exact_norm=True,
                 frontier_options=None, node_prob="norm"):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"expected mode to be one of {MODES} (got {mode!r}). Fix: pass e.g. mode='walk'.")
        self.mode = mode
        self.budget = _check_budget(mode, budget)
        self.cache = bool(cache)
        self.prefetch_ndata = list(prefetch_ndata or [])
        self.prefetch_edata = list(prefetch_edata or [])
        self.output_device = output_device
        self.seed = resolve_seed(seed)
        self.calls = 0
        self.normalize = bool(normalize)
        if train_mask is not None and not isinstance(train_mask, (str, torch.Tensor)):
            raise ValueError(f"expected train_mask to be None, an ndata field name or a tensor "
                             f"(got {type(train_mask).__name__}). Fix: pass train_mask='train_mask'.")
        self.train_mask = train_mask
        if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.integer, np.floating)) \
                or not np.isfinite(coverage) or coverage <= 0:
            raise ValueError(f"expected coverage to be a positive number (got {coverage!r}). Fix: pass e.g. 50.")
        self.coverage = float(coverage)
        if aggr_norm not in AGGR_NORMS:
            raise ValueError(f"expected aggr_norm in {AGGR_NORMS} (got {aggr_norm!r}). Fix: pass 'both'.")
        self.aggr_norm = aggr_norm
        self.exact_norm = bool(exact_norm) and mode in ("node", "edge")
        self.frontier_options = dict(frontier_options or {})
        if node_prob not in NODE_PROBS:
            raise ValueError(f"expected node_prob in {NODE_PROBS} (got {node_prob!r}). Fix: pass 'norm' "
                             f"(GraphSAINT's) or 'degree' (DGL's).")
        self.node_prob = node_prob
        if self.normalize and ("w" in self.prefetch_edata or "loss_w" in self.prefetch_ndata):
            raise ValueError("expected prefetch fields other than 'w' / 'loss_w' with normalize=True (got a clash). "
                             "Fix: rename the graph's field; the sampler writes sg.edata['w'] and sg.ndata['loss_w'].")
        self._norm_ref = None  # (weakref to graph, weakref to its index, Normalization)

    def __getstate__(self):
        # the normalisation cache holds weak references (not picklable); spawned workers recompute it
        state = self.__dict__.copy()
        state["_norm_ref"] = None
        return state

    # ----------------------------------------------------------------------------- node sets
    def _call_seed(self) -> int:
        info = torch.utils.data.get_worker_info()
        s = call_seed(self.seed, self.calls, 0 if info is None else info.id + 1)
        self.calls += 1
        return s

    def _draw(self, g, t, seed: int) -> np.ndarray:
        """Sorted distinct node ids (int64) of one draw with per-call seed ``seed``."""
        mode, b = self.mode, self.budget
        if mode == "frontier":
            from .frontier import frontier_sample  # lazy: written separately, optional here

            nodes = frontier_sample(g, b[0], b[1], num_instances=1, seed=seed, **self.frontier_options)[0]
            return np.unique(nodes.detach().cpu().numpy().astype(np.int64, copy=False))
        gen = generator(seed)
        if mode == "node":
            return draw_node(node_cdf(g, t, self.cache, self.node_prob), b, gen)
        if mode == "edge":
            return draw_edge(t, edge_cdf(g, t, self.cache), b, gen)
        return draw_walk(t, b[0], b[1], gen)

    def sample_nodes(self, g) -> torch.Tensor:
        """The sorted node ids of the next subgraph (advances the call counter like ``sample``)."""
        _check_graph(g, self.mode, self.budget)
        return torch.from_numpy(self._draw(g, tables(g, self.cache), self._call_seed()))

    # ------------------------------------------------------------------------- normalisation
    def _train(self, g) -> np.ndarray:
        n = g.num_nodes()
        m = self.train_mask
        if m is None:
            return np.ones(n, dtype=bool)
        if isinstance(m, str):
            if m not in g.ndata:
                raise ValueError(f"expected g.ndata to have the train_mask field {m!r} (got fields "
                                 f"{list(g.ndata.keys())}). Fix: set g.ndata[{m!r}] or pass a mask tensor.")
            m = g.ndata[m]
        m = m.detach().cpu()
        if m.dtype == torch.bool:
            if m.shape != (n,):
                raise ValueError(f"expected a boolean train_mask of shape ({n},) (got {tuple(m.shape)}). "
                                 f"Fix: pass one flag per node.")
            mask = m.numpy().copy()
        elif not m.is_floating_point() and m.dim() == 1:
            if m.numel() and (int(m.min()) < 0 or int(m.max()) >= n):
                raise ValueError(f"expected train node ids in [0, {n}) (got [{int(m.min())}, {int(m.max())}]). "
                                 f"Fix: pass ids of this graph.")
            mask = np.zeros(n, dtype=bool)
            mask[m.numpy()] = True
        else:
            raise ValueError(f"expected train_mask to be a bool mask or an int index tensor (got {m.dtype} of "
                             f"shape {tuple(m.shape)}). Fix: pass g.ndata['train_mask'].")
        if not mask.any():
            raise ValueError("expected train_mask to select at least one node (got none). "
                             "Fix: pass the mask of your training nodes.")
        return mask

    def normalization(self, g) -> Normalization:
        """Full-graph GraphSAINT coefficients for ``g`` (computed once per graph when ``cache``)."""
        ref = self._norm_ref
        if self.cache and ref is not None and ref[0]() is g and ref[1]() is g._graph:
            return ref[2]
        _check_graph(g, self.mode, self.budget)
        t = tables(g, self.cache)
        train = self._train(g)
        draw = lambda i: self._draw(g, t, call_seed(self.seed, i, _PRESAMPLE_WORKER))  # noqa: E731
        norm = build_normalization(self.mode, t, self.budget, self.aggr_norm, train, self.coverage, draw,
                                   self.exact_norm, self.node_prob)
        if self.cache:
            self._norm_ref = (weakref.ref(g), weakref.ref(g._graph), norm)
        return norm

    # -------------------------------------------------------------------------------- sample
    def sample(self, g, indices=None):
        """One node-induced subgraph (``indices`` is the DataLoader's placeholder, unused)."""
        _check_graph(g, self.mode, self.budget)
        norm = self.normalization(g) if self.normalize else None
        t = tables(g, self.cache)
        nodes = self._draw(g, t, self._call_seed())
        half = half_csr(g) if self.cache else None  # symmetric simple graphs: half the filtering
        if half is not None:
            sg, eids = induced_subgraph_symmetric(g, nodes, half)
        else:
            sg, eids = induced_subgraph(g, nodes, t.csr)
        if norm is not None:
            # numpy gathers: torch indexing can stall in its thread pool on a busy machine
            sg.edata["w"] = torch.from_numpy(np.take(norm.edge_w, eids))
            sg.ndata["loss_w"] = torch.from_numpy(np.take(norm.loss_w, nodes))
        out = g.device if self.output_device is None else torch.device(self.output_device)
        if out.type != "cpu":
            sg = sg.to(out)
        set_node_lazy_features(sg, self.prefetch_ndata)
        set_edge_lazy_features(sg, self.prefetch_edata)
        return sg
