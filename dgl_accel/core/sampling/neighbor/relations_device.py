"""Heterograph neighbour sampling on the stacked CSR's device: :func:`.relations.sample_typed_layers`
for a CUDA graph (or ``DGL_ACCEL_BACKEND=triton`` on the CPU, where the choice kernel is
interpreted), with the same samples as its CPU path.

Per layer, relations sharing a fanout make one choice (:func:`.sample_device.choose_device`:
the uniform kernel or the weighted torch ops) over their stacked rows; the exclusion is one
``isin`` over stacked edge ids; every node type is relabelled at once by one
:func:`.sample_device.relabel_device` over the keys ``type_base[t] + id`` (destinations keep
their positions, the other sources come in increasing key, so per type in increasing id).

Host reads per layer: per fanout group, its choice's (1 uniform, up to 3 weighted) plus one (the
edges per relation), plus one with an exclusion; then :data:`RELABEL_READS` (the relabelling's two
and the new sources per type).  Nothing graph-sized crosses.  This module imports no numpy (an
import-linter contract).
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import torch

from ...backend import record
from ..output import SampledLayer, TypedLayer, TypedSamplerOutput
from .sample_device import choose_device, relabel_device

__all__ = ["sample_typed_layers_device", "RELABEL_READS"]

RELABEL_READS = 3


def _bounds(sizes) -> list[int]:
    """Exclusive scan of python ints with the total appended."""
    return list(accumulate((int(x) for x in sizes), initial=0))


def _choose_layer(stack, rel_types, cur, fan, *, seed, step, replace, weights, excl):
    """Each relation's (counts per destination, source ids, stacked edge ids) at one layer."""
    dev = stack.csr.device
    row_off = [int(x) for x in stack.row_offsets]
    empty = torch.zeros(0, dtype=torch.int64, device=dev)
    out = [(torch.zeros(cur[d].shape[0], dtype=torch.int64, device=dev), empty, empty) for _, d in rel_types]
    groups: dict[int, list[int]] = {}
    for r, (_, d) in enumerate(rel_types):
        if cur[d].shape[0] and fan[r] != 0:
            groups.setdefault(int(fan[r]), []).append(r)
    for fanout, rels in groups.items():
        v = torch.cat([cur[rel_types[r][1]] + row_off[r] for r in rels])
        record("neighbor_choice", "triton", dev)  # one choice per group, as on the CPU path
        flat, counts = choose_device(stack.csr, v, fanout, seed, step, replace, weights)
        src, seid = stack.csr.indices[flat].to(torch.int64), stack.csr.eids[flat].to(torch.int64)
        if excl is not None and seid.numel():
            keep = ~torch.isin(seid, excl)
            row = torch.repeat_interleave(torch.arange(v.shape[0], device=dev), counts, output_size=seid.numel())
            counts = torch.zeros_like(counts).index_add_(0, row, keep.to(torch.int64))
            kept = keep.nonzero().squeeze(1)  # the exclusion's read
            src, seid = src[kept], seid[kept]
        t_bounds = _bounds(cur[rel_types[r][1]].shape[0] for r in rels)
        per_rel = torch.stack([counts[t_bounds[i]:t_bounds[i + 1]].sum() for i in range(len(rels))])
        e_bounds = _bounds(per_rel.tolist())  # the group's read: edges per relation
        for i, r in enumerate(rels):
            e0, e1 = e_bounds[i], e_bounds[i + 1]
            out[r] = (counts[t_bounds[i]:t_bounds[i + 1]], src[e0:e1], seid[e0:e1])
    return out


def sample_typed_layers_device(stack, rel_types: Sequence[tuple[int, int]], num_nodes: Sequence[int],
                               seeds: Sequence[torch.Tensor], fanouts: Sequence[Sequence[int]], *, seed: int,
                               replace: bool, weights=None,
                               exclude: Sequence[torch.Tensor | None]) -> TypedSamplerOutput:
    """:func:`.relations.sample_typed_layers` on ``stack``'s device (checked arguments; ``weights``:
    :meth:`.choice.WeightTables.on` of the stacked tables, or None)."""
    dev = stack.csr.device
    edge_off = [int(x) for x in stack.edge_offsets]
    type_base = _bounds(num_nodes)
    pieces = [x.to(device=dev, dtype=torch.int64) + edge_off[r] for r, x in enumerate(exclude) if x is not None]
    excl = torch.cat(pieces) if pieces else None
    cur = [s.to(device=dev, dtype=torch.int64) for s in seeds]
    K, layers = len(cur), []
    for step, fan in enumerate(reversed(list(fanouts))):
        edges = _choose_layer(stack, rel_types, cur, list(fan), seed=seed, step=step, replace=replace,
                              weights=weights, excl=excl)
        dst_bounds = _bounds(c.shape[0] for c in cur)
        src_keys = torch.cat([edges[r][1] + type_base[s] for r, (s, _) in enumerate(rel_types)])
        new, local = relabel_device(src_keys, torch.cat([c + type_base[t] for t, c in enumerate(cur)]))
        new_bounds = torch.searchsorted(new, torch.tensor(type_base, device=dev)).tolist()  # new sources per type
        src_nodes = [torch.cat([cur[t], new[new_bounds[t]:new_bounds[t + 1]] - type_base[t]]) for t in range(K)]
        rels, at = [], 0
        for r, (s, d) in enumerate(rel_types):
            counts, _, seid = edges[r]
            loc = local[at:at + seid.shape[0]]
            at += seid.shape[0]
            # combined ids -> the source type's: a destination's position within its type, or
            # (new rank within the type) after the type's destinations
            loc = torch.where(loc < dst_bounds[-1], loc - dst_bounds[s],
                              cur[s].shape[0] + loc - dst_bounds[-1] - new_bounds[s])
            rels.append(SampledLayer(cur[d], src_nodes[s], torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)]),
                                     loc, seid - edge_off[r]))
        layers.insert(0, TypedLayer(tuple(cur), tuple(src_nodes), tuple(rels)))
        cur = src_nodes
    return TypedSamplerOutput(tuple(seeds), tuple(layers))
