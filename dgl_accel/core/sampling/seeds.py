"""Per-call seeds of every sampler, both adapters': the sampler seed and the per-call counter, in one place.

A sampler built with ``seed=s`` (or a seed drawn from torch's generator at construction:
:func:`~.checks.resolve_seed`) keys call ``c`` by ``call_seed(s, c, w)`` (:func:`~.rng.call_seed`,
a splitmix64 chain), ``w`` the ``torch.utils.data`` worker id plus :attr:`CallSeeds.WORKER_OFFSET`
(0 outside workers), so two samplers with the same seed return the same outputs call for call, and
DataLoader workers never repeat each other.

The counter ``calls`` is the index of the next call.  It moves here and nowhere else: by
:meth:`CallSeeds.next_key` (the call counts from the moment it takes its key), by
:meth:`CallSeeds.counted_call` (only a call that sampled counts: a refused call leaves the counter as
it was), by :meth:`CallSeeds.claim_calls` (a bulk of calls) and by :meth:`CallSeeds.reset`.

>>> s = CallSeeds(); s.init_seeds(5)
>>> keys = [s.next_key(), s.next_key()]
>>> keys == [call_seed(5, 0), call_seed(5, 1)], s.calls
(True, 2)
>>> try:
...     with s.counted_call() as key:
...         raise ValueError("refused")
... except ValueError:
...     pass
>>> s.calls                                 # the refused call did not count
2
>>> s.reset(); s.next_key() == keys[0]
True
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .checks import resolve_seed
from .rng import call_seed

__all__ = ["CallSeeds", "worker_id"]


def worker_id(offset: int) -> int:
    """The ``torch.utils.data`` worker id plus ``offset``; 0 outside workers."""
    info = torch.utils.data.get_worker_info()
    return 0 if info is None else info.id + offset


class CallSeeds:
    """Mixin of the samplers of both adapters: ``seed`` (the sampler seed), ``calls`` (the index of
    the next call) and the calls' Philox keys.

    ``WORKER_OFFSET`` is added to a worker's id (1 for most samplers, so worker 0 and the main
    process differ; the layer-wise samplers have always used 0)."""

    WORKER_OFFSET = 1
    seed: int
    calls: int

    def init_seeds(self, seed=None) -> None:
        """``seed`` checked (None: a draw from torch's global generator) and the counter at call 0."""
        self.seed = resolve_seed(seed)
        self.calls = 0

    def call_keys(self, first: int, count: int = 1) -> list[int]:
        """Keys of calls ``first .. first + count - 1`` in this process or worker; the counter stays.

        >>> s = CallSeeds(); s.seed = 5
        >>> s.call_keys(0, 2) == [call_seed(5, 0), call_seed(5, 1)]
        True
        """
        worker = worker_id(self.WORKER_OFFSET)
        return [call_seed(self.seed, first + j, worker) for j in range(count)]

    def claim_calls(self, count: int = 1) -> int:
        """Index of the first of the next ``count`` calls; the counter moves past them."""
        first = self.calls
        self.calls = first + count
        return first

    def next_key(self) -> int:
        """Key of the next call; the counter moves on at once (the call counts even if it then fails)."""
        return self.call_keys(self.claim_calls())[0]

    @contextmanager
    def counted_call(self) -> Iterator[int]:
        """``with sampler.counted_call() as key:`` the key of the next call; the counter moves on only
        when the block completes, so a call that raised (was refused) leaves it as it was."""
        key = self.call_keys(self.calls)[0]
        yield key
        self.calls += 1

    def reset(self, call_index: int = 0) -> None:
        """Rewind the call counter: the next calls repeat the keys of calls ``call_index, ...``."""
        self.calls = int(call_index)
