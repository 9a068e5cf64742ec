"""The matrices of matrix-based bulk sampling for a DGL graph: its canonical adjacency ``A``
(cached per graph), ``A`` as a sparse tensor and the memory estimate of ``P``.  The DGL adapter of
:mod:`dgl_accel.core.sampling.bulk.matrix`, which documents ``A`` and the SpGEMM contract."""
from __future__ import annotations

import numpy as np
import torch

from ..core.sampling.bulk import matrix as core
from ..core.sampling.bulk.matrix import canonical_csr, local_spgemm  # the bulk samplers' SpGEMM API, here too
from ..graph.structure import cached, in_csr
from .blocks import packed_pairs

__all__ = ["canonical_adjacency", "adjacency_tensor", "estimate_p_bytes", "local_spgemm", "canonical_csr"]


def canonical_adjacency(g) -> core.Canonical:
    """Cached :class:`~dgl_accel.core.sampling.bulk.matrix.Canonical` of ``g`` (rebuilt when the graph
    is mutated in place)."""
    def build(h):
        csr = in_csr(h)
        host = [t.to(torch.int64).cpu().numpy() for t in (csr.indptr, csr.indices, csr.eids)]  # index math on CPU
        # a sorted CPU CSR reuses NeighborSampler's packed table
        pairs = (lambda: packed_pairs(h, csr)) if csr.indptr.device.type == "cpu" else None
        return core.canonical_adjacency(*host, h.num_nodes(), pairs)

    return cached(g, "bulk_canonical_adjacency", build)


def adjacency_tensor(g, values: np.ndarray | None = None) -> torch.Tensor:
    """``A`` of ``g`` as a ``torch.sparse_csr_tensor`` (float32; multiplicities unless ``values`` given).

    >>> import dgl
    >>> adjacency_tensor(dgl.graph(([0, 0], [1, 1]))).to_dense().tolist()   # two parallel edges 0 -> 1
    [[0.0, 0.0], [2.0, 0.0]]
    """
    return core.adjacency_tensor(canonical_adjacency(g), values)


def estimate_p_bytes(g, batch_size: int, fanouts) -> int:
    """Estimated peak bytes of ``P`` for one minibatch of ``batch_size`` seeds of ``g``
    (:func:`dgl_accel.core.sampling.bulk.matrix.estimate_p_bytes`)."""
    return core.estimate_p_bytes(canonical_adjacency(g), batch_size, fanouts)
