"""Compiled loops of the aggregation ops' execution paths: ``rows_spmm`` (every output row of a
CSR product in one pass), ``weighted_rows_spmm`` (the same with a weight per edge or per edge and
feature: GCN's normalised sum, without the E x F messages), ``scatter_rows`` (a scaled row scatter in one pass),
``count_nonzero_rows`` (the execution-path gradient guard: one read of the given rows) and
``scale_rows_bf16`` (bf16 rows times fp32 factors, rounded once: the native path's degree scales
under autocast)."""
from __future__ import annotations

import numpy as np

from .row_ranges import bounds_of
from .runtime import as_float, cast_like, narrow, njit, pick, prange, twins

__all__ = ["rows_spmm", "weighted_rows_spmm", "scatter_rows", "count_nonzero_rows", "scale_rows_bf16"]


def _rows_spmm_impl(indptr, indices, x, col_scale, row_scale, out, acc_like):
    """out[r] = row_scale[r] * sum_k col_scale[c_k] * x[c_k] over row r's CSR entries, every row
    written (empty rows: 0).  Sums in CSR order, as DGL's CPU kernel does, in ``acc_like``'s dtype
    (x and out may be bf16 bits); an empty ``col_scale`` multiplies by nothing.  Four entries a
    pass over the features (still added one by one in CSR order: the same bits), so the row sum is
    loaded and stored a quarter as often and four rows' loads are in flight (15-20% at 64-128
    features).  Rows are cut into 64 ranges of about equal edge counts (one parallel task each):
    frontier rows are few and heavy next to many empty ones."""
    F = out.shape[1]
    scaled = col_scale.shape[0] != 0
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(F, dtype=acc_like.dtype)  # one per range: no allocation per row
        for r in range(bounds[ch], bounds[ch + 1]):
            for f in range(F):
                acc[f] = 0
            k = indptr[r]
            hi = indptr[r + 1]
            if scaled:
                for j in range(k, hi):
                    c = indices[j]
                    w = col_scale[c]
                    for f in range(F):
                        acc[f] += as_float(x[c, f]) * w
            else:
                while k + 4 <= hi:
                    c0 = indices[k]
                    c1 = indices[k + 1]
                    c2 = indices[k + 2]
                    c3 = indices[k + 3]
                    for f in range(F):
                        acc[f] = (((acc[f] + as_float(x[c0, f])) + as_float(x[c1, f])) + as_float(x[c2, f])) \
                            + as_float(x[c3, f])
                    k += 4
                for j in range(k, hi):
                    c = indices[j]
                    for f in range(F):
                        acc[f] += as_float(x[c, f])
            rs = row_scale[r]
            for f in range(F):
                out[r, f] = cast_like(acc[f] * rs, out)


_rows_spmm_parallel, _rows_spmm_serial = twins(_rows_spmm_impl, noalias=True)


def _weighted_rows_spmm_impl(indptr, indices, eids, x, w, out, acc_like):
    """out[r] = sum_k w[eids[k]] * x[indices[k]] over row r's CSR entries (w [E, 1]: one weight an
    edge; [E, F]: one per feature), summed in CSR order in ``acc_like``'s dtype; x, w and out may be
    bf16 bits (read widened, written rounded).  Empty rows get 0.  64 row ranges of about equal
    edge counts, one parallel task each."""
    num_feat = out.shape[1]
    wide = w.shape[1] != 1
    nch = 64
    bounds = bounds_of(indptr, nch)
    for ch in prange(nch):
        acc = np.empty(num_feat, dtype=acc_like.dtype)
        for r in range(bounds[ch], bounds[ch + 1]):
            for f in range(num_feat):
                acc[f] = 0
            k = indptr[r]
            hi = indptr[r + 1]
            if not wide:  # four entries a pass, added in CSR order (as rows_spmm)
                while k + 4 <= hi:
                    c0 = indices[k]
                    c1 = indices[k + 1]
                    c2 = indices[k + 2]
                    c3 = indices[k + 3]
                    w0 = as_float(w[eids[k], 0])
                    w1 = as_float(w[eids[k + 1], 0])
                    w2 = as_float(w[eids[k + 2], 0])
                    w3 = as_float(w[eids[k + 3], 0])
                    for f in range(num_feat):
                        acc[f] = (((acc[f] + as_float(x[c0, f]) * w0) + as_float(x[c1, f]) * w1)
                                  + as_float(x[c2, f]) * w2) + as_float(x[c3, f]) * w3
                    k += 4
            for j in range(k, hi):
                c = indices[j]
                e = eids[j]
                if wide:
                    for f in range(num_feat):
                        acc[f] += as_float(x[c, f]) * as_float(w[e, f])
                else:
                    we = as_float(w[e, 0])
                    for f in range(num_feat):
                        acc[f] += as_float(x[c, f]) * we
            for f in range(num_feat):
                out[r, f] = cast_like(acc[f], out)


_weighted_rows_spmm_parallel, _weighted_rows_spmm_serial = twins(_weighted_rows_spmm_impl, noalias=True)


def weighted_rows_spmm(indptr, indices, eids, x, w, out) -> None:
    """``out[r] = sum over row r's entries k of w[eids[k]] * x[indices[k]]`` (numpy arrays, int64
    CSR; ``x`` [N, F], ``w`` [E, 1] or [E, F], ``out`` [R, F], each float32, float64 or bf16 bits,
    accumulating in float64 if any is float64, else float32), every row written.  The torch path
    materialises the E x F messages and scatters them; this reads each once."""
    acc = np.float64 if np.float64 in (x.dtype, w.dtype, out.dtype) else np.float32
    pick(_weighted_rows_spmm_parallel, _weighted_rows_spmm_serial)(indptr, indices, eids, x, w, out,
                                                                   np.empty(0, dtype=acc))


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
    None; ``x`` and ``out`` float32, float64 or bf16 bits, summed in float32 for bits), writing
    every row of ``out``.  Parallel over row chunks where allowed
    (:func:`~dgl_accel.core.jit.runtime.parallel_allowed`)."""
    acc = np.float32 if out.dtype == np.uint16 else out.dtype
    # a missing row scale is 1 (x * 1.0 is exact): one multiply a row; a missing column scale skips
    # the per-entry multiply altogether (an empty array)
    pick(_rows_spmm_parallel, _rows_spmm_serial)(
        indptr, indices, x, np.empty(0, dtype=acc) if col_scale is None else col_scale,
        np.ones(out.shape[0], dtype=acc) if row_scale is None else row_scale, out, np.empty(0, dtype=acc))


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


_count_nonzero_rows_parallel, _count_nonzero_rows_serial = twins(_count_nonzero_rows_impl, noalias=True)

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
