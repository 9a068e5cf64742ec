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

__all__ = ["OPS", "TARGETS", "sddmm_rows"]

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
