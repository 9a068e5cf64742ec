"""GraphSAINT node-set draws (node / edge / random-walk) from probability tables built once per graph.

Distributions (``deg_in`` / ``deg_out`` clamped at 1, as in DGL):

* node: ``budget`` i.i.d. draws with replacement, ``P(v) ∝ ||Ã[:, v]||²`` with the random-walk
  normalised adjacency ``Ã[x, v] = 1 / deg_in(x)`` for an edge v -> x (GraphSAINT, Zeng et al.
  ICLR'20, Sec. 3.4), i.e. ``w_v = Σ_{v->x} 1 / deg_in(x)²``.  Nodes without out-edges would get
  weight 0 and never be drawn; they get the smallest positive weight instead, so that every node
  can be covered.  ``node_prob="degree"`` gives DGL's ``P(v) ∝ max(deg_out(v), 1)`` (the squared
  column norm of the *unnormalised* adjacency; the GraphSAINT reference code does the same).
  The subgraph is induced by the distinct drawn nodes.
* edge: ``budget`` i.i.d. edge draws with replacement, ``P(u->v) ∝ 1/deg_out(u) + 1/deg_in(v)``
  (the paper's ``1/deg(u) + 1/deg(v)`` for symmetric graphs; DGL's formula); the subgraph is
  induced by the end points of the drawn edges.
* walk: ``num_roots`` roots uniform with replacement, each followed by a ``walk_length``-hop
  uniform random walk along out-edges (a walk at a node without out-edges stops there, as in
  ``dgl.sampling.random_walk``); the subgraph is induced by all visited nodes.

Tables are the cumulative weights (float64), drawn from by ``searchsorted`` on 53-bit uniforms;
the DGL adapter (``dgl_accel.sampling.saint``) builds and caches them per graph.

Randomness is counter-based (:func:`~..rng.uniform53_np`, Philox4x32-10 keyed by the per-call
seed), so a call's node set depends only on (sampler seed, call number, worker id), and
:mod:`.draw_device` draws the same sets on a GPU.  Counters: draw ``i`` of a node or edge call
is ``i``; a walk's root ``r`` is ``r`` (``min(floor(u n), n - 1)``) and its step ``s`` is
``(s + 1) * num_roots + r`` (``min(floor(u deg), deg - 1)``: the out-edge taken).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...csr import Structure
from ...jit import runtime
from ...jit import saint as jit_saint
from ..induced.subgraph import InCSR
from ..rng import uniform53_np

__all__ = ["NODE_PROBS", "Tables", "build_tables", "node_weights", "edge_weights", "uniforms", "draw_node",
           "draw_edge", "draw_walk"]


@dataclass(frozen=True, eq=False)
class Tables:
    """Per-graph arrays the draws need (CSR positions refer to the in-CSR ``csr``)."""

    csr: InCSR
    deg_in: np.ndarray      # float64 [n], clamped at 1
    deg_out: np.ndarray     # float64 [n], clamped at 1
    dst: np.ndarray         # int64 [E] destination (row) of each in-CSR position
    walk_start: np.ndarray  # [n] first out-CSR position of v in walk_next
    walk_deg: np.ndarray    # float64 [n] out-degree, 1 for nodes without out-edges
    walk_next: np.ndarray   # out-CSR targets, then v itself for every v without out-edges


def build_tables(csr: InCSR, oc: Structure) -> Tables:
    """The :class:`Tables` of a graph from its numpy in-CSR and its out-CSR view (``out_csr(g)``).

    >>> from dgl_accel.core.csr import Structure
    >>> import torch
    >>> oc = Structure(torch.tensor([0, 1, 1]), torch.tensor([1]), torch.tensor([0]), 2, 2, torch.device("cpu"))
    >>> t = build_tables(InCSR(np.array([0, 0, 1]), np.array([0]), np.array([0]), 2), oc)   # one edge 0 -> 1
    >>> sorted(draw_walk(t, 2, 1, seed=0).tolist())      # node 1 is a dead end: its walk stays
    [0, 1]
    """
    n = csr.num_nodes
    cnt_in = np.diff(csr.indptr)
    cnt_out = np.bincount(csr.indices, minlength=n)
    out_indptr = oc.indptr.cpu().numpy().astype(np.int64)
    out_indices = oc.indices.cpu().numpy().astype(np.int64)
    # A walk at a node without out-edges stops (DGL); equivalently, for the set of visited nodes,
    # it steps to itself: give such nodes one virtual out-edge to themselves, so a step has no branch.
    dead = np.flatnonzero(cnt_out == 0)
    walk_start = out_indptr[:-1].copy()
    walk_start[dead] = out_indices.shape[0] + np.arange(dead.shape[0])
    # int32 where ids fit: the walk tables share the cache with the subgraph gathers that follow
    dt = np.int32 if out_indices.shape[0] + n < 2**31 - 1 else np.int64
    return Tables(
        csr=csr,
        deg_in=np.maximum(cnt_in, 1).astype(np.float64),
        deg_out=np.maximum(cnt_out, 1).astype(np.float64),
        dst=np.repeat(np.arange(n, dtype=np.int64), cnt_in),
        walk_start=walk_start.astype(dt),
        walk_deg=np.maximum(cnt_out, 1).astype(np.float64),
        walk_next=np.concatenate([out_indices, dead]).astype(dt),
    )


NODE_PROBS = ("norm", "degree")


def node_weights(t: Tables, kind: str = "norm") -> np.ndarray:
    """Unnormalised node-draw weights: ``||Ã[:, v]||²`` (``kind="norm"``, the paper's; zeros raised
    to the smallest positive) or DGL's ``max(deg_out(v), 1)`` = ``||A[:, v]||²`` (``"degree"``)."""
    if kind == "degree":
        return t.deg_out.copy()
    csr = t.csr
    n = csr.num_nodes
    # Ã[v, u] = k_uv / deg_in(v) with k_uv parallel edges u -> v (the adjacency matrix of a multigraph)
    pairs, k = np.unique(t.dst * n + csr.indices, return_counts=True)
    w = np.bincount(pairs % n, weights=(k / t.deg_in[pairs // n]) ** 2, minlength=n)
    pos = w[w > 0]
    w[w <= 0] = pos.min() if pos.size else 1.0
    return w


def edge_weights(t: Tables) -> np.ndarray:
    """Unnormalised draw weights of the in-CSR positions: ``1/deg_out(src) + 1/deg_in(dst)``."""
    return 1.0 / t.deg_out[t.csr.indices] + 1.0 / t.deg_in[t.dst]


def uniforms(seed: int, start: int, count: int) -> np.ndarray:
    """``uniform53_np(seed, arange(start, start + count))``, compiled where it pays."""
    if runtime.worth(count):
        return jit_saint.uniform53(seed, start, count)
    return uniform53_np(seed, np.arange(start, start + count, dtype=np.int64))


def _search(cdf: np.ndarray, seed: int, k: int) -> np.ndarray:
    """``k`` i.i.d. weighted draws, returned sorted (the draws are exchangeable, so their order
    carries no information; sorted keys make numpy's searchsorted ~8x faster and ``unique`` trivial)."""
    u = uniforms(seed, 0, k)
    u.sort()
    u *= cdf[-1]
    idx = np.searchsorted(cdf, u, side="right")  # zero-weight entries (flat cdf) are never hit
    np.minimum(idx, cdf.shape[0] - 1, out=idx)   # u * total may round up to total
    return idx


def _unique_sorted(x: np.ndarray) -> np.ndarray:
    if x.shape[0] < 2:
        return x
    first = np.empty(x.shape[0], dtype=bool)
    first[0] = True
    np.not_equal(x[1:], x[:-1], out=first[1:])
    return x[first]


def draw_node(cdf: np.ndarray, budget: int, seed: int) -> np.ndarray:
    """Sorted distinct nodes of ``budget`` weighted draws with replacement."""
    return _unique_sorted(_search(cdf, seed, budget))


def draw_edge(t: Tables, cdf: np.ndarray, budget: int, seed: int) -> np.ndarray:
    """Sorted distinct end points of ``budget`` weighted edge draws with replacement."""
    pos = _search(cdf, seed, budget)
    return np.unique(np.concatenate([t.csr.indices[pos], t.dst[pos]]))


def draw_walk(t: Tables, num_roots: int, length: int, seed: int) -> np.ndarray:
    """Sorted distinct nodes visited by ``num_roots`` uniform-root walks of ``length`` hops."""
    n = t.csr.num_nodes
    u = uniforms(seed, 0, (length + 1) * num_roots).reshape(length + 1, num_roots)
    visited = np.empty((length + 1, num_roots), dtype=t.walk_next.dtype)
    pick = (u[0] * n).astype(np.int64)
    np.minimum(pick, n - 1, out=pick)
    visited[0] = pick
    cur = visited[0]
    for s in range(length):
        deg = np.take(t.walk_deg, cur)
        step = u[s + 1]
        step *= deg
        pick = step.astype(np.int64)
        np.minimum(pick, deg.astype(np.int64) - 1, out=pick)  # u * deg can round up to deg
        pick += np.take(t.walk_start, cur)
        cur = visited[s + 1]
        np.take(t.walk_next, pick, out=cur)
    visited = visited.reshape(-1).astype(np.int64)
    visited.sort()
    return _unique_sorted(visited)
