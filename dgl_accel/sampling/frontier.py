"""GraphSAINT's frontier sampler on DGL graphs: the DGL adapter of
:mod:`dgl_accel.core.sampling.saint.frontier` (which documents the algorithm, the dashboard and
the random numbers).  Node sets come back sorted, in the graph's idtype and on its device."""
from __future__ import annotations

from ..core.sampling.saint.frontier import frontier_sample as frontier_sample_csr
from ..core.sampling.saint.frontier import frontier_sample_sequential as frontier_sample_sequential_csr
from ..graph.structure import out_csr
from .errors import dgl_errors

__all__ = ["frontier_sample", "frontier_sample_sequential"]


@dgl_errors
def frontier_sample(g, num_roots: int, budget: int, *, num_instances: int = 1, eta: float = 2.0,
                    degree_clip=None, seed=None, max_steps=None) -> list:
    """GraphSAINT frontier sampling: ``num_instances`` independent node sets of ``budget`` (n)
    vertices from a multi-dimensional random walk with ``num_roots`` (m) frontier vertices (see
    :func:`dgl_accel.core.sampling.saint.frontier.frontier_sample`).  Returns one sorted, unique
    node-id tensor per instance (``g.idtype``, on ``g.device``); the subgraph is
    ``dgl.node_subgraph(g, nodes)``.

    >>> import dgl
    >>> frontier_sample(dgl.graph(([0, 1, 2], [1, 2, 0])), 1, 3, seed=0)[0].tolist()
    [0, 1, 2]
    """
    out = frontier_sample_csr(out_csr(g), num_roots, budget, num_instances=num_instances, eta=eta,
                              degree_clip=degree_clip, seed=seed, max_steps=max_steps)
    return [t.to(device=g.device, dtype=g.idtype) for t in out]


@dgl_errors
def frontier_sample_sequential(g, num_roots: int, budget: int, *, num_instances: int = 1, degree_clip=None,
                               seed=None, max_steps=None) -> list:
    """The paper's sequential frontier sampler (numpy Generator; the reference of
    :func:`frontier_sample`: same distribution, other random numbers), same output format."""
    out = frontier_sample_sequential_csr(out_csr(g), num_roots, budget, num_instances=num_instances,
                                         degree_clip=degree_clip, seed=seed, max_steps=max_steps)
    return [t.to(device=g.device, dtype=g.idtype) for t in out]
