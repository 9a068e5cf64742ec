"""``SAINTSampler``: GraphSAINT node / edge / random-walk / frontier subgraph sampler with
GraphSAINT normalisation, a drop-in for ``dgl.dataloading.SAINTSampler``.

Use it exactly like DGL's::

    sampler = SAINTSampler("walk", (3000, 2), normalize=True, train_mask="train_mask", seed=0)
    loader = dgl.dataloading.DataLoader(g, torch.arange(num_iters), sampler)
    for sg in loader:       # node-induced subgraphs, ndata[dgl.NID] / edata[dgl.EID] set
        h = GraphConv(..., norm="none")(sg, x[sg.ndata[dgl.NID]], edge_weight=sg.edata["w"])
        loss = (sg.ndata["loss_w"] * F.cross_entropy(out, y, reduction="none"))[train].sum()

Distributions: :mod:`dgl_accel.core.sampling.saint.draw`; normalisation:
:mod:`dgl_accel.core.sampling.saint.norm`; frontier mode: :mod:`dgl_accel.core.sampling.saint.frontier`;
subgraph construction: :mod:`dgl_accel.sampling.induced` (with the half-CSR path for symmetric
graphs without parallel edges, detected once per graph).  On a CUDA graph every call runs on the
device: the node set (:mod:`dgl_accel.core.sampling.saint.draw_device`, from the tables copied there
once per graph), the subgraph it induces
(:func:`dgl_accel.core.sampling.induced.subgraph_device.induced_device`) and its normalisation weights;
so does the counted normalisation's pre-sampling.  Nothing graph-sized crosses per call.

Randomness is counter-based: call ``c`` of a sampler built with ``seed=s`` (in data-loader worker
``w``, 0 outside workers) draws Philox numbers keyed by ``call_seed(s, c, w)``
(:mod:`dgl_accel.core.sampling.saint.draw`), so equal seeds give equal subgraph sequences, on the
CPU and on a device alike.  Normalisation pre-sampling uses its own keys (worker id 2^32).
"""
from __future__ import annotations

import weakref

import numpy as np
import torch
from dgl.dataloading import Sampler
from dgl.dataloading.base import set_edge_lazy_features, set_node_lazy_features

from ..core.backend import choose_path
from ..core.sampling.checks import (
    check_choice,
    check_has_edges,
    check_int,
    check_nodes,
    check_positive,
    expected,
)
from ..core.sampling.induced.subgraph_device import induced_device
from ..core.sampling.rng import call_seed
from ..core.sampling.saint.draw import (
    NODE_PROBS,
    Tables,
    build_tables,
    draw_edge,
    draw_node,
    draw_walk,
    edge_weights,
    node_weights,
)
from ..core.sampling.saint.draw_device import (
    DeviceTables,
    count_inclusion_device,
    draw_edge_device,
    draw_node_device,
    draw_walk_device,
)
from ..core.sampling.saint.norm import AGGR_NORMS, Normalization, build_normalization, count_inclusion
from ..core.sampling.seeds import CallSeeds
from ..graph.structure import cached, in_csr, out_csr
from .blocks import check_homogeneous, device_subgraph
from .errors import dgl_errors
from .frontier import frontier_sample
from .induced import cpu_in_csr, half_csr, induced_subgraph, induced_subgraph_symmetric

__all__ = ["SAINTSampler", "tables", "node_cdf", "edge_cdf"]

MODES = ("node", "edge", "walk", "frontier")
_PRESAMPLE_WORKER = 2**32  # worker id of normalisation pre-sampling: never a data-loader worker's


def _check_budget(mode: str, budget):
    """Budget as an int (node, edge) or a pair of ints (walk, frontier), all >= 1."""
    if mode in ("node", "edge"):
        what = "nodes to draw" if mode == "node" else "edges to draw"
        return check_int(budget, f"budget for mode {mode!r} (the number of {what})", 1, fix="pass e.g. budget=4000.")
    names = ("(num_roots, walk_length)" if mode == "walk" else "(frontier_size, num_subgraph_nodes)")
    if not isinstance(budget, (tuple, list)) or len(budget) != 2:
        raise expected(f"budget for mode {mode!r} to be a pair of ints >= 1 {names}", repr(budget),
                       "pass e.g. budget=(1000, 2).")
    b = tuple(check_int(x, f"budget[{i}] for mode {mode!r}", 1, fix="pass e.g. budget=(1000, 2).")
              for i, x in enumerate(budget))
    if mode == "frontier" and b[0] > b[1]:
        raise expected(f"frontier_size <= num_subgraph_nodes in budget {names}", b,
                       "pass a subgraph size at least the frontier size.")
    return b


