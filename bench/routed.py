"""Timed steps of the benches that compare plain DGL with the same code under
``dgl_accel.enabled()`` (bench_extrema, bench_sddmm): one forward + backward per call."""
from __future__ import annotations

import dgl_accel


def module_step(g, x, module):
    """One forward + backward of a ``dgl.nn`` module on ``(g, x)``."""
    def step():
        module.zero_grad()
        module(g, x).sum().backward()
    return step


def dgl_vs_enabled(step) -> dict:
    """``{"dgl": step, "dgl_accel": step under dgl_accel.enabled()}``, the providers of one case."""
    def ours():
        with dgl_accel.enabled():
            step()
    return {"dgl": step, "dgl_accel": ours}
