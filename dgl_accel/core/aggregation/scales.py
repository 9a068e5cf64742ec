"""Degree scales of normalised aggregation and the accumulation dtype, shared by every path."""
from __future__ import annotations

import torch


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: float64 for float64 inputs, else float32 (half types sum in fp32)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def degree_scales(out_degrees, in_degrees, norm: str, reduce: str, acc: torch.dtype):
    """(per-source, per-destination) factors of the normalised aggregation: the GCN norm
    (``both``: deg^-1/2 each side; ``left``/``right``: 1/deg on one side) and mean's 1/in-degree.
    ``out_degrees``/``in_degrees`` are called only when needed; degrees clamp at 1 (DGL's rule).

    >>> import torch
    >>> src, dst = degree_scales(lambda: torch.tensor([1, 4]), lambda: torch.tensor([0, 4]), "both", "sum",
    ...                          torch.float32)
    >>> src.tolist(), dst.tolist()
    ([1.0, 0.5], [1.0, 0.5])
    """
    src = dst = None
    if norm in ("left", "both"):
        deg = out_degrees().to(acc).clamp(min=1)
        src = deg.pow(-0.5) if norm == "both" else 1.0 / deg
    if norm in ("right", "both") or reduce == "mean":
        deg = in_degrees().to(acc).clamp(min=1)
        dst = torch.ones_like(deg)
        if norm in ("right", "both"):
            dst = deg.pow(-0.5) if norm == "both" else 1.0 / deg
        if reduce == "mean":
            dst = dst / deg
    return src, dst
