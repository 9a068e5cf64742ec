"""Random walks on DGL graphs: drop-ins for ``dgl.sampling.random_walk`` (homogeneous graphs, and
heterographs along a metapath) and ``dgl.sampling.node2vec_random_walk`` (homogeneous, as DGL), and
GraphSAINT's multi-dimensional random walk.  The DGL adapter of :mod:`dgl_accel.core.sampling.walks.random_walk`
(which documents the random-number layout), :mod:`~dgl_accel.core.sampling.walks.node2vec`,
:mod:`~dgl_accel.core.sampling.walks.metapath` and :mod:`~dgl_accel.core.sampling.walks.mdrw`: the
graph's out-CSR tables (one per relation for a metapath) are cached per graph, edge weights are read
from ``g.edata[prob]``, and traces come back in the graph's idtype.
"""
from __future__ import annotations

import torch

from ..core.sampling.checks import check_length, expected
from ..core.sampling.walks.mdrw import MDRWResult
from ..core.sampling.walks.mdrw import multi_dimensional_random_walk as mdrw_csr
from ..core.sampling.walks.metapath import check_chain, metapath_walk, relation_csr
from ..core.sampling.walks.node2vec import node2vec_random_walk as node2vec_csr
from ..core.sampling.walks.random_walk import WalkCSR
from ..core.sampling.walks.random_walk import random_walk as random_walk_csr
from ..graph.structure import cached, check_graph, out_csr, relation_out_csr
from .errors import dgl_errors

__all__ = ["random_walk", "node2vec_random_walk", "multi_dimensional_random_walk", "MDRWResult", "walk_csr",
           "relation_walk_csr"]


def walk_csr(g) -> WalkCSR:
    """The :class:`~dgl_accel.core.sampling.walks.random_walk.WalkCSR` of ``g``'s out-edges (cached per graph)."""
    check_graph(g)
    return cached(g, "walks_csr", lambda h: WalkCSR(out_csr(h)))


def _weights(g, prob):
    """``g.edata[prob]`` (None for ``prob=None``), with the errors of a missing or misnamed field."""
    if prob is None:
        return None
    if not isinstance(prob, str):
        raise expected("prob to be the name of an edge feature (str) or None", repr(prob),
                       "store the weights with g.edata['w'] = w and pass prob='w'.")
    if prob not in g.edata:
        raise expected(f"an edge feature named {prob!r}", f"edge features {sorted(g.edata.keys())}",
                       f"set g.edata[{prob!r}] = weights (one non-negative value per edge).")
    return _scalar_per_edge(g.edata[prob], prob)


def _scalar_per_edge(w, prob: str):
    """``w`` unless it is not 1-D (DGL refuses a [E, 1] weight column too)."""
    if w.dim() != 1:
        raise expected(f"edge feature {prob!r} to hold one scalar per edge, shape (num_edges,)",
                       f"shape {tuple(w.shape)}", f"store it flat, e.g. g.edata[{prob!r}] = w.reshape(-1).")
    return w


