"""shaDow-GNN's per-target k-hop node sets on the CSR's device: :func:`.scope.khop_node_sets`'s
sets (the rule and the draws are in :mod:`.scope`), built with the neighbour-choice kernel and
torch ops where the graph lives, for a CUDA graph (or ``DGL_ACCEL_BACKEND=triton`` on the CPU,
where the kernel is interpreted).

The sets are kept as sorted keys ``t * n + v`` (set ``t``, node ``v``): a hop draws for the nodes
first reached at the previous hop, keys its draws by their owner, and merges the new keys into the
sorted set with one sort.  Host reads: :data:`HOST_READS_PER_HOP` a hop (the drawn count, the
distinct keys, the new ones) and one for the targets' range check.  This module imports no numpy
(an import-linter contract).
"""
from __future__ import annotations

import torch

from ...csr import Structure, row_positions
from ..arrays import index_counts
from ..neighbor.launchers import neighbor_choice_triton

__all__ = ["khop_node_sets_device", "HOST_READS_PER_HOP"]

HOST_READS_PER_HOP = 3


def khop_node_sets_device(csr: Structure, targets: torch.Tensor, fanouts: list[int], *, seed: int, replace: bool):
    """``(offsets [T + 1], nodes, target positions [T])``, int64 on the CSR's device: the arrays of
    :func:`.scope.khop_node_sets` for checked arguments (targets: int64 ids, fanouts target side
    first)."""
    dev = csr.device
    n, L = int(csr.num_rows), len(fanouts)
    tg = targets.to(device=dev, dtype=torch.int64)
    T = tg.shape[0]
    reached = torch.arange(T, device=dev) * n + tg  # sorted: set-major, one key per target
    owner, v = torch.arange(T, device=dev), tg
    for k, f in enumerate(fanouts):
        if v.shape[0] == 0:
            break
        if f == -1:
            flat, cnt = row_positions(csr.indptr, v)
        else:
            cids = (tg[owner] * L + k) * n + v
            pos = neighbor_choice_triton(csr.indptr, v, f, seed=seed, step=0, num_nodes=n * L * n, replace=replace,
                                         counter_ids=cids)
            valid = pos >= 0
            flat, cnt = pos[valid], valid.sum(1)
        own = torch.repeat_interleave(owner, cnt, output_size=flat.shape[0])
        keys = torch.unique(own * n + csr.indices[flat].to(torch.int64))  # sorted
        at = torch.searchsorted(reached, keys).clamp_max(reached.shape[0] - 1)
        new = keys[reached[at] != keys]
        reached = torch.sort(torch.cat([reached, new])).values
        owner, v = new // n, new % n
    counts = index_counts(reached // n, T)
    offs = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    tpos = torch.searchsorted(reached, torch.arange(T, device=dev) * n + tg)
    return offs, reached % n, tpos
