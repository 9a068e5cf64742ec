"""What every sampler of :mod:`dgl_accel.sampling` shares: counter-based per-call seeds, re-exported
from the core (:mod:`dgl_accel.core.sampling.seeds`), where the PyG adapter's sampler takes them too.

A sampler built with ``seed=s`` (or a seed drawn from torch's generator at construction) keys
call ``c`` by ``call_seed(s, c, w)`` (:func:`dgl_accel.core.sampling.rng.call_seed`), ``w`` the
``torch.utils.data`` worker (0 outside workers), so two samplers with the same seed return the
same outputs call for call, and DataLoader workers never repeat each other.
"""
from __future__ import annotations

from ..core.sampling.seeds import CallSeeds, worker_id

__all__ = ["CallSeeds", "worker_id"]
