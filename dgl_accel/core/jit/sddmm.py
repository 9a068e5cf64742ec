"""Compiled loop of ``gsddmm``'s native path: every edge's result in one pass, reading both operands
in place (no E x F gathers, no E x F x D product for ``dot``), parallel over edges.  Operands are
2-D (rows x flattened features); the output feature ``f`` reads ``lhs[row, loff[f] + k]`` and
``rhs[row, roff[f] + k]`` for ``k < red`` (``red`` > 1 only for dot), so DGL's broadcasting is the
host's offset tables (``core/sddmm/checks.py``).  Results equal the torch formulas' bit for bit,
except the dot, which sums in the output's dtype in its own order (within the tolerance rule; tests
compare against the reference).  Numba loops below ``runtime.MIN_WORK`` are not worth their call."""
from __future__ import annotations

import numpy as np

from .runtime import pick, prange, twins

__all__ = ["OPS", "TARGETS", "sddmm_rows", "sddmm_grad_rows"]

OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs", "dot")  # op code = index here
TARGETS = ("u", "e", "v")                                          # target code = index here


def _sddmm_impl(src, dst, lhs, rhs, loff, roff, out, op, lt, rt, red, zero, bcast):
    num_feats = out.shape[1]
    for e in prange(out.shape[0]):
        i = np.int64(e)  # one integer type for every row choice (prange's index may be unsigned)
        lr = np.int64(src[i]) if lt == 0 else (i if lt == 1 else np.int64(dst[i]))
        rr = np.int64(src[i]) if rt == 0 else (i if rt == 1 else np.int64(dst[i]))
        if op == 6:
            for f in range(num_feats):
                acc = zero
                lb = loff[f]
                rb = roff[f]
                for k in range(red):
                    acc += lhs[lr, lb + k] * rhs[rr, rb + k]
                out[i, f] = acc
        elif not bcast:  # rows of one width: unit-stride loops, which vectorise
            if op == 0:
                for f in range(num_feats):
                    out[i, f] = lhs[lr, f] + rhs[rr, f]
            elif op == 1:
                for f in range(num_feats):
                    out[i, f] = lhs[lr, f] - rhs[rr, f]
            elif op == 2:
                for f in range(num_feats):
                    out[i, f] = lhs[lr, f] * rhs[rr, f]
            elif op == 3:
                for f in range(num_feats):
                    out[i, f] = lhs[lr, f] / rhs[rr, f]
            elif op == 4:
                for f in range(num_feats):
                    out[i, f] = lhs[lr, f]
            else:
                for f in range(num_feats):
                    out[i, f] = rhs[rr, f]
        elif op == 0:
            for f in range(num_feats):
                out[i, f] = lhs[lr, loff[f]] + rhs[rr, roff[f]]
        elif op == 1:
            for f in range(num_feats):
                out[i, f] = lhs[lr, loff[f]] - rhs[rr, roff[f]]
        elif op == 2:
            for f in range(num_feats):
                out[i, f] = lhs[lr, loff[f]] * rhs[rr, roff[f]]
        elif op == 3:
            for f in range(num_feats):
                out[i, f] = lhs[lr, loff[f]] / rhs[rr, roff[f]]
        elif op == 4:
            for f in range(num_feats):
                out[i, f] = lhs[lr, loff[f]]
        else:
            for f in range(num_feats):
                out[i, f] = rhs[rr, roff[f]]


# reassoc: the dot's sum over the last dim vectorises (summation order only; every other op is one rounding)
_sddmm_parallel, _sddmm_serial = twins(_sddmm_impl, fastmath={"reassoc"})


def sddmm_rows(src, dst, lhs, rhs, loff, roff, out, op: str, lhs_target: str, rhs_target: str, red: int,
               bcast: bool) -> None:
    """Fill ``out`` [E, F] (numpy, C-contiguous) with ``op`` per edge; ``lhs``/``rhs`` 2-D C-contiguous
    of ``out``'s dtype (the same array for both where the op reads one), ``loff``/``roff`` int [F];
    ``bcast`` False: both operands' rows are ``out``'s width (the offsets are then ``f * red``)."""
    pick(_sddmm_parallel, _sddmm_serial)(src, dst, lhs, rhs, loff, roff, out, OPS.index(op),
                                         TARGETS.index(lhs_target), TARGETS.index(rhs_target), np.int64(red),
                                         out.dtype.type(0), bool(bcast))


