"""What every sampler of :mod:`dgl_accel.sampling` shares: counter-based per-call seeds.

A sampler built with ``seed=s`` (or a seed drawn from torch's generator at construction) keys
call ``c`` by ``call_seed(s, c, w)`` (:func:`dgl_accel.core.sampling.rng.call_seed`), ``w`` the
``torch.utils.data`` worker (0 outside workers), so two samplers with the same seed return the
same outputs call for call, and DataLoader workers never repeat each other.
"""
from __future__ import annotations

import torch

from ..core.sampling.rng import call_seed

__all__ = ["CallSeeds", "worker_id"]


def worker_id(offset: int) -> int:
    """The ``torch.utils.data`` worker id plus ``offset``; 0 outside workers."""
    info = torch.utils.data.get_worker_info()
    return 0 if info is None else info.id + offset


class CallSeeds:
    """Mixin of the samplers: ``self.seed`` (the sampler seed) and per-call Philox keys.

    ``WORKER_OFFSET`` is added to a worker's id (1 for most samplers, so worker 0 and the main
    process differ; the layer-wise samplers have always used 0)."""

    WORKER_OFFSET = 1
    seed: int

    def call_keys(self, first: int, count: int = 1) -> list[int]:
        """Keys of calls ``first .. first + count - 1`` in this process or worker.

        >>> s = CallSeeds(); s.seed = 5
        >>> s.call_keys(0, 2) == [call_seed(5, 0), call_seed(5, 1)]
        True
        """
        worker = worker_id(self.WORKER_OFFSET)
        return [call_seed(self.seed, first + j, worker) for j in range(count)]
