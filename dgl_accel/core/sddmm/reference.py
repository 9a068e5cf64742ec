"""The pure-torch reference of ``gsddmm``: DGL's shape rules written out again, advanced indexing
by target and torch's own broadcasting, in the inputs' dtype (so ``assert_matches_reference`` can
run it in fp64 and in the kernels' dtype) and differentiable by autograd.  For tests."""
from __future__ import annotations

import torch


def ref_gsddmm(src: torch.Tensor, dst: torch.Tensor, op: str, lhs, rhs, lhs_target: str = "u",
               rhs_target: str = "v") -> torch.Tensor:
    """Per edge ``e = (src[e] -> dst[e])``: ``op(lhs[row], rhs[row])`` with ``row`` the source (``u``),
    the destination (``v``) or ``e`` itself.

    >>> import torch
    >>> ref_gsddmm(torch.tensor([0, 1]), torch.tensor([1, 1]), "sub", torch.tensor([1.0, 2.0]),
    ...            torch.tensor([10.0, 20.0])).tolist()
    [-19.0, -18.0]
    """
    pick = {"u": src.long(), "v": dst.long(), "e": None}
    if op == "copy_lhs":
        return lhs if lhs_target == "e" else lhs[pick[lhs_target]]
    if op == "copy_rhs":
        return rhs if rhs_target == "e" else rhs[pick[rhs_target]]
    both_1d = lhs.dim() == 1 and rhs.dim() == 1
    rank = max(lhs.dim(), rhs.dim(), 2)
    lhs = lhs.reshape((lhs.shape[0],) + (1,) * (rank - lhs.dim()) + tuple(lhs.shape[1:]))
    rhs = rhs.reshape((rhs.shape[0],) + (1,) * (rank - rhs.dim()) + tuple(rhs.shape[1:]))
    x = lhs if lhs_target == "e" else lhs[pick[lhs_target]]
    y = rhs if rhs_target == "e" else rhs[pick[rhs_target]]
    if op == "dot":
        out = (x * y).sum(-1, keepdim=True)
    else:
        out = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](x, y)
    return out.squeeze(-1) if both_1d else out
