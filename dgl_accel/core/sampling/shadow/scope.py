"""shaDow-GNN's scopes (Zeng et al., NeurIPS'21: decoupled depth and scope) on CSR views, DGL-free:
per-target node sets, the merged k-hop set of DGL's ``ShaDowKHopSampler`` and the batch of
per-target induced subgraphs.  The DGL adapter is :mod:`dgl_accel.sampling.shadow`; the PPR scope
is :mod:`.ppr`; the compiled batched induced subgraph is :mod:`dgl_accel.core.jit.shadow`.

Per-target k-hop sets (:func:`khop_node_sets`, the paper's L-hop scope): target ``t`` starts with
``{t}``; at hop ``k`` every node first reached at hop ``k - 1`` draws ``fanouts[k]`` of its
neighbours (CSR row; -1 = all of them; without replacement: ``min(fanout, degree)`` distinct
ones), and the nodes not yet in the set join it.  Draws are counter-based Philox (the neighbour
choice of :mod:`..neighbor.choice`) with counter id ``(t * L + k) * n + v`` for node ``v`` at hop ``k`` of
``L`` (``t`` the target's node id, ``n`` the node count): a target's set depends only on (seed,
target), never on the batch, its order or the device (CPU and Triton paths agree).

Merged k-hop set (:func:`merged_khop_nodes`, DGL's ``ShaDowKHopSampler``): layer by layer from the
output side, every node reached so far (seeds included) draws ``fanout`` in-neighbours keyed by
(layer, node) exactly as :class:`dgl_accel.sampling.NeighborSampler` does, so for one call key its
node list equals that sampler's ``input_nodes``: the seeds first, then each layer's new nodes in
increasing id.

>>> from dgl_accel.core.csr import Structure
>>> path = Structure(indptr=torch.tensor([0, 1, 3, 4]), indices=torch.tensor([1, 0, 2, 1]),
...                  eids=torch.arange(4), num_rows=3, num_cols=3, device=torch.device("cpu"))
>>> s = khop_node_sets(path, torch.tensor([0, 2]), [-1], seed=0)     # 0 - 1 - 2, one hop
>>> s.nodes.tolist(), s.offsets.tolist(), s.target_pos.tolist()
([0, 1, 1, 2], [0, 2, 4], [0, 3])
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import torch

from ...backend import choose_path, record
from ...csr import Structure
from ...jit import runtime
from ...jit import shadow as jit_shadow
from ..arrays import np64, offsets
from ..checks import check_below, check_fanouts, check_nodes, node_ids, resolve_seed
from ..induced.subgraph import HalfCSR, induced_entries, induced_symmetric_coo
from ..neighbor.choice import uniform_choice_np
from ..neighbor.sample import choose_positions, drop_excluded, relabel_sources
from .scope_device import khop_node_sets_device

__all__ = ["NodeSets", "khop_node_sets", "merged_khop_nodes", "induced_batch", "induced_batch_symmetric"]


class NodeSets(NamedTuple):
    """One node set per target, concatenated: set ``t`` is ``nodes[offsets[t]:offsets[t+1]]`` in
    increasing id; ``nodes[target_pos[t]]`` is target ``t`` (a global position); ``scores`` the
    PPR estimates of the nodes (PPR sets only, else None).  int64 / float64 tensors, on the CPU
    but for :func:`khop_node_sets` on a CUDA CSR (the device's)."""

    offsets: torch.Tensor
    nodes: torch.Tensor
    target_pos: torch.Tensor
    scores: torch.Tensor | None = None

    def graph_ids(self) -> torch.Tensor:
        """Set index of every entry of ``nodes`` (the node-to-subgraph index of a batch)."""
        counts = self.offsets.diff()
        return torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts,
                                       output_size=self.nodes.shape[0])


def _all_positions(indptr: np.ndarray, v: np.ndarray):
    """(flat CSR positions of every neighbour of each ``v``, counts)."""
    start = indptr[v]
    cnt = indptr[v + 1] - start
    offs = offsets(cnt)
    return np.repeat(start - offs[:-1], cnt) + np.arange(int(offs[-1]), dtype=np.int64), cnt


