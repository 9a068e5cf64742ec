"""A cheap fingerprint of a graph's structure, all-gathered at setup so ranks that loaded
different graphs fail with a clear error instead of sampling inconsistent minibatches."""
from __future__ import annotations

import hashlib

import numpy as np
import torch

from ..graph.structure import in_csr
from .comm import all_gather_1d, world

__all__ = ["graph_fingerprint", "check_same_graph"]


def graph_fingerprint(g) -> tuple[int, int, int]:
    """(num_nodes, num_edges, 63-bit blake2b of the in-CSR indptr and indices).

    >>> import dgl
    >>> n, m, h = graph_fingerprint(dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2]))))
    >>> n, m, h == graph_fingerprint(dgl.graph((torch.tensor([1, 0]), torch.tensor([2, 1]))))[2]  # edge order
    (3, 2, True)
    """
    csr = in_csr(g)
    h = hashlib.blake2b(digest_size=8)
    h.update(np.ascontiguousarray(csr.indptr.cpu().numpy(), dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(csr.indices.cpu().numpy(), dtype=np.int64).tobytes())
    return g.num_nodes(), g.num_edges(), int.from_bytes(h.digest(), "little") >> 1


def check_same_graph(g, group=None, what: str = "graph") -> tuple[int, int, int]:
    """All-gather the fingerprint of ``g``; raise ValueError on every rank if any rank differs."""
    fp = graph_fingerprint(g)
    _, size = world(group)
    if size == 1:
        return fp
    got = [tuple(int(v) for v in t) for t in all_gather_1d(torch.tensor(fp, dtype=torch.int64), group,
                                                           "graph fingerprint")]
    bad = [r for r, f in enumerate(got) if f != got[0]]
    if bad:
        desc = ", ".join(f"rank {r}: {f[0]} nodes / {f[1]} edges / hash {f[2]:x}" for r, f in enumerate(got))
        raise ValueError(f"expected every rank to hold the same {what} (got {desc}). Fix: load the same dataset "
                         f"with the same preprocessing (self loops, reordering) on every rank.")
    return fp