@dgl_errors
def random_walk(g, nodes, *, metapath=None, length=None, prob=None, restart_prob=None, return_eids=False, seed=None):
    """Random walks along out-edges, one per entry of ``nodes``; drop-in for
    ``dgl.sampling.random_walk`` (same signature and defaults; ``seed`` is ours, keyword-only).

    Parameters
    ----------
    g : DGLGraph on the CPU (native path) or a GPU (Triton kernels for one relation, torch ops
        for a metapath over several).
    nodes : 1-D ids of the start nodes (repeat a node for several walks); with a metapath, ids of
        the first edge type's source node type.
    metapath : list of edge types (names or canonical triples): step ``s`` walks along
        ``metapath[s]``, whose source type must be the previous step's destination type.  Needed
        for a heterograph; on a homogeneous graph ``length`` says the same.
    length : number of transitions per walk (>= 0), for a graph with one node and one edge type.
        Given with ``metapath`` it must equal ``len(metapath)`` (DGL ignores it silently).
    prob : name of an edge feature of non-negative weights; transitions pick an out-edge with
        probability proportional to its weight (rows whose weights sum to 0 are dead ends).  With
        a metapath, a relation without the feature is walked uniformly (as in DGL); the feature
        must exist on at least one of them (else a misspelt name would walk uniformly everywhere).
        None: uniform over out-edges (DeepWalk).
    restart_prob : float or tensor [length]: probability to terminate the walk before each
        transition (DGL's semantics; the rest of the trace is -1).  None / 0: never.
    return_eids : also return the traversed edge ids (each in its step's edge type).
    seed : int in [0, 2^64) (or a one-element integer tensor) for the Philox counters; None draws
        one from torch's RNG, so ``torch.manual_seed`` makes runs reproducible.

    Returns
    -------
    ``(traces, types)`` or ``(traces, eids, types)`` like DGL: traces [len(nodes), length + 1] of
    the graph's idtype (step ``s``'s ids are of node type ``types[s]``), -1 after a walk stops
    (dead end or restart); eids [len(nodes), length], -1 padded; types [length + 1], the node type
    id (``g.get_ntype_id``) of each step.

    >>> import dgl
    >>> traces, types = random_walk(dgl.graph(([0, 1, 2], [1, 2, 0])), torch.tensor([0]), length=4, seed=0)
    >>> traces.tolist()
    [[0, 1, 2, 0, 1]]
    >>> hg = dgl.heterograph({("u", "buys", "i"): ([0, 1], [1, 0]), ("i", "sold-to", "u"): ([0, 1], [0, 1])})
    >>> traces, types = random_walk(hg, torch.tensor([0, 1]), metapath=["buys", "sold-to"], seed=0)
    >>> traces.tolist(), types.tolist()
    ([[0, 1, 1], [1, 0, 0]], [1, 0, 1])
    """
    relations = _metapath(g, metapath, length)
    idtype = g.idtype
    start_type = relations[0][0] if relations else g.canonical_etypes[0][0]
    ntype_ids = [g.get_ntype_id(start_type)] + [g.get_ntype_id(r[2]) for r in relations]
    types = torch.tensor(ntype_ids, dtype=idtype, device=g.device)
    homogeneous = len(g.canonical_etypes) == 1 and len(g.ntypes) == 1
    if homogeneous or (len(set(relations)) == 1 and relations[0][0] == relations[0][2]):
        # one relation within one node type (every homogeneous walk): the fused walk kernels, whose
        # samples metapath_walk reproduces exactly
        csr = walk_csr(g) if homogeneous else relation_walk_csr(g, relations[0])
        w = _weights(g, prob) if homogeneous else _relation_weights(g, prob, relations)[0]
        traces, eids = random_walk_csr(csr, nodes, len(relations), weights=w, restart_prob=restart_prob,
                                       seed=seed, return_eids=return_eids)
    else:
        steps = [relation_walk_csr(g, r) for r in relations]
        weights = _relation_weights(g, prob, relations)
        traces, eids = metapath_walk(steps, nodes, g.num_nodes(start_type), weights=weights,
                                     restart_prob=restart_prob, seed=seed, return_eids=return_eids)
    traces = traces.to(idtype)
    return (traces, eids.to(idtype), types) if return_eids else (traces, types)


def _metapath(g, metapath, length) -> list:
    """The canonical edge types walked, one per step (checked: they exist and chain)."""
    if metapath is None:
        if len(g.canonical_etypes) != 1 or len(g.ntypes) != 1:
            raise expected("a metapath for a graph with several node or edge types",
                           f"metapath=None on node types {g.ntypes} and edge types {g.canonical_etypes}",
                           "pass metapath=[etype, ...], one edge type per step.")
        if length is None:
            raise expected("either metapath or length", "neither", "pass length=<number of steps> (or a metapath).")
        return [g.canonical_etypes[0]] * check_length("length", length)
    if isinstance(metapath, (str, tuple)) or not hasattr(metapath, "__iter__"):
        raise expected("metapath to be a list of edge types", repr(metapath), "pass e.g. metapath=['follows'] * 3.")
    relations = []
    for s, etype in enumerate(metapath):
        try:
            relations.append(g.to_canonical_etype(etype))
        except Exception:  # DGL raises DGLError for unknown / ambiguous names, TypeError for odd objects
            raise expected(f"metapath[{s}] to be an edge type of the graph", repr(etype),
                           f"use one of {g.canonical_etypes}.") from None
    if length is not None and length != len(relations):
        raise expected(f"length to equal len(metapath) = {len(relations)} when both are given", repr(length),
                       "drop length: the metapath sets the number of steps.")
    check_length("len(metapath)", len(relations))
    check_chain(relations)
    return relations


