"""Stand-in execution-path plans for testing ops that take one (``dgl_accel.core.dense``)."""
from __future__ import annotations

import torch


class FixedRowsPlan:
    """An execution-path plan as a dense product sees it: the gradient reaching the product is
    nonzero only on ``rows`` (what a session's frontier guarantees), whatever the step.

    >>> FixedRowsPlan(torch.tensor([0, 2])).backward_rows(0, None).tolist()
    [0, 2]
    """

    def __init__(self, rows: torch.Tensor):
        self.rows = rows

    def backward_rows(self, offset: int, grad) -> torch.Tensor:
        return self.rows

    def rows_written(self, tensor: torch.Tensor, offset: int) -> None:
        """Nothing to remember: this stand-in has no session."""