def khop_node_sets(csr: Structure, targets, fanouts, *, replace: bool = False, seed=None,
                   compiled: bool | None = None) -> NodeSets:
    """Per-target k-hop node sets (the module docstring states the rule and the draws).

    csr: neighbour lists (``in_csr(g)`` in the samplers); targets: 1-D node ids (repeats allowed);
    fanouts: one int per hop, target side first, -1 = every neighbour; seed: the Philox key (the
    seed rule of :mod:`..checks`).  ``compiled``: the compiled twin (:func:`dgl_accel.core.jit.shadow.khop_sets`,
    parallel over targets, same sets) for fanouts >= 0; default where numba is enabled and the
    backend picks the CPU path (else its numpy twin per hop).  On the Triton path (a CUDA CSR) the
    sets are built on the device (:mod:`.scope_device`: the same sets, on the CSR's device).
    Returns :class:`NodeSets` (no scores)."""
    fanouts = check_fanouts(fanouts)
    seed = resolve_seed(seed)
    n = int(csr.num_rows)
    tg = node_ids(targets, n, "targets")
    T, L = tg.numel(), len(fanouts)
    check_below("nodes^2 x hops", n * n * L, "2^60 / max(fanouts)", 2**62 // 4 // max(max(fanouts), 1),
                "sample fewer hops or use fanout -1.")
    if choose_path(csr.indptr) == "triton":
        for _ in range(sum(f != -1 for f in fanouts)):  # one choice per sampled hop, as the CPU path records
            record("neighbor_choice", "triton", csr.indptr.device)
        return NodeSets(*khop_node_sets_device(csr, tg, fanouts, seed=seed, replace=replace))
    indptr = np64(csr.indptr)
    indices = np64(csr.indices)
    tnp = tg.numpy()
    if compiled is None:
        compiled = runtime.enabled() and choose_path(csr.indptr) == "native"
    if compiled and min(fanouts) >= 0:
        record("neighbor_choice", "native", csr.indptr.device)
        chunks = (os.cpu_count() or 1) if runtime.parallel_allowed() else 1
        nodes, counts = jit_shadow.khop_sets(indptr, indices, tnp, fanouts, replace, seed, chunks)
        offs = offsets(counts)
        rank = np.argmax(nodes == tnp[:, None], axis=1)
        return NodeSets(torch.from_numpy(offs), torch.from_numpy(nodes[nodes >= 0]), torch.from_numpy(offs[:-1] + rank))
    reached = np.arange(T, dtype=np.int64) * n + tnp  # keys set * n + node, sorted (set-major)
    owner, v = np.arange(T, dtype=np.int64), tnp.copy()
    for k, f in enumerate(fanouts):
        if v.size == 0:
            break
        if f == -1:
            flat, cnt = _all_positions(indptr, v)
        else:
            cids = (tnp[owner] * L + k) * n + v
            record("neighbor_choice", "native", csr.indptr.device)
            pos = uniform_choice_np(indptr, v, f, seed, 0, n * L * n, replace, counter_ids=cids)
            valid = pos >= 0
            flat, cnt = pos[valid], valid.sum(1)
        keys = np.unique(np.repeat(owner, cnt) * n + indices[flat])
        new = keys[~np.isin(keys, reached, assume_unique=True)]
        reached = np.union1d(reached, new)
        owner, v = new // n, new % n
    counts = np.bincount(reached // n, minlength=T)
    offs = offsets(counts)
    tpos = np.searchsorted(reached, np.arange(T, dtype=np.int64) * n + tnp)
    return NodeSets(torch.from_numpy(offs), torch.from_numpy(reached % n), torch.from_numpy(tpos))


def merged_khop_nodes(csr: Structure, seeds: np.ndarray, fanouts, *, seed: int, replace: bool = False,
                      tables=None, host_indptr: np.ndarray | None = None, host_eids: np.ndarray | None = None,
                      excl: np.ndarray | None = None) -> np.ndarray:
    """The merged k-hop node list of DGL's ``ShaDowKHopSampler`` (module docstring): int64 ids,
    the (distinct) ``seeds`` first, then each layer's new nodes in increasing id.  ``fanouts``
    input layer first, as DGL's; ``tables``: weighted choice (:func:`..neighbor.choice.weight_tables`);
    ``excl``: sorted edge ids whose draws are dropped (DGL's ``exclude_eids``)."""
    fanouts = check_fanouts(fanouts)
    n = int(csr.num_rows)
    check_nodes(torch.from_numpy(seeds), n, "seed nodes", distinct=True)
    indptr = np64(csr.indptr) if host_indptr is None else host_indptr
    indices = np64(csr.indices)
    cur = seeds.astype(np.int64, copy=False)
    for step, fanout in enumerate(reversed(fanouts)):
        flat, counts = choose_positions(csr, cur, fanout, seed=seed, step=step, num_nodes=n, replace=replace,
                                        tables=tables, host_indptr=indptr)
        src = indices[flat]
        if excl is not None:
            eids = np64(csr.eids)[flat] if host_eids is None else host_eids[flat]
            counts, src, _ = drop_excluded(counts, src, eids, excl)
        new, _ = relabel_sources(src, cur, n)
        cur = np.concatenate([cur, new])
    return cur


def induced_batch(indptr: np.ndarray, indices: np.ndarray, eids: np.ndarray, sets: NodeSets,
                  compiled: bool | None = None):
    """CSC of the disjoint union of the subgraphs induced by each set of ``sets`` in the CSC
    ``(indptr, indices, eids)`` (in-edges by destination): ``(sub_indptr int64 [N + 1], local
    sources int64, parent edge ids int64)``, node ``i`` of the batch = ``sets.nodes[i]``.  Every
    parent edge between two nodes of one set appears once in that set's block, grouped by
    destination in CSR order (the layout of :func:`..induced.subgraph.induced_entries`, which the numpy path
    calls per set; ``compiled``: the one-pass loop, default where numba is enabled)."""
    nodes, offs = sets.nodes.numpy(), sets.offsets.numpy()
    if compiled is None:
        compiled = runtime.enabled()
    if compiled:
        return jit_shadow.induced_batch(indptr, indices, eids, nodes, offs)
    parts_ptr, parts_src, parts_eid = [np.zeros(1, dtype=np.int64)], [], []
    base_e = 0
    for t in range(offs.shape[0] - 1):
        a, b = int(offs[t]), int(offs[t + 1])
        sp, loc, kept = induced_entries(indptr, indices, eids, nodes[a:b].astype(indptr.dtype), indptr.shape[0] - 1)
        parts_ptr.append(sp[1:] + base_e)
        parts_src.append(loc.astype(np.int64) + a)
        parts_eid.append(kept.astype(np.int64))
        base_e += int(sp[-1])
    if not parts_src:
        return parts_ptr[0], np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(parts_ptr), np.concatenate(parts_src), np.concatenate(parts_eid)



def induced_batch_symmetric(half: HalfCSR, sets: NodeSets, compiled: bool | None = None):
    """As :func:`induced_batch` for a symmetric graph without parallel edges, from its
    :class:`~..induced.subgraph.HalfCSR` (half the entries filtered): ``(src, dst, parent edge ids, edges
    per set)``, int64, local ids = batch positions; set ``t``'s edges are contiguous, in the layout
    of :func:`..induced.subgraph.induced_symmetric_coo` (kept half edges, their reverses, self-loops), which
    the numpy path calls per set."""
    nodes, offs = sets.nodes.numpy(), sets.offsets.numpy()
    if compiled is None:
        compiled = runtime.enabled()
    if compiled:
        return jit_shadow.induced_batch_symmetric(half, nodes.astype(half.indptr.dtype), offs)
    parts, counts = [], np.zeros(offs.shape[0] - 1, dtype=np.int64)
    for t in range(offs.shape[0] - 1):
        a, b = int(offs[t]), int(offs[t + 1])
        src, dst, eids = induced_symmetric_coo(half, nodes[a:b], np.int64)
        parts.append((src + a, dst + a, eids.astype(np.int64)))
        counts[t] = eids.shape[0]
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), counts
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3)) + (counts,)
