"""The 1.5D process grid of graph-partitioned sampling: p ranks as (p/c) process rows x c columns.

Rank r sits at row ``r // c``, column ``r % c``.  A (and Q) are split into ``p/c`` block rows;
block row i of A lives on every rank of process row i (replication factor c).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Grid", "block_bounds"]


def _check_int(x, name: str, fix: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"expected {name} to be an int (got {x!r}). Fix: {fix}")
    return int(x)


def block_bounds(n: int, parts: int) -> np.ndarray:
    """Boundaries of ``parts`` contiguous, nearly equal blocks of ``range(n)`` (length parts + 1).

    >>> block_bounds(10, 3)
    array([ 0,  3,  6, 10])
    """
    return (np.arange(parts + 1, dtype=np.int64) * int(n)) // int(parts)


@dataclass(frozen=True)
class Grid:
    """A validated (world_size / c) x c process grid.

    >>> grid = Grid(world_size=4, c=2)
    >>> grid.rows, grid.coords(3), grid.row_ranks(1)
    (2, (1, 1), [2, 3])
    >>> Grid(6, 4)
    Traceback (most recent call last):
    ...
    ValueError: expected the world size to be a multiple of c ... Fix: use c in [1, 2, 3, 6] or start ...
    """

    world_size: int
    c: int

    def __post_init__(self):
        p = _check_int(self.world_size, "world_size", "pass the process group's size.")
        c = _check_int(self.c, "the replication factor c", "pass c=1 (no replication) or a divisor of the world size.")
        if p < 1:
            raise ValueError(f"expected world_size >= 1 (got {p}). Fix: start at least one process.")
        if c < 1:
            raise ValueError(f"expected replication factor c >= 1 (got {c}). Fix: pass c=1 (no replication) "
                             f"or a divisor of the world size {p}.")
        if p % c:
            divisors = [d for d in range(1, p + 1) if p % d == 0]
            raise ValueError(f"expected the world size to be a multiple of c so the ranks form a (p/c) x c grid "
                             f"(got world size {p}, c={c}). Fix: use c in {divisors} or start a multiple of {c} "
                             f"processes.")

    @property
    def rows(self) -> int:
        """Number of process rows = number of block rows of A."""
        return self.world_size // self.c

    def coords(self, rank: int) -> tuple[int, int]:
        """(process row, process column) of ``rank``."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"expected a rank in [0, {self.world_size}) (got {rank}). Fix: pass dist.get_rank().")
        return rank // self.c, rank % self.c

    def rank(self, row: int, col: int) -> int:
        return row * self.c + col

    def row_ranks(self, row: int) -> list[int]:
        """The c ranks that hold block row ``row`` of A."""
        return [row * self.c + j for j in range(self.c)]
