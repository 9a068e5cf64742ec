"""``khop_sample(g, ...)``: k-hop neighbourhood samples of a DGL graph (the DGL adapter of
:func:`dgl_accel.core.sampling.neighbor.khop.khop_sample`, which documents the sampling)."""
from __future__ import annotations

from ..core.sampling.neighbor.khop import KHopSamples
from ..core.sampling.neighbor.khop import khop_sample as khop_sample_csr
from ..graph.structure import in_csr
from .blocks import check_homogeneous
from .errors import dgl_errors

__all__ = ["khop_sample", "KHopSamples"]


@dgl_errors
def khop_sample(g, seeds, fanouts, *, replace: bool = False, unique: bool = False, seed=None) -> KHopSamples:
    """Sample the k-hop in-neighbourhood of every seed independently (one sample per seed).

    g: a homogeneous graph (CPU: native path; CUDA: the Triton neighbour-choice kernels).
    seeds: 1-D node ids; fanouts: neighbours per transit for each step (positive ints).
    replace: draw with replacement; unique: drop repeats within a sample's step.
    Returns :class:`KHopSamples` (ids in ``g.idtype`` on ``g.device``).

    >>> import dgl, torch
    >>> khop_sample(dgl.graph(([1, 2, 0], [0, 1, 2])), torch.tensor([0]), [1, 1], seed=0).per_sample().tolist()
    [[0, 1, 2]]
    """
    check_homogeneous(g, "pass dgl.graph(...) or dgl.to_homogeneous(g).")
    out = khop_sample_csr(in_csr(g), seeds, fanouts, replace=replace, unique=unique, seed=seed)
    dev, it = g.device, g.idtype
    return KHopSamples(out.roots.to(dev, it), [s.to(dev, it) for s in out.steps])
