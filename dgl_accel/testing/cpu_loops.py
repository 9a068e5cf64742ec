"""Switches for tests that compare the paths of one sampler with each other (DGL-free, so the
core lane's tests use it too)."""
from __future__ import annotations

import contextlib

from ..core.backend import use_backend
from ..core.jit import runtime
from ..core.sampling.saint import frontier as saint_frontier


@contextlib.contextmanager
def forced_jit(on: bool):
    """Force the compiled loops on (every size) or off (the numpy path) inside the block."""
    saved = runtime.MIN_WORK
    runtime.MIN_WORK = 0 if on else 2**62
    try:
        yield
    finally:
        runtime.MIN_WORK = saved


@contextlib.contextmanager
def loop_threads(one: bool):
    """Inside the block the loops take their one-thread form (``one``: one pass that scatters, e.g. the
    GAT backward, or GINE's passes in edge order) or their several-thread form (a pass per CSR),
    whatever torch's thread count (:func:`~dgl_accel.core.jit.runtime.one_thread`)."""
    saved = runtime.one_thread
    runtime.one_thread = lambda: one
    try:
        yield
    finally:
        runtime.one_thread = saved


def both_frontier_loops(sample, monkeypatch, *args, **kw):
    """``sample(*args, **kw)`` (a frontier sampler) through the scalar per-instance loop and the
    loop vectorised over instances: asserts they give the same samples and returns them."""
    monkeypatch.setattr(saint_frontier, "_SCALAR_MAX", 1 << 30)
    scalar = sample(*args, **kw)
    monkeypatch.setattr(saint_frontier, "_SCALAR_MAX", 0)
    vector = sample(*args, **kw)
    assert all(a.equal(b) for a, b in zip(scalar, vector))
    return scalar


def native_and_triton(fn):
    """``(fn() on the native CPU path, fn() on the Triton path)``: on CPU tensors the latter runs the
    device pipelines with their kernels interpreted."""
    out = []
    for name in ("native", "triton"):
        with use_backend(name):
            out.append(fn())
    return tuple(out)