def _check_graph(g, mode: str, budget) -> None:
    """Graph-dependent checks: homogeneous, has edges, budget fits the graph."""
    check_homogeneous(g)
    n, E = g.num_nodes(), g.num_edges()
    check_has_edges(n, E, "GraphSAINT samples subgraphs by edges or walks; add edges (e.g. dgl.add_self_loop).")
    if mode == "node":
        limits = [("node budget", budget, "nodes", n)]
    elif mode == "edge":
        limits = [("edge budget", budget, "edges", E)]
    else:  # roots of the walks / the frontier, and the frontier's subgraph size
        limits = [("budget[0]", budget[0], "nodes", n)]
        if mode == "frontier":
            limits.append(("budget[1]", budget[1], "nodes", n))
    for what, value, of, limit in limits:
        if value > limit:
            raise expected(f"{what} <= number of {of} {limit}", value, "pass a smaller budget.")


@dgl_errors
class SAINTSampler(CallSeeds, Sampler):
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
    output_device : device of the returned subgraph; default ``"cpu"`` as DGL's (None: the graph's
        device).

    Keyword-only extras:

    seed : int in [0, 2^64); default drawn from torch's generator at construction.
    normalize : bool
        Attach GraphSAINT coefficients: ``sg.edata['w']`` (aggregation weight including the
        ``aggr_norm`` normalisation) and ``sg.ndata['loss_w']`` (loss weight); see
        :mod:`dgl_accel.core.sampling.saint.norm` for the exact definitions.
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

    >>> import dgl
    >>> g = dgl.graph(([0, 1, 2, 1, 2, 0], [1, 2, 0, 0, 1, 2]))
    >>> sg = SAINTSampler("walk", (1, 2), seed=0, normalize=True).sample(g)
    >>> sorted(sg.ndata[dgl.NID].tolist()) == sorted(set(sg.ndata[dgl.NID].tolist())), "w" in sg.edata
    (True, True)
    """

    def __init__(self, mode, budget, cache=True, prefetch_ndata=None, prefetch_edata=None, output_device="cpu",
                 *, seed=None, normalize=False, train_mask=None, coverage=50, aggr_norm="both", exact_norm=True,
                 frontier_options=None, node_prob="norm"):
        super().__init__()
        self.mode = check_choice(mode, "mode", MODES)
        self.budget = _check_budget(mode, budget)
        self.cache = bool(cache)
        self.prefetch_ndata = list(prefetch_ndata or [])
        self.prefetch_edata = list(prefetch_edata or [])
        self.output_device = output_device
        self.init_seeds(seed)
        self.normalize = bool(normalize)
        if train_mask is not None and not isinstance(train_mask, (str, torch.Tensor)):
            raise expected("train_mask to be None, an ndata field name or a tensor", type(train_mask).__name__,
                           "pass train_mask='train_mask'.")
        self.train_mask = train_mask
        if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.integer, np.floating)):
            raise expected("coverage to be a positive number", repr(coverage), "pass e.g. coverage=50.")
        self.coverage = check_positive("coverage", coverage)
        self.aggr_norm = check_choice(aggr_norm, "aggr_norm", AGGR_NORMS)
        self.exact_norm = bool(exact_norm) and mode in ("node", "edge")
        self.frontier_options = dict(frontier_options or {})
        self.node_prob = check_choice(node_prob, "node_prob", NODE_PROBS)  # 'norm' (GraphSAINT's), 'degree' (DGL's)
        if self.normalize and ("w" in self.prefetch_edata or "loss_w" in self.prefetch_ndata):
            raise expected("prefetch fields other than 'w' / 'loss_w' with normalize=True", "a clash",
                           "rename the graph's field; the sampler writes sg.edata['w'] and sg.ndata['loss_w'].")
        self._norm_ref = None  # (weakref to graph, weakref to its index, Normalization)
        self._norm_dev = None  # (Normalization, device, edge_w, loss_w): its weights on the graph's device

    def __getstate__(self):
        # the normalisation cache holds weak references (not picklable); spawned workers recompute it
        state = self.__dict__.copy()
        state["_norm_ref"] = state["_norm_dev"] = None
        return state

    # ----------------------------------------------------------------------------- node sets
    def _draw(self, g, t, seed: int) -> np.ndarray:
        """Sorted distinct node ids (int64) of one draw with per-call seed ``seed``."""
        mode, b = self.mode, self.budget
        if mode == "frontier":
            nodes = frontier_sample(g, b[0], b[1], num_instances=1, seed=seed, **self.frontier_options)[0]
            return np.unique(nodes.detach().cpu().numpy().astype(np.int64, copy=False))
        if mode == "node":
            return draw_node(node_cdf(g, t, self.cache, self.node_prob), b, seed)
        if mode == "edge":
            return draw_edge(t, edge_cdf(g, t, self.cache), b, seed)
        return draw_walk(t, b[0], b[1], seed)

    def _draw_device(self, g, t, seed: int) -> torch.Tensor:
        """:meth:`_draw`'s node set, drawn on the graph's device (int64 there)."""
        mode, b = self.mode, self.budget
        if mode == "frontier":
            # frontier_sample returns sorted distinct ids
            return frontier_sample(g, b[0], b[1], num_instances=1, seed=seed, **self.frontier_options)[0].long()
        if mode == "node":
            cdf = node_cdf(g, t, self.cache, self.node_prob)
            return draw_node_device(_cdf_on_device(g, cdf, f"node.{self.node_prob}", self.cache), b, seed)
        if mode == "edge":
            cdf = _cdf_on_device(g, edge_cdf(g, t, self.cache), "edge", self.cache)
            return draw_edge_device(device_tables(g, t, self.cache), cdf, b, seed)
        return draw_walk_device(device_tables(g, t, self.cache), b[0], b[1], seed)

    def _on_device(self, g) -> bool:
        """Whether ``g``'s calls take the device pipeline (the Triton path: a CUDA graph)."""
        return choose_path(torch.empty(0, device=g.device)) == "triton"

    def sample_nodes(self, g) -> torch.Tensor:
        """The sorted node ids of the next subgraph, on the device the sampler draws them on (the
        graph's for a CUDA graph, else the CPU); advances the call counter like ``sample``."""
        _check_graph(g, self.mode, self.budget)
        t = tables(g, self.cache)
        if self._on_device(g):
            return self._draw_device(g, t, self.next_key())
        return torch.from_numpy(self._draw(g, t, self.next_key()))

    # ------------------------------------------------------------------------- normalisation
    def _train(self, g) -> np.ndarray:
        n = g.num_nodes()
        m = self.train_mask
        if m is None:
            return np.ones(n, dtype=bool)
        if isinstance(m, str):
            if m not in g.ndata:
                raise expected(f"g.ndata to have the train_mask field {m!r}", f"fields {list(g.ndata.keys())}",
                               f"set g.ndata[{m!r}] or pass a mask tensor.")
            m = g.ndata[m]
        m = m.detach().cpu()
        if m.dtype == torch.bool:
            if m.shape != (n,):
                raise expected(f"a boolean train_mask of shape ({n},)", tuple(m.shape), "pass one flag per node.")
            mask = m.numpy().copy()
        elif not m.is_floating_point() and m.dim() == 1:
            check_nodes(m, n, "train node ids")
            mask = np.zeros(n, dtype=bool)
            mask[m.numpy()] = True
        else:
            raise expected("train_mask to be a bool mask or an int index tensor",
                           f"{m.dtype} of shape {tuple(m.shape)}", "pass g.ndata['train_mask'].")
        if not mask.any():
            raise expected("train_mask to select at least one node", "none", "pass the mask of your training nodes.")
        return mask

    def normalization(self, g) -> Normalization:
        """Full-graph GraphSAINT coefficients for ``g`` (computed once per graph when ``cache``)."""
        ref = self._norm_ref
        if self.cache and ref is not None and ref[0]() is g and ref[1]() is g._graph:
            return ref[2]
        _check_graph(g, self.mode, self.budget)
        t = tables(g, self.cache)
        train = self._train(g)
        key = lambda i: call_seed(self.seed, i, _PRESAMPLE_WORKER)  # noqa: E731
        if self._on_device(g):  # the pre-samples drawn and counted on the device, read back once
            def counts():
                csr = in_csr(g)
                c_node, c_eid, N = count_inclusion_device(csr, lambda i: self._draw_device(g, t, key(i)),
                                                          torch.from_numpy(train).to(csr.device), self.coverage)
                return c_node.cpu().numpy(), c_eid.cpu().numpy()[t.csr.eids], N
        else:
            def counts():
                return count_inclusion(t, lambda i: self._draw(g, t, key(i)), train, self.coverage)
        norm = build_normalization(self.mode, t, self.budget, self.aggr_norm, train, counts, self.exact_norm,
                                   self.node_prob)
        if self.cache:
            self._norm_ref = (weakref.ref(g), weakref.ref(g._graph), norm)
        return norm

    # -------------------------------------------------------------------------------- sample
    def sample(self, g, indices=None):
        """One node-induced subgraph (``indices`` is the DataLoader's placeholder, unused)."""
        _check_graph(g, self.mode, self.budget)
        norm = self.normalization(g) if self.normalize else None
        t = tables(g, self.cache)
        if self._on_device(g):  # a CUDA graph: the node set and its subgraph built there
            sg = self._device_subgraph(g, in_csr(g), self._draw_device(g, t, self.next_key()), norm)
        else:
            nodes = self._draw(g, t, self.next_key())
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
        if sg.device != out:
            sg = sg.to(out)
        set_node_lazy_features(sg, self.prefetch_ndata)
        set_edge_lazy_features(sg, self.prefetch_edata)
        return sg

    def _device_subgraph(self, g, csr, nodes: torch.Tensor, norm):
        """The subgraph ``nodes`` (sorted distinct ids, on the CSR's device) induce, built there
        (``induced_device``: the CPU path's edges; its CSC order), with the normalisation's weights
        gathered from copies on the device made once per normalisation."""
        indptr, local, eids = induced_device(csr, nodes)
        sg = device_subgraph(indptr, local, nodes, eids, g.idtype)
        if norm is not None:
            if self._norm_dev is None or self._norm_dev[0] is not norm or self._norm_dev[1] != csr.device:
                self._norm_dev = (norm, csr.device, torch.from_numpy(norm.edge_w).to(csr.device),
                                  torch.from_numpy(norm.loss_w).to(csr.device))
            sg.edata["w"], sg.ndata["loss_w"] = self._norm_dev[2][eids], self._norm_dev[3][nodes]
        return sg


