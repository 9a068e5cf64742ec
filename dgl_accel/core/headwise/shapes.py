"""DGL's shape rules for ``u_mul_e`` with broadcast edge weights, and the head-wise split.

DGL (``dgl.ops.spmm.reshape_lhs_rhs``) gives operands of different rank size-1 dimensions after
the first (``[E, 2]`` against ``[N, 2, 4]`` reads as ``[E, 1, 2]``), then broadcasts the feature
shapes as numpy does.  The head-wise op runs the cases where the node features do not broadcast
(the result has their shape) and the edge weight's non-1 dimensions form one contiguous block:
features viewed as ``[N, L, K, R]``, weights as ``[E, K]``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["HeadSplit", "pad_shapes", "head_split"]


class HeadSplit(NamedTuple):
    """Features [N, F] viewed as [N, groups, heads, head_len] (F = the product), weights as [E, heads]."""

    groups: int
    heads: int
    head_len: int
    feat_shape: tuple  # the node features' shape after DGL's padding: the result's feature shape


def pad_shapes(feat: tuple, weight: tuple) -> tuple[tuple, tuple]:
    """Both feature shapes at one rank, DGL's way (size-1 dims in front of the shorter one's).

    >>> pad_shapes((2, 4), (2,))
    ((2, 4), (1, 2))
    """
    rank = max(len(feat), len(weight))
    return (1,) * (rank - len(feat)) + tuple(feat), (1,) * (rank - len(weight)) + tuple(weight)


def head_split(feat: tuple, weight: tuple) -> HeadSplit | None:
    """The split of node features of shape ``feat`` (without the row dim) against edge weights of
    shape ``weight`` (likewise), or None where the head-wise op does not apply: the shapes do not
    broadcast, the node features would broadcast (the result is larger than they are), or the
    weight's non-1 dims are not one contiguous block of the features' dims.

    >>> head_split((4, 8), (4, 1))  # GAT: [E, H, 1] on [N, H, D]
    HeadSplit(groups=1, heads=4, head_len=8, feat_shape=(4, 8))
    >>> head_split((4, 8), (1, 8)).heads, head_split((4, 8), (1, 8)).groups  # one weight per position
    (8, 4)
    >>> head_split((4,), (2, 1)) is None  # [N, 4] against [E, 2, 1]: the node features broadcast
    True
    """
    a, b = pad_shapes(feat, weight)
    if any(y != 1 and y != x for x, y in zip(a, b)):
        return None  # not broadcastable, or the node features would broadcast
    varying = [i for i, y in enumerate(b) if y != 1]
    if not varying:
        return HeadSplit(1, 1, math.prod(a), a)
    s, t = varying[0], varying[-1] + 1
    if any(b[i] != a[i] for i in range(s, t)):
        return None  # a size-1 weight dim between two others: not one block
    return HeadSplit(math.prod(a[:s]), math.prod(a[s:t]), math.prod(a[t:]), a)
