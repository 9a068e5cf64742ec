"""Graph500 R-MAT graphs generated on the device (Chakrabarti, Zhan, Faloutsos 2004; Graph500 spec).

``2^scale`` vertices, ``edge_factor * 2^scale`` directed edges, each placed by ``scale`` recursive
quadrant choices with probabilities a, b, c, d = 1 - a - b - c (Graph500: 0.57, 0.19, 0.19, 0.05);
vertex labels are then permuted (as Graph500 does, so the degree skew is not tied to low ids).
The report symmetrises: both directions of every edge, self-loops and duplicates dropped.
"""
from __future__ import annotations

import torch

GRAPH500 = (0.57, 0.19, 0.19)
EDGE_FACTOR = 16


def rmat_edges(scale: int, edge_factor: int = EDGE_FACTOR, abc=GRAPH500, *, seed: int = 0,
               device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Directed R-MAT edges ``(src, dst)`` (int64, on ``device``), before symmetrising.

    >>> src, dst = rmat_edges(4, seed=1)
    >>> src.numel(), int(src.max()) < 16
    (256, True)
    """
    a, b, c = abc
    if not (0 < a and 0 <= b and 0 <= c and a + b + c < 1):
        raise ValueError(f"expected R-MAT probabilities with a > 0 and a + b + c < 1 (got {abc}). "
                         f"Fix: pass the Graph500 values {GRAPH500}.")
    if scale < 1 or edge_factor < 1:
        raise ValueError(f"expected scale >= 1 and edge_factor >= 1 (got {scale}, {edge_factor}).")
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    m = edge_factor << scale
    src = torch.zeros(m, dtype=torch.int64, device=device)
    dst = torch.zeros(m, dtype=torch.int64, device=device)
    for bit in range(scale):  # one uniform draw per edge and level: [0,a) (0,0), [a,a+b) (0,1), ...
        r = torch.rand(m, generator=gen, device=device)
        down = r >= a + b                                  # lower half: source bit set
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # right half: destination bit set
        src |= down.to(torch.int64) << bit
        dst |= right.to(torch.int64) << bit
    perm = torch.randperm(1 << scale, generator=gen, device=device)
    return perm[src], perm[dst]


def symmetrise(src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Both directions of every edge, without self-loops and duplicates, sorted by (src, dst).

    >>> s, d = symmetrise(torch.tensor([0, 1, 2, 2]), torch.tensor([1, 0, 2, 0]), 3)
    >>> s.tolist(), d.tolist()
    ([0, 0, 1, 2], [1, 2, 0, 0])
    """
    keep = src != dst
    s, d = src[keep], dst[keep]
    key = torch.unique(torch.cat([s * num_nodes + d, d * num_nodes + s]))  # sorted
    return key // num_nodes, key % num_nodes


def rmat_graph(scale: int, edge_factor: int = EDGE_FACTOR, *, seed: int = 0, device="cpu", directed: bool = False):
    """Graph500 R-MAT graph: ``(src, dst, num_nodes)`` on ``device``, symmetrised (:func:`symmetrise`)
    or, ``directed``, its edges as drawn without self-loops and duplicates, sorted by (src, dst)."""
    n = 1 << scale
    src, dst = rmat_edges(scale, edge_factor, seed=seed, device=device)
    if directed:
        keep = src != dst
        key = torch.unique(src[keep] * n + dst[keep])
        return key // n, key % n, n
    s, d = symmetrise(src, dst, n)
    return s, d, n
