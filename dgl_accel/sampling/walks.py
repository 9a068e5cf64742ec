"""Random walks on DGL graphs: drop-ins for ``dgl.sampling.random_walk`` and
``dgl.sampling.node2vec_random_walk`` on homogeneous graphs, and GraphSAINT's multi-dimensional
random walk.  The DGL adapter of :mod:`dgl_accel.core.sampling.walks` (which documents the
random-number layout), :mod:`~dgl_accel.core.sampling.walks_node2vec` and
:mod:`~dgl_accel.core.sampling.walks_mdrw`: the graph's out-CSR tables are cached per graph, edge
weights are read from ``g.edata[prob]``, and traces come back in the graph's idtype.
"""
from __future__ import annotations

import torch

from ..core.sampling.checks import expected
from ..core.sampling.walks import WalkCSR
from ..core.sampling.walks import random_walk as random_walk_csr
from ..core.sampling.walks_mdrw import MDRWResult
from ..core.sampling.walks_mdrw import multi_dimensional_random_walk as mdrw_csr
from ..core.sampling.walks_node2vec import node2vec_random_walk as node2vec_csr
from ..graph.structure import cached, check_graph, out_csr
from .errors import dgl_errors

__all__ = ["random_walk", "node2vec_random_walk", "multi_dimensional_random_walk", "MDRWResult", "walk_csr"]


def walk_csr(g) -> WalkCSR:
    """The :class:`~dgl_accel.core.sampling.walks.WalkCSR` of ``g``'s out-edges (cached per graph)."""
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
    return g.edata[prob]


@dgl_errors
def random_walk(g, nodes, length, *, prob=None, restart_prob=0.0, seed=None, return_eids=False):
    """Random walks along out-edges, one per entry of ``nodes``; drop-in for
    ``dgl.sampling.random_walk(g, nodes, length=length, prob=prob, restart_prob=restart_prob)``
    on homogeneous graphs.

    Parameters
    ----------
    g : homogeneous DGLGraph on the CPU (native path) or a GPU (Triton kernels).
    nodes : 1-D ids of the start nodes (repeat a node for several walks).
    length : number of transitions per walk (>= 0).
    prob : name of an edge feature of non-negative weights; transitions pick an out-edge with
        probability proportional to its weight (rows whose weights sum to 0 are dead ends).
        None: uniform over out-edges (DeepWalk).
    restart_prob : float or tensor [length]: probability to terminate the walk before each
        transition (DGL's semantics; the rest of the trace is -1).  0 / None: never.
    seed : int in [0, 2^64) (or a one-element integer tensor) for the Philox counters; None draws
        one from torch's RNG, so ``torch.manual_seed`` makes runs reproducible.
    return_eids : also return the traversed edge ids.

    Returns
    -------
    ``(traces, types)`` or ``(traces, eids, types)`` like DGL: traces [len(nodes), length + 1] of
    the graph's idtype, -1 after a walk stops (dead end or restart); eids [len(nodes), length],
    -1 padded; types [length + 1] of zeros (node type ids).

    >>> import dgl
    >>> traces, types = random_walk(dgl.graph(([0, 1, 2], [1, 2, 0])), torch.tensor([0]), 4, seed=0)
    >>> traces.tolist()
    [[0, 1, 2, 0, 1]]
    """
    csr = walk_csr(g)
    traces, eids = random_walk_csr(csr, nodes, length, weights=_weights(g, prob), restart_prob=restart_prob,
                                   seed=seed, return_eids=return_eids)
    idtype = g.idtype
    types = torch.zeros(traces.shape[1], dtype=idtype, device=traces.device)
    traces = traces.to(idtype)
    return (traces, eids.to(idtype), types) if return_eids else (traces, types)


@dgl_errors
def node2vec_random_walk(g, nodes, p, q, walk_length, *, prob=None, seed=None, return_eids=False):
    """node2vec walks (Grover & Leskovec 2016) along out-edges; drop-in for
    ``dgl.sampling.node2vec_random_walk(g, nodes, p, q, walk_length, prob=prob)``; see
    :func:`dgl_accel.core.sampling.walks_node2vec.node2vec_random_walk` for the sampling.

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
    :func:`dgl_accel.core.sampling.walks_mdrw.multi_dimensional_random_walk`); the
    :class:`MDRWResult` holds ids in ``g.idtype``.

    >>> import dgl
    >>> multi_dimensional_random_walk(dgl.graph(([0, 1, 2], [1, 2, 0])), torch.tensor([0]), 3, seed=0).nodes.tolist()
    [[0, 1, 2]]
    """
    res = mdrw_csr(walk_csr(g), num_roots_or_roots, walk_budget, num_instances=num_instances, seed=seed)
    return MDRWResult(*(t.to(g.idtype) for t in res))
