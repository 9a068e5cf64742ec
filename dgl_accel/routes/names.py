"""Swapping one DGL function wherever ``dgl`` holds it as a module-level name, and the one piece of
state the routes share with :mod:`dgl_accel.patching`: whether DGL's own two-step message passing
is running.

DGL's modules import functions by name (``from ...functional import edge_softmax``), so a route
must replace every module-level name that is DGL's original and put the original back wherever
the routed one stands.  ``enabled()`` blocks apply routing around every forward of a drop-in, so
the scan of ``sys.modules`` runs again only when modules were imported since the last one.
"""
from __future__ import annotations

import contextlib
import sys
import threading

__all__ = ["ModuleNames", "dgl_message_passing", "in_dgl_message_passing"]


class ModuleNames:
    """The module-level name ``name`` in every ``dgl`` module that holds ``original`` or ``routed``."""

    def __init__(self, name: str, original, routed):
        self.name, self.original, self.routed = name, original, routed
        self._modules: list = []
        self._scanned_at = -1  # len(sys.modules) at the last scan

    def modules(self) -> list:
        if self._scanned_at != len(sys.modules):
            self._modules = [m for key, m in list(sys.modules.items())
                             if (key == "dgl" or key.startswith("dgl."))
                             and getattr(m, self.name, None) in (self.original, self.routed)]
            self._scanned_at = len(sys.modules)
        return self._modules

    def apply(self, active: bool) -> None:
        """Point every such name at the routed function (``active``) or back at DGL's."""
        target = self.routed if active else self.original
        for module in self.modules():
            setattr(module, self.name, target)


_local = threading.local()  # .depth: DGL's two-step message passing frames open in this thread


@contextlib.contextmanager
def dgl_message_passing():
    """Mark DGL's own two-step message passing (a UDF reducer, or a message with no fused op):
    it is counted once as a whole by :mod:`dgl_accel.patching`, so its gsddmm / gspmm steps run
    DGL's code uncounted."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def in_dgl_message_passing() -> bool:
    return getattr(_local, "depth", 0) > 0
