"""Test helpers of the fused attention variants of the core (``core/attention/dot.py``, ``gatv2.py``;
DGL-free, so tests/core uses them): the three paths and how to run on one, their labels in
``dgl_accel.stats()``, a graph with rows longer than a kernel chunk, and the comparisons of a variant's
gradients and of its half-precision forward and gradients with its pure-torch reference, and the
launches of the all-heads kernels (``kernels/attention_{dot,gatv2}_heads.py``) against the per-head ones."""
from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

import dgl_accel

from ..core.aggregation.views import TensorGraph
from ..core.jit import runtime
from ..core.launch import kernel_module, record_launches
from . import tensors as tst
from .cpu_loops import forced_jit
from .tolerances import assert_close, assert_matches_reference

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
PATHS = ("native", "compiled", "triton")
LABEL = {"native": "native-cpu", "compiled": "native-cpu", "triton": "triton-interpreter"}
SMALL = st.one_of(tst.edge_lists(max_nodes=24, max_edges=80), tst.block_edge_lists(max_dst=12, max_edges=80))


class on_path:
    """Run inside one of PATHS: the backend, and the compiled loops forced on (``compiled``) or off."""

    def __init__(self, name: str):
        self.backend = dgl_accel.use_backend("triton" if name == "triton" else "native")
        self.jit = forced_jit(name == "compiled")

    def __enter__(self):
        self.backend.__enter__()
        self.jit.__enter__()

    def __exit__(self, *exc):
        self.jit.__exit__(*exc)
        self.backend.__exit__(*exc)


def star(degree: int, idtype=torch.int64, extra: int = 3) -> TensorGraph:
    """Node 0 receives ``degree - extra`` edges (rows longer than any kernel chunk); nodes 1..extra one
    each; node ``degree + 1`` none."""
    gen = torch.Generator().manual_seed(degree)
    src = torch.randint(0, degree, (degree,), generator=gen)
    dst = torch.cat([torch.zeros(degree - extra, dtype=torch.int64), torch.arange(1, extra + 1)])
    perm = torch.randperm(degree, generator=gen)
    return TensorGraph(src[perm].to(idtype), dst[perm].to(idtype), num_nodes=degree + 2)


def backward_on_paths(op, ref, inputs, grad_out, grad_attn, with_attention: bool, stat: str) -> None:
    """The gradients of ``op(*inputs, return_attention=with_attention)`` on every path equal those of
    ``ref(*inputs)`` (out, attention) in fp64, and each path counts one ``stat``."""
    dtype = inputs[0].dtype
    leaves = [t.double().requires_grad_() for t in inputs]
    n = 2 if with_attention else 1
    expected = torch.autograd.grad(ref(*leaves)[:n], leaves, [grad_out.double(), grad_attn.double()][:n],
                                   allow_unused=True)
    for name in PATHS:
        leaves = [t.clone().requires_grad_() for t in inputs]
        dgl_accel.reset_stats()
        with on_path(name):
            outs = op(*leaves, return_attention=with_attention)
            got = torch.autograd.grad(outs, leaves, (grad_out, grad_attn) if with_attention else grad_out)
        assert dgl_accel.stats()[stat] == {LABEL[name]: 1}
        for i, (a, b) in enumerate(zip(got, expected)):
            b = torch.zeros_like(a) if b is None else b  # no edges: the reference never touches the input
            assert a.shape == b.shape and a.dtype == dtype
            assert_close(a, b, dtype=dtype, msg=f"{name} grad[{i}] {dtype}")


def half_precision_matches_reference(op, ref, inputs, grad_out, msg: str) -> None:
    """``op(*inputs)``'s output and gradients (under ``grad_out``) keep the half dtype and follow the
    flash-attention rule against ``ref(*inputs)[0]``'s."""

    def run(fn, *t):
        *xs, go = t
        leaves = [x.clone().requires_grad_() for x in xs]
        out = fn(*leaves)
        return (out.detach(),) + torch.autograd.grad(out, leaves, go)

    got = run(op, *inputs, grad_out)
    assert all(t.dtype == grad_out.dtype for t in got)
    assert_matches_reference(got, lambda *t: run(lambda *u: ref(*u)[0], *t), *inputs, grad_out, msg=msg)


def unit_normal(seed: int, dtype, *shapes) -> tuple:
    """One N(0, 1) tensor of ``dtype`` per shape, drawn in order from one generator seeded ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen).to(dtype) for shape in shapes)


def half_gradients_match_reference(op, ref, inputs, gouts, msg: str) -> None:
    """``op(*inputs)`` -> (out, attention) and the inputs' gradients under ``gouts`` (of out and the
    attention) keep the half dtype and follow the flash-attention rule against ``ref(*inputs)``'s."""

    def run(fn, *t):
        xs, gs = t[:len(inputs)], t[len(inputs):]
        leaves = [x.clone().requires_grad_() for x in xs]
        outs = fn(*leaves)
        return tuple(o.detach() for o in outs) + torch.autograd.grad(outs, leaves, gs)

    got = run(op, *inputs, *gouts)
    assert all(t.dtype == inputs[0].dtype for t in got)
    assert_matches_reference(got, lambda *t: run(ref, *t), *inputs, *gouts, msg=msg)


