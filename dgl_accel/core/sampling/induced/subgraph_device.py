"""Node-induced subgraphs on the CSR's device (family ``induced``): the subgraph GraphSAINT and
shaDow-GNN train on, built where the graph lives.

:func:`induced_device` gives :func:`.subgraph.induced_entries`'s arrays (the CPU path, numpy) for
a node list on any device: every in-edge of each chosen node is gathered from the CSR, sources are
looked up among the chosen nodes by a sort and a binary search (work O(gathered edges x log k), no
node-sized array), and the members are kept in CSR order.  Two host reads: the gathered size and
the kept one.  The node list may be in any order (shaDow-GNN's merged k-hop list: the seeds first);
node ``i`` of the subgraph is ``nodes[i]``.  :func:`induced_sets_device` does the same for a batch
of node sets at once (the one implementation; a single list is one set), and
:func:`induced_between_device` the edges from one node list into another (:func:`.subgraph.induced_between`'s
arrays: two node types, or a list that repeats ids).  This module imports no numpy (an import-linter contract).
"""
from __future__ import annotations

import torch

from ...csr import Structure, row_positions

__all__ = ["induced_device", "induced_sets_device", "induced_between_device", "HOST_READS"]

HOST_READS = 2  # the gathered in-edges, the kept ones


def induced_device(csr: Structure, nodes: torch.Tensor, exclude: torch.Tensor | None = None):
    """``(sub_indptr [k + 1], local sources [m], parent edge ids [m])``, int64 on the CSR's device:
    destination ``i`` (= ``nodes[i]``, distinct ids in any order) has the in-edges from chosen nodes
    at ``sub_indptr[i]:sub_indptr[i + 1]``, in CSR order, their sources as positions in ``nodes``;
    edges whose ids are in ``exclude`` are left out (no extra read).  One set of
    :func:`induced_sets_device`."""
    nodes = nodes.to(device=csr.device, dtype=torch.int64)
    one_set = torch.tensor([0, nodes.shape[0]], dtype=torch.int64, device=csr.device)
    return induced_sets_device(csr, one_set, nodes, exclude)


def induced_sets_device(csr: Structure, offsets: torch.Tensor, nodes: torch.Tensor,
                        exclude: torch.Tensor | None = None):
    """The disjoint union of the subgraphs induced by several node sets (set ``t`` is
    ``nodes[offsets[t]:offsets[t + 1]]``, distinct ids in any order; node ``i`` of the batch is
    entry ``i``): ``(sub_indptr [N + 1], local sources [m], parent edge ids [m])`` on the CSR's
    device, the arrays of :func:`..shadow.scope.induced_batch` (each set's in-edges in CSR order), minus
    the edge ids in ``exclude``.  Sources are looked up by a binary search among the sorted keys
    ``set * n + id``: work O(gathered edges x log N), no node-sized array, two host reads."""
    dev = csr.device
    nodes = nodes.to(device=dev, dtype=torch.int64)
    offsets = offsets.to(device=dev, dtype=torch.int64)
    N, n = nodes.shape[0], int(csr.num_rows)
    if N == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        return torch.zeros(1, dtype=torch.int64, device=dev), empty, empty
    owner = torch.repeat_interleave(torch.arange(offsets.shape[0] - 1, device=dev), offsets.diff(), output_size=N)
    keys, order = torch.sort(owner * n + nodes)  # set-major, increasing ids within a set
    flat, counts = row_positions(csr.indptr, nodes)  # read 1
    row = torch.repeat_interleave(torch.arange(N, device=dev), counts, output_size=flat.shape[0])
    src_key = owner[row] * n + csr.indices[flat].to(torch.int64)
    at = torch.searchsorted(keys, src_key).clamp_max(N - 1)
    member = keys[at] == src_key
    if exclude is not None and exclude.numel():
        member &= ~torch.isin(csr.eids[flat].to(torch.int64), exclude.to(device=dev, dtype=torch.int64))
    kept_per_row = torch.zeros(N, dtype=torch.int64, device=dev).index_add_(0, row, member.to(torch.int64))
    kept = member.nonzero().squeeze(1)  # read 2
    sub_indptr = torch.cat([kept_per_row.new_zeros(1), torch.cumsum(kept_per_row, 0)])
    return sub_indptr, order[at[kept]], csr.eids[flat[kept]].to(torch.int64)


def induced_between_device(csr: Structure, rows: torch.Tensor, sources: torch.Tensor):
    """:func:`.subgraph.induced_between` on the CSR's device: the int64 COO ``(position of the source
    in sources, position of the row in rows, parent edge id)`` of the entries of the rows ``rows``
    whose source is in ``sources`` (both in any order, repeats allowed: a repeated row gathers its
    entries again, a repeated source is found at its first position), row after row, each in CSR
    order.  Sources are looked up by a binary search among the sorted ``sources`` (a stable sort:
    the first of equal keys is the first position); two host reads."""
    dev = csr.device
    rows = rows.to(device=dev, dtype=torch.int64)
    sources = sources.to(device=dev, dtype=torch.int64)
    R, S = rows.shape[0], sources.shape[0]
    if R == 0 or S == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        return empty, empty, empty
    keys, order = torch.sort(sources, stable=True)
    flat, counts = row_positions(csr.indptr, rows)  # read 1
    row = torch.repeat_interleave(torch.arange(R, device=dev), counts, output_size=flat.shape[0])
    src = csr.indices[flat].to(torch.int64)
    at = torch.searchsorted(keys, src).clamp_max(S - 1)
    kept = (keys[at] == src).nonzero().squeeze(1)  # read 2
    return order[at[kept]], row[kept], csr.eids[flat[kept]].to(torch.int64)
