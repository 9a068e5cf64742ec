"""Pure-torch references of the attention ops: simple, obviously right, in the inputs' dtype (so
``assert_matches_reference`` can run them in fp64 and in the kernel's dtype) and differentiable by
autograd.  Slow (a Python loop over rows): for tests on small graphs only."""
from __future__ import annotations

import torch

from ..csr import Structure


def entry_rows(rows: Structure) -> torch.Tensor:
    """The row of every CSR entry, in CSR order (int64)."""
    deg = rows.indptr[1:] - rows.indptr[:-1]
    return torch.repeat_interleave(torch.arange(rows.num_rows, device=rows.indptr.device), deg)


def ref_edge_softmax(rows: Structure, score: torch.Tensor) -> torch.Tensor:
    """``torch.softmax`` over each row's entries (edge ids ``rows.eids``), per trailing column.

    >>> import torch
    >>> rows = Structure(torch.tensor([0, 2, 2, 3]), torch.tensor([0, 1, 1]), torch.tensor([2, 0, 1]), 3, 2,
    ...                  torch.device("cpu"))
    >>> ref_edge_softmax(rows, torch.tensor([0.0, 5.0, 0.0])).tolist()
    [0.5, 1.0, 0.5]
    """
    out = score * 0  # zeros, connected to score's graph even when no row has entries
    for r in range(rows.num_rows):
        ids = rows.eids[int(rows.indptr[r]):int(rows.indptr[r + 1])].long()
        if ids.numel():
            out = out.index_put((ids,), torch.softmax(score[ids], dim=0))
    return out


def ref_gat(in_csr: Structure, feat: torch.Tensor, el: torch.Tensor, er: torch.Tensor,
            negative_slope: float = 0.2, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The unfused composition: out[v] = sum over in-edges e = (u -> v) of
    edge_softmax(leaky_relu(el[u] + er[v]))[e] * feat[u], per head; ``feat`` [num_src, H, D];
    ``weight`` [E, H] (edge-id order) multiplies the attention after the softmax (dropout's keep / (1 - p))."""
    heads = feat.shape[1]
    el, er = el.reshape(-1, heads), er.reshape(-1, heads)
    src = torch.zeros(in_csr.num_edges, dtype=torch.int64, device=feat.device)
    dst = torch.zeros_like(src)
    eids = in_csr.eids.long()
    src[eids], dst[eids] = in_csr.indices.long(), entry_rows(in_csr)
    score = torch.nn.functional.leaky_relu(el[src] + er[dst], negative_slope)
    a = ref_edge_softmax(in_csr, score)
    if weight is not None:
        a = a * weight.to(a.dtype)
    out = torch.zeros((in_csr.num_rows,) + tuple(feat.shape[1:]), dtype=feat.dtype, device=feat.device)
    return out.index_add(0, dst, a[:, :, None] * feat[src])
