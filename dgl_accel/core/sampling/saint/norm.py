"""GraphSAINT normalisation coefficients (Zeng et al., ICLR'20, Sec. 3.2 and Thm. 1), for the
subgraphs of :class:`dgl_accel.sampling.SAINTSampler` (node sets: :mod:`.draw`).

Notation: a sampler returns the subgraph induced by a random node set S.  For a node v and an edge
u -> v (v = destination, the node that aggregates),

    p_v  = P(v in S),       p_uv = P(u in S and v in S)  (= P(edge u->v in the subgraph)),
    alpha_uv = p_uv / p_v   (aggregator normalisation),
    lambda_v = |V_train| * p_v   (loss normalisation).

With these, for a subgraph sg (``Ã`` = the chosen full-graph normalisation, see ``aggr_norm``):

* aggregation ``ζ_v = Σ_{u->v in sg} Ã[v, u] / alpha_uv · x_u`` is unbiased for the full-graph
  ``Σ_u Ã[v, u] x_u`` given v in S.  Delivered as ``sg.edata['w'] = Ã[v, u] / alpha_uv``, so
  ``GraphConv(..., norm='none')(sg, x, edge_weight=sg.edata['w'])`` is the unbiased layer.
* loss ``L = Σ_{v in sg ∩ train} L_v / lambda_v`` has expectation ``(1/|V_train|) Σ_{v in train} L_v``
  (the full-batch mean training loss).  Delivered as ``sg.ndata['loss_w'] = 1 / lambda_v``, so
  ``(loss_w * F.cross_entropy(out, y, reduction='none'))[train].sum()`` is that unbiased loss.

How p is obtained:

* node and edge modes: exactly, by closed forms (draws are i.i.d. with replacement, so
  ``P(v not in S) = (1 - π_v)^B`` and ``P(u, v not in S) = (1 - π_u - π_v + π_uv)^B`` where π
  is the per-draw probability of hitting v / both; see :func:`exact_inclusion`).
* walk and frontier modes (no closed form): by counting, as in the paper.  Node sets are
  pre-sampled until the training nodes are covered ``coverage`` times on average
  (Σ_i |S_i ∩ V_train| >= coverage · |V_train|); with N pre-samples, C_v = #{i: v in S_i} and
  C_uv = #{i: u, v in S_i}: ``p_v ≈ C_v / N`` and ``alpha_uv ≈ C_uv / C_v``.  A node or edge never
  covered is counted once (``C := max(C, 1)``), so its weights stay finite: loss weight
  ``N / (|V_train|)`` and ``1/alpha_uv = max(C_v, 1) / max(C_uv, 1)``.
* ``p_v = 0`` (possible only in edge mode, for nodes without edges: they never appear in a
  subgraph) gives loss weight 0.

>>> import torch
>>> from dgl_accel.core.csr import Structure
>>> from dgl_accel.core.sampling.induced.subgraph import InCSR
>>> from dgl_accel.core.sampling.saint.draw import build_tables
>>> oc = Structure(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([0, 1]), 2, 2, torch.device("cpu"))
>>> t = build_tables(InCSR(np.array([0, 1, 2]), np.array([1, 0]), np.array([0, 1]), 2), oc)   # 0 <-> 1
>>> p_node, p_edge = exact_inclusion("node", t, 1)     # one node drawn: never both ends
>>> p_node.tolist(), p_edge.tolist()
([0.5, 0.5], [0.0, 0.0])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import expected
from ..induced.subgraph import induced_entries
from .draw import Tables, edge_weights, node_weights

__all__ = ["Normalization", "exact_inclusion", "count_inclusion", "check_presampling", "aggregation_norm",
           "build_normalization"]

AGGR_NORMS = ("both", "right", "none")


@dataclass(frozen=True, eq=False)
class Normalization:
    """Full-graph coefficients: ``edge_w[eid]`` = Ã[v, u] / alpha_uv, ``loss_w[v]`` = 1 / lambda_v,
    ``p_node[v]`` = P(v in S) (exact or estimated), ``inv_alpha[eid]`` = 1 / alpha_uv;
    ``method`` is "exact" or "count"; ``num_presampled`` = N (0 for exact)."""

    edge_w: np.ndarray       # float32 [E], by parent edge id
    loss_w: np.ndarray       # float32 [n]
    p_node: np.ndarray       # float64 [n]
    inv_alpha: np.ndarray    # float64 [E], by parent edge id
    method: str
    num_presampled: int


def _miss(pi: np.ndarray, budget: int) -> np.ndarray:
    """``(1 - pi)^budget`` without cancellation for small pi (pi clipped to [0, 1])."""
    with np.errstate(divide="ignore"):  # pi = 1: log1p(-1) = -inf, exp(-inf) = 0 as wanted
        return np.exp(budget * np.log1p(-np.clip(pi, 0.0, 1.0)))


def exact_inclusion(mode: str, t: Tables, budget: int, node_prob: str = "norm"):
    """Closed-form ``(p_node [n], p_edge [E by in-CSR position])`` for the node and edge samplers."""
    csr = t.csr
    n, src, dst = csr.num_nodes, csr.indices, t.dst
    loop = src == dst
    if mode == "node":
        w = node_weights(t, node_prob)
        pi = w / w.sum()
        p = 1.0 - _miss(pi, budget)
        both_miss = _miss(pi[src] + pi[dst], budget)            # neither u nor v drawn
    elif mode == "edge":
        w = edge_weights(t)
        rho = w / w.sum()
        # q_v: probability that one draw hits an edge incident to v (a self-loop counts once)
        q = np.bincount(src, rho, minlength=n) + np.bincount(dst, rho, minlength=n) \
            - np.bincount(src[loop], rho[loop], minlength=n)
        key = np.minimum(src, dst) * n + np.maximum(src, dst)    # the unordered pair {u, v}
        _, inv = np.unique(key, return_inverse=True)
        r = np.bincount(inv, rho)[inv]                           # one draw hits an edge between u and v
        p = 1.0 - _miss(q, budget)
        both_miss = _miss(q[src] + q[dst] - r, budget)
    else:
        raise expected("mode 'node' or 'edge' for closed-form inclusion probabilities", repr(mode),
                       "use count_inclusion for 'walk' and 'frontier'.")
    # P(u in S and v in S) = p_u + p_v - (1 - P(neither))
    p_edge = np.where(loop, p[dst], p[src] + p[dst] - (1.0 - both_miss))
    return p, np.clip(p_edge, 0.0, 1.0)


def count_inclusion(t: Tables, draw, train: np.ndarray, coverage: float, max_presample: int = 100_000):
    """Counts ``(C_v [n], C_uv [E by in-CSR position], N)`` over pre-sampled node sets.

    ``draw(i)`` returns the sorted unique node set of pre-sample ``i``; sampling stops once the
    training nodes (bool mask ``train``) are covered ``coverage`` times on average."""
    csr = t.csr
    n, E = csr.num_nodes, csr.indices.shape[0]
    positions = csr.positions()
    c_node = np.zeros(n, dtype=np.int64)
    c_edge = np.zeros(E, dtype=np.int64)
    target = coverage * int(train.sum())
    covered, N, pending, pending_len = 0, 0, [], 0
    while covered < target:
        nodes = draw(N)
        c_node[nodes] += 1  # nodes are unique, so no np.add.at needed
        pending.append(induced_entries(csr.indptr, csr.indices, positions, nodes, n)[2])
        pending_len += pending[-1].shape[0]
        if pending_len > 4 * E:  # flush: bincount over many samples at once, bounded memory
            c_edge += np.bincount(np.concatenate(pending), minlength=E)
            pending, pending_len = [], 0
        covered += int(train[nodes].sum())
        N += 1
        check_presampling(coverage, covered, N, target, max_presample)
    if pending:
        c_edge += np.bincount(np.concatenate(pending), minlength=E)
    return c_node, c_edge, N


def check_presampling(coverage: float, covered: int, N: int, target: float, max_presample: int) -> None:
    """After pre-sample ``N`` (checked at 16 and at the cap): raise when reaching ``target`` covered
    training nodes would take more than ``max_presample`` subgraphs at the rate so far."""
    if N == 16 or N == max_presample:
        need = target / max(covered / N, 1e-300)
        if need > max_presample:
            raise expected(f"normalisation pre-sampling to reach coverage {coverage} within {max_presample} "
                           "subgraphs", f"{covered / N:.3g} training nodes per subgraph, so about {need:.3g} "
                           "subgraphs needed", "raise the budget, lower coverage, or use mode 'node' / 'edge' "
                           "(exact normalisation).")


def aggregation_norm(t: Tables, aggr_norm: str) -> np.ndarray:
    """Ã[v, u] of every in-CSR position (u = source, v = destination), on full-graph degrees."""
    if aggr_norm == "both":    # GraphConv norm='both': 1 / sqrt(deg_out(u) deg_in(v))
        return 1.0 / np.sqrt(t.deg_out[t.csr.indices] * t.deg_in[t.dst])
    if aggr_norm == "right":   # mean aggregation: 1 / deg_in(v)
        return 1.0 / t.deg_in[t.dst]
    return np.ones(t.dst.shape[0])


def build_normalization(mode: str, t: Tables, budget, aggr_norm: str, train: np.ndarray, counts, exact: bool,
                        node_prob: str = "norm") -> Normalization:
    """Coefficients for a sampler: exact closed forms when ``exact`` (node / edge), else counting:
    ``counts()`` returns :func:`count_inclusion`'s ``(C_v, C_uv by in-CSR position, N)``."""
    csr = t.csr
    n_train = int(train.sum())
    if exact:
        p_node, p_pos = exact_inclusion(mode, t, budget, node_prob)
        pv = p_node[t.dst]
        with np.errstate(divide="ignore", invalid="ignore"):
            inv_alpha = np.where(p_pos > 0, pv / p_pos, 1.0)
        method, N = "exact", 0
    else:
        c_node, c_pos, N = counts()
        cv = np.maximum(c_node, 1).astype(np.float64)
        inv_alpha = cv[t.dst] / np.maximum(c_pos, 1)
        p_node = cv / N
        method = "count"
    with np.errstate(divide="ignore"):
        loss_w = np.where(p_node > 0, 1.0 / (n_train * p_node), 0.0)
    w_pos = aggregation_norm(t, aggr_norm) * inv_alpha
    E = csr.eids.shape[0]
    edge_w = np.empty(E, dtype=np.float32)
    inv_alpha_eid = np.empty(E, dtype=np.float64)
    edge_w[csr.eids] = w_pos
    inv_alpha_eid[csr.eids] = inv_alpha
    return Normalization(edge_w=edge_w, loss_w=loss_w.astype(np.float32),
                         p_node=p_node, inv_alpha=inv_alpha_eid, method=method, num_presampled=N)
