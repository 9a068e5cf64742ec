"""Pieces the attention ops' paths share (``edge_softmax_paths.py``, ``gat_paths.py``, ``gatv2_paths.py``,
``dot_paths.py``, and :mod:`.variant`):

* edges: :func:`edges_by_id` (a graph's (src, dst) in edge-id order), :func:`edge_groups` (the row of
  every edge of a CSR view), :func:`edge_ends` (a CSR view's (other end, row) per edge);
* native: :func:`leaky`, :func:`row_terms` (the softmax backward's row term);
* compiled: :func:`usable` (whether the numba loops take a call), :func:`as_array`, :func:`csr_arrays`;
* triton: :func:`scalar` (a float argument as a tensor), :func:`all_heads` (a launch of an all-heads kernel).
"""
from __future__ import annotations

import weakref

import torch

from ..csr import Structure
from ..jit import runtime
from ..launch import kernel_module, triton_kernel
from ..sampling.arrays import np64
from .reference import entry_rows


# ------------------------------------------------------------------ edges
def edges_by_id(views):
    """(src, dst) as int64 in edge-id order, cached on the graph."""
    return views.cached("attention.edges_int64", lambda: tuple(t.long() for t in views.edges_by_id()))


# Structure -> its edge_groups: views are cached by their owner (the DGL adapter, TensorGraph) and
# reused every layer and epoch, and building the groups cost as much as the segment max.
_groups: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def edge_groups(rows: Structure) -> torch.Tensor:
    """The row of every edge, in edge-id order (int64), cached per view."""
    group = _groups.get(rows)
    if group is None:
        group = torch.empty(rows.num_edges, dtype=torch.int64, device=rows.indptr.device)
        group[rows.eids.long()] = entry_rows(rows)
        _groups[rows] = group
    return group


def edge_ends(rows: Structure):
    """(the other end, the row) of every edge of ``rows`` as int64 in edge-id order: (src, dst) of an
    in-CSR, the values :func:`edges_by_id` gives for its graph."""
    other = torch.empty(rows.num_edges, dtype=torch.int64, device=rows.indptr.device)
    other[rows.eids.long()] = rows.indices.long()
    return other, edge_groups(rows)


# ------------------------------------------------------------------ native (vectorised torch)
def leaky(x: torch.Tensor, slope: float) -> torch.Tensor:
    return torch.where(x > 0, x, x * slope)


def row_terms(dst, lse, p, t):
    """ds_e = p_e (t_e - c[v]) [E, H] in p's dtype, c [num_dst, H] = sum over v's in-edges of p_e t_e over
    the sum of their p_e."""
    c = torch.zeros_like(lse).index_add_(0, dst, p * t)
    den = torch.zeros_like(lse).index_add_(0, dst, p)  # 1 up to lse's rounding: c is taken over the same p
    c = c / torch.where(den > 0, den, 1.0)
    return p * (t - c.index_select(0, dst))


# ------------------------------------------------------------------ compiled (numba, core/jit/<op>.py)
def usable(num_edges: int, *tensors: torch.Tensor) -> bool:
    """Whether the compiled loops take a call over ``num_edges`` edges on ``tensors``: numba enabled, at
    least ``runtime.MIN_WORK`` edges (read at call time, so tests can lower it), CPU tensors.  Otherwise
    the paths run their vectorised torch code, which is also what runs without numba."""
    return runtime.worth(num_edges) and all(t.device.type == "cpu" for t in tensors)


def as_array(t: torch.Tensor, dtype: torch.dtype):
    """A C-contiguous numpy view (or converted copy) of ``t`` in ``dtype`` (float32 or float64)."""
    return t.detach().to(dtype).contiguous().numpy()


def csr_arrays(rows: Structure):
    """(indptr, indices, eids) of a CSR view as int64 numpy arrays (views where already int64)."""
    return np64(rows.indptr), np64(rows.indices), np64(rows.eids)


# ------------------------------------------------------------------ triton (kernels/<op>.py)
def scalar(x: float, dtype: torch.dtype, device) -> torch.Tensor:
    """A one-element tensor: Triton passes Python floats as fp32, too coarse for fp64."""
    return torch.tensor([x], dtype=dtype, device=device)


def all_heads(module: str, kernel: str, tile: tuple[int, int], rows: Structure, *args, fp64: bool,
              **constexprs) -> None:
    """``kernel`` of an all-heads module (``kernels/gat_heads.py``, ``gatv2_heads.py``, ``dot_heads.py``)
    over ``rows``: a program per row covering every head in one [heads, features] ``tile``; ``args``
    follow the row pointers and entries in the kernel's order, ``constexprs`` beyond the tile's."""
    mod = kernel_module(module)
    bh, bd = tile
    cap = mod.maxnreg(kernel, fp64, bh, bd)
    triton_kernel(module, kernel, rows.indptr.device)[(rows.num_rows,)](
        rows.indptr, rows.indices, *args, BLOCK_E=mod.BLOCK_E, BLOCK_H=bh, BLOCK_D=bd, **constexprs,
        num_warps=mod.num_warps(bh, bd), **({"maxnreg": cap} if cap else {}))
