"""Compiled loops of the aggregation ops' execution paths: ``rows_spmm`` (every output row of a
CSR product in one pass), ``scatter_rows`` (a scaled row scatter in one pass),
``count_nonzero_rows`` (the execution-path gradient guard: one read of the given rows) and
``scale_rows_bf16`` (bf16 rows times fp32 factors, rounded once: the native path's degree scales
under autocast)."""
from __future__ import annotations

import numpy as np

from .row_ranges import bounds_of
from .runtime import as_float, narrow, njit, pick, prange, twins

__all__ = ["rows_spmm", "scatter_rows", "count_nonzero_rows", "scale_rows_bf16"]


def _rows_spmm_impl(indptr, indices, x, col_scale, row_scale, out):
    """out[r] = row_scale[r] * sum_k col_scale[c_k] * x[c_k] over row r's CSR entries, every row
    written (empty rows: 0).  Sums in CSR order, as DGL's CPU kernel does.  Rows are cut into
    64 ranges of about equal edge counts (one parallel task each): frontier rows are few and
    heavy next to many empty ones."""
    F = out.shape[1]
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(F, dtype=out.dtype)  # one per range: no allocation per row
        for r in range(bounds[ch], bounds[ch + 1]):
            for f in range(F):
                acc[f] = 0
            for k in range(indptr[r], indptr[r + 1]):
                c = indices[k]
                w = col_scale[c]
                for f in range(F):
                    acc[f] += x[c, f] * w
            rs = row_scale[r]
            for f in range(F):
                out[r, f] = acc[f] * rs


_rows_spmm_parallel, _rows_spmm_serial = twins(_rows_spmm_impl)


@njit(cache=True)
def _scatter_rows(out, rows, vals, scale):
    """out[rows[i]] = vals[i] * scale[i] (scale empty: no scaling); rows are distinct."""
    F = vals.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        if scale.shape[0]:
            s = scale[i]
            for f in range(F):
                out[r, f] = vals[i, f] * s
        else:
            for f in range(F):
                out[r, f] = vals[i, f]


def scatter_rows(out, rows, vals, scale=None) -> None:
    """``out[rows] = vals * scale[:, None]`` in one pass (numpy arrays; ``rows`` distinct).  torch's
    index_copy_ plus a separate scaling pass cost 3x more on the execution-path outputs."""
    _scatter_rows(out, rows, vals, np.empty(0, dtype=vals.dtype) if scale is None else scale)


def rows_spmm(indptr, indices, x, col_scale, row_scale, out) -> None:
    """``out = row_scale * (A (col_scale * x))`` for the CSR ``A`` (numpy arrays; scales may be
    None), writing every row of ``out``.  Parallel over row chunks where allowed
    (:func:`~dgl_accel.core.jit.runtime.parallel_allowed`)."""
    # a missing scale is 1 (x * 1.0 is exact); ones cost one small allocation, branches per edge more
    pick(_rows_spmm_parallel, _rows_spmm_serial)(
        indptr, indices, x, np.ones(x.shape[0], dtype=out.dtype) if col_scale is None else col_scale,
        np.ones(out.shape[0], dtype=out.dtype) if row_scale is None else row_scale, out)


def _count_nonzero_rows_impl(bits, rows, magnitude):
    """How many of ``bits[rows]`` hold a nonzero float, on the float's bit pattern: one OR per row
    (no branch per entry, so it vectorises), the sign bit masked off so -0.0 counts as 0."""
    found = 0
    for i in prange(rows.shape[0]):
        r = rows[i]
        acc = bits[r, 0] & 0
        for f in range(bits.shape[1]):
            acc |= bits[r, f]
        if acc & magnitude:
            found += 1
    return found


_count_nonzero_rows_parallel, _count_nonzero_rows_serial = twins(_count_nonzero_rows_impl)

_MAGNITUDE = {np.dtype(np.float32): (np.uint32, np.uint32(0x7FFFFFFF)),
              np.dtype(np.float64): (np.uint64, np.uint64(0x7FFFFFFFFFFFFFFF))}


def count_nonzero_rows(x, rows) -> int:
    """Rows among ``rows`` (int64) of the 2-D float32/float64 array ``x`` (C-contiguous) with an
    entry other than +-0.0: what ``torch.count_nonzero(x.index_select(0, rows))`` says about them
    (NaN counts as nonzero), without copying the rows (the execution-path guard runs it on every
    backward step it cannot trust).

    >>> count_nonzero_rows(np.array([[0.0, -0.0], [0.0, 1e-45], [np.nan, 0.0]], np.float32), np.arange(3))
    2
    """
    utype, magnitude = _MAGNITUDE[x.dtype]
    fn = pick(_count_nonzero_rows_parallel, _count_nonzero_rows_serial)
    return int(fn(x.view(utype), rows, magnitude))


def _scale_rows_bf16_impl(x, scale, out):
    """out[r, f] = bf16(float(x[r, f]) * scale[r]) on bf16 bits (uint16 arrays)."""
    for r in prange(x.shape[0]):
        s = scale[r]
        for f in range(x.shape[1]):
            out[r, f] = narrow(as_float(x[r, f]) * s)


_scale_rows_bf16_parallel, _scale_rows_bf16_serial = twins(_scale_rows_bf16_impl)


def scale_rows_bf16(x, scale, out) -> None:
    """``out = (x.float() * scale[:, None]).bfloat16()`` in one pass over the bits (``x``, ``out``:
    uint16 arrays from :func:`~dgl_accel.core.jit.runtime.bf16_bits`, ``scale`` float32; ``out`` may
    be ``x``): the same bits as torch's widen, multiply and round, without the fp32 copy (2.7x
    faster at 13,752 x 128, one thread)."""
    pick(_scale_rows_bf16_parallel, _scale_rows_bf16_serial)(x, scale, out)