# ---------------------------------------------------------------------------- per-graph tables
def _per_graph(g, name: str, build, cache: bool):
    """``build(g)``, cached per graph under ``name`` unless ``cache=False``."""
    return cached(g, name, build) if cache else build(g)


def tables(g, cache: bool = True) -> Tables:
    """The graph's :class:`~dgl_accel.core.sampling.saint.draw.Tables` (cached per graph unless
    ``cache=False``)."""
    return _per_graph(g, "saint.tables", lambda h: build_tables(cpu_in_csr(h), out_csr(h)), cache)


def node_cdf(g, t: Tables, cache: bool = True, kind: str = "norm") -> np.ndarray:
    """Cumulative node-draw weights (:func:`~dgl_accel.core.sampling.saint.draw.node_weights`)."""
    return _per_graph(g, f"saint.node_cdf.{kind}", lambda _: np.cumsum(node_weights(t, kind)), cache)


def edge_cdf(g, t: Tables, cache: bool = True) -> np.ndarray:
    """Cumulative edge-draw weights (:func:`~dgl_accel.core.sampling.saint.draw.edge_weights`)."""
    return _per_graph(g, "saint.edge_cdf", lambda _: np.cumsum(edge_weights(t)), cache)


def device_tables(g, t: Tables, cache: bool = True) -> DeviceTables:
    """``t``'s arrays the draws read, on the graph's device (copied once per graph unless
    ``cache=False``)."""
    return _per_graph(g, "saint.device_tables", lambda _: DeviceTables.on(t, g.device), cache)


def _cdf_on_device(g, cdf: np.ndarray, name: str, cache: bool) -> torch.Tensor:
    """A cumulative table on the graph's device (copied once per graph unless ``cache=False``)."""
    return _per_graph(g, f"saint.cdf.{name}.device", lambda _: torch.from_numpy(cdf).to(g.device), cache)