def _sddmm_grad_impl(indptr, eids, src, dst, grad, x, y, xoff, yoff, out, op, side, yt, red, zero, bcast):
    """out[r] = the gradient of operand x's row r: over row r's entries (edges e, CSR order) and
    the output features f, grad[e, f] times d op / d x at x's element xoff[f] (+ q for dot).  The
    op's branches sit outside the feature loops, which are unit-stride when nothing broadcasts."""
    width = out.shape[1]
    num_feats = grad.shape[1]
    for r in prange(out.shape[0]):
        row = np.int64(r)
        acc = np.zeros(width, dtype=out.dtype)  # per row: rows run in parallel
        for k in range(indptr[row], indptr[row + 1]):
            e = np.int64(eids[k])
            yr = np.int64(src[e]) if yt == 0 else (e if yt == 1 else np.int64(dst[e]))
            if op == 6:  # dot
                for f in range(num_feats):
                    g = grad[e, f]
                    xo = xoff[f]
                    yo = yoff[f]
                    for q in range(red):
                        acc[xo + q] += g * y[yr, yo + q]
            elif not bcast:
                if op == 2:  # mul
                    for f in range(num_feats):
                        acc[f] += grad[e, f] * y[yr, f]
                elif op == 3 and side == 0:  # div: d(x / y)/dx = 1 / y
                    for f in range(num_feats):
                        acc[f] += grad[e, f] / y[yr, f]
                elif op == 3:  # div: d(y / x)/dx = -(y / x) / x
                    for f in range(num_feats):
                        acc[f] -= grad[e, f] * (y[yr, f] / x[row, f]) / x[row, f]
                elif op == 1 and side == 1:  # sub, rhs
                    for f in range(num_feats):
                        acc[f] -= grad[e, f]
                else:  # add, sub's lhs, copy
                    for f in range(num_feats):
                        acc[f] += grad[e, f]
            elif op == 2:
                for f in range(num_feats):
                    acc[xoff[f]] += grad[e, f] * y[yr, yoff[f]]
            elif op == 3 and side == 0:
                for f in range(num_feats):
                    acc[xoff[f]] += grad[e, f] / y[yr, yoff[f]]
            elif op == 3:
                for f in range(num_feats):
                    xv = x[row, xoff[f]]
                    acc[xoff[f]] -= grad[e, f] * (y[yr, yoff[f]] / xv) / xv
            elif op == 1 and side == 1:
                for f in range(num_feats):
                    acc[xoff[f]] -= grad[e, f]
            else:
                for f in range(num_feats):
                    acc[xoff[f]] += grad[e, f]
        for j in range(width):
            out[row, j] = acc[j]


_grad_parallel, _grad_serial = twins(_sddmm_grad_impl)


def sddmm_grad_rows(indptr, eids, src, dst, grad, x, y, xoff, yoff, out, op: str, side: int, y_target: str,
                    red: int, bcast: bool) -> None:
    """The gradient of one operand (``side`` 0: lhs, 1: rhs) of ``op``, summed over the broadcast
    and onto its rows in one pass: ``out`` [rows, width] (numpy, C-contiguous) over the CSR
    ``indptr``/``eids`` of its target (rows = edges for target ``e``); ``x`` the operand (read by
    div's rhs only), ``y`` the other one (read by mul, dot, div), both 2-D of ``out``'s dtype;
    ``grad`` [E, F] the output gradient; ``xoff``/``yoff`` the operands' offsets per output feature
    (``bcast`` False: both are ``f * red``, the operands' rows as wide as the output's)."""
    pick(_grad_parallel, _grad_serial)(indptr, eids, src, dst, grad, x, y, xoff, yoff, out, OPS.index(op),
                                       np.int64(side), TARGETS.index(y_target), np.int64(red), out.dtype.type(0),
                                       bool(bcast))