def relation_walk_csr(g, etype) -> WalkCSR:
    """The :class:`~dgl_accel.core.sampling.walks.random_walk.WalkCSR` of one relation's out-edges (cached per
    graph), see :func:`dgl_accel.core.sampling.walks.metapath.relation_csr`."""
    def build(h):
        out = relation_out_csr(h, etype)
        return relation_csr(out.indptr, out.indices, out.eids, out.num_rows, out.num_cols)
    return cached(g, f"walks_csr.{etype}", build)


def _relation_weights(g, prob, relations) -> list:
    """Per step, ``g.edges[etype].data[prob]`` or None where that relation lacks it (as DGL)."""
    if prob is None:
        return [None] * len(relations)
    if not isinstance(prob, str):
        raise expected("prob to be the name of an edge feature (str) or None", repr(prob),
                       "store the weights with g.edges[etype].data['w'] = w and pass prob='w'.")
    found = {r: _scalar_per_edge(g.edges[r].data[prob], prob) for r in set(relations) if prob in g.edges[r].data}
    if relations and not found:
        raise expected(f"an edge feature named {prob!r} on at least one edge type of the metapath",
                       f"none on {sorted(set(relations))}",
                       f"set g.edges[etype].data[{prob!r}] = weights (one non-negative value per edge).")
    return [found.get(r) for r in relations]


@dgl_errors
def node2vec_random_walk(g, nodes, p, q, walk_length, prob=None, return_eids=False, *, seed=None):
    """node2vec walks (Grover & Leskovec 2016) along out-edges; drop-in for
    ``dgl.sampling.node2vec_random_walk(g, nodes, p, q, walk_length, prob=None, return_eids=False)``
    (same signature, ``prob`` positional; ``seed`` is ours, keyword-only); see
    :func:`dgl_accel.core.sampling.walks.node2vec.node2vec_random_walk` for the sampling.
    Homogeneous graphs only, as DGL.

    Returns traces [len(nodes), walk_length + 1] (graph idtype, -1 after a dead end), plus eids
    [len(nodes), walk_length] if ``return_eids`` (then a tuple, as in DGL).

    >>> import dgl
    >>> node2vec_random_walk(dgl.graph(([0, 1, 2], [1, 2, 0])), torch.tensor([0]), 1.0, 1.0, 3, seed=0).tolist()
    [[0, 1, 2, 0]]
    """
    csr = walk_csr(g)
    traces, eids = node2vec_csr(csr, nodes, p, q, walk_length, weights=_weights(g, prob), seed=seed,
                                return_eids=return_eids)
    traces = traces.to(g.idtype)
    return (traces, eids.to(g.idtype)) if return_eids else traces


@dgl_errors
def multi_dimensional_random_walk(g, num_roots_or_roots, walk_budget, *, num_instances=None, seed=None):
    """GraphSAINT's frontier sampler as a multi-dimensional random walk on ``g`` (see
    :func:`dgl_accel.core.sampling.walks.mdrw.multi_dimensional_random_walk`); the
    :class:`MDRWResult` holds ids in ``g.idtype``.

    >>> import dgl
    >>> multi_dimensional_random_walk(dgl.graph(([0, 1, 2], [1, 2, 0])), torch.tensor([0]), 3, seed=0).nodes.tolist()
    [[0, 1, 2]]
    """
    res = mdrw_csr(walk_csr(g), num_roots_or_roots, walk_budget, num_instances=num_instances, seed=seed)
    return MDRWResult(*(t.to(g.idtype) for t in res))