def path_fixture():
    """A ``path`` fixture over PATHS (it overrides tests/conftest.py's: the compiled loops are a third
    path here), for a test module to bind as ``path = path_fixture()``."""

    @pytest.fixture(params=PATHS)
    def path(request):
        with on_path(request.param):
            dgl_accel.reset_stats()
            yield request.param

    return path


def assert_saves(out, shapes) -> None:
    """``out``'s backward saved tensors of exactly ``shapes`` (the inputs and lse [N, H], fp32 for fp32
    inputs; not the output): per-node normalisers, nothing per edge."""
    saved = out.grad_fn.saved_tensors
    assert [tuple(t.shape) for t in saved] == shapes
    assert saved[-1].dtype == torch.float32


def bad_input_graph() -> TensorGraph:
    """Three nodes, three edges: the graph of the bad-input tests."""
    return TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)


def assert_rejected_before_any_kernel(call, message: str) -> None:
    """``call()`` raises a ValueError matching ``message`` that says how to fix it, and counts no op."""
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "Fix:" in str(info.value)
    assert dgl_accel.stats() == {}


class recorded_launches:
    """The kernel names launched inside the block, in a list (``core.launch.record_launches``)."""

    def __enter__(self):
        self.names = []
        self._previous = record_launches(lambda module, name, *_: self.names.append(name))
        return self.names

    def __exit__(self, *exc):
        record_launches(self._previous)


class per_head_kernels:
    """Inside the block, the all-heads kernel module ``module`` covers no shape (its ``tiles`` says
    None), so its variant runs its per-(row, head) kernels."""

    def __init__(self, module: str):
        self.mod = kernel_module(module)

    def __enter__(self):
        self._tiles, self.mod.tiles = self.mod.tiles, lambda heads, dim: None

    def __exit__(self, *exc):
        self.mod.tiles = self._tiles


def all_heads_match_reference(op, ref, inputs, gouts, kernels, msg: str) -> None:
    """On the Triton path, ``op(*inputs)`` -> (out, attention) launches every kernel of ``kernels`` (an
    all-heads module's) and its outputs and gradients under ``gouts`` follow the flash-attention rule
    against ``ref``'s (:func:`half_gradients_match_reference`, any float dtype)."""
    with dgl_accel.use_backend("triton"), recorded_launches() as names:
        half_gradients_match_reference(op, ref, inputs, gouts, msg)
    assert set(kernels) <= set(names), (msg, sorted(set(names)))


def all_heads_agree_with_per_head(op, inputs, gouts, module: str, per_head_kernel: str) -> None:
    """On the Triton path, ``op(*inputs)`` -> (out, attention) and its gradients under ``gouts`` from
    the all-heads kernels of ``module`` equal, to fp32 rounding, those of the per-head kernels (run
    with ``module``'s tiles off: ``per_head_kernel`` launched, no all-heads kernel)."""

    def run():
        leaves = [t.clone().requires_grad_() for t in inputs]
        outs = op(*leaves)
        return [o.detach() for o in outs] + list(torch.autograd.grad(outs, leaves, gouts))

    with dgl_accel.use_backend("triton"):
        fused = run()
        with per_head_kernels(module), recorded_launches() as names:
            per_head = run()
    assert per_head_kernel in names and not any("heads" in n for n in names), names
    for a, b in zip(fused, per_head):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def twins_agree(op, inputs, gouts, monkeypatch) -> None:
    """On the compiled path, ``op(*inputs)`` -> (out, attention) and its gradients under ``gouts`` from
    the parallel loops and from the serial twins (``DGL_ACCEL_NUMBA_PARALLEL=0``; compiled
    differently: :func:`~dgl_accel.core.jit.runtime.twins` ``noalias``) agree to fp32's last bits:
    each row is computed by one task in one order either way, but a loop allowed to reorder its sums
    (fastmath ``reassoc``) may vectorise a D-long dot product differently in the two."""

    def run():
        leaves = [t.clone().requires_grad_() for t in inputs]
        with on_path("compiled"):
            outs = op(*leaves)
            return [o.detach() for o in outs] + list(torch.autograd.grad(outs, leaves, gouts))

    parallel = run()
    monkeypatch.setenv("DGL_ACCEL_NUMBA_PARALLEL", "0")
    assert not runtime.parallel_allowed()
    serial = run()
    for i, (a, b) in enumerate(zip(parallel, serial)):
        torch.testing.assert_close(a, b, rtol=4e-7, atol=1e-8, msg=f"output {i}")
