"""Test helpers of the drop-in attention modules (``nn.DotGatConv``, ``nn.GATv2Conv``) against DGL's:
a pair of modules with the same parameters, one training step of a module, the comparison of two
steps, and DGL's zero-in-degree error raised before any work."""
from __future__ import annotations

import copy

import dgl
import pytest
import torch
from dgl.base import DGLError

import dgl_accel
import dgl_accel.nn

from .tolerances import assert_close


def module_pair(theirs_cls, ours_cls, *args, **kw):
    """(DGL's module, ours swapped from a copy of it): the same parameters, drawn in [-1, 1] (spread
    scores: the softmax is far from uniform), zero in-degrees allowed."""
    torch.manual_seed(0)
    theirs = theirs_cls(*args, allow_zero_in_degree=True, **kw)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = copy.deepcopy(theirs)
    dgl_accel.nn.swap(ours)
    assert type(ours) is ours_cls and isinstance(ours, theirs_cls)
    return theirs, ours


def run_module(conv, g, x, get_attention=False):
    """(output, attention or None, input gradients, parameter gradients) of one step of ``conv`` on ``x``
    (a tensor or a pair), the loss weighting every output and the attention."""
    xs = tuple(t.detach().clone().requires_grad_() for t in (x if isinstance(x, tuple) else (x,)))
    conv.zero_grad()
    out = conv(g, xs if isinstance(x, tuple) else xs[0], get_attention=get_attention)
    rst, att = out if get_attention else (out, None)
    w = torch.linspace(-1, 1, rst.numel(), dtype=rst.dtype).reshape(rst.shape)  # a loss weighting every output
    ((rst * w).sum() + (0 if att is None else (att.squeeze(-1) * att.squeeze(-1)).sum())).backward()
    grads = {k: p.grad.clone() for k, p in conv.named_parameters() if p.grad is not None}
    return rst.detach(), None if att is None else att.detach(), [t.grad for t in xs], grads


def assert_same(a, b, where=""):
    """Two :func:`run_module` steps agree: output, attention, input and parameter gradients."""
    rst0, att0, gx0, g0 = a
    rst1, att1, gx1, g1 = b
    assert_close(rst1, rst0, msg=f"output {where}")
    if att0 is not None:
        assert att1.shape == att0.shape
        assert_close(att1, att0, msg=f"attention {where}")
    for x1, x0 in zip(gx1, gx0):
        assert_close(x1, x0, msg=f"input grad {where}")
    assert g1.keys() == g0.keys()
    for k in g0:
        assert_close(g1[k], g0[k], msg=f"{k} {where}")


def assert_dgls_zero_in_degree_error(theirs_cls) -> None:
    """A swapped copy of ``theirs_cls(2, 2, 1)`` raises DGL's zero-in-degree error, word for word, before
    any op is counted."""
    g = dgl.graph((torch.tensor([0]), torch.tensor([1])), num_nodes=3)
    theirs = theirs_cls(2, 2, 1)
    ours = copy.deepcopy(theirs)
    dgl_accel.nn.swap(ours)
    x = torch.randn(3, 2)
    with pytest.raises(DGLError) as want:
        theirs(g, x)
    dgl_accel.reset_stats()
    with pytest.raises(DGLError) as got:
        ours(g, x)
    assert str(got.value) == str(want.value) and dgl_accel.stats() == {}


def assert_same_on_backends(theirs, ours, g, x, get_attention: bool, stat: str) -> None:
    """One step of ``ours`` equals one of ``theirs`` on the native and the Triton backend (the kernels
    under the interpreter), each counting ``stat``."""
    want = run_module(theirs, g, x, get_attention)
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            dgl_accel.reset_stats()
            assert_same(want, run_module(ours, g, x, get_attention), f"{name} {g} {g.edges()}")
            assert stat in dgl_accel.stats()


def assert_same_steps(theirs, ours, g, x, where: str = "") -> None:
    """One step of each, with the attention, agrees (:func:`assert_same`)."""
    assert_same(run_module(theirs, g, x, True), run_module(ours, g, x, True), where)


def larger_graph():
    """300 nodes, 3000 random edges and self-loops: past ``runtime.MIN_WORK``, so the native path runs
    the compiled loops."""
    torch.manual_seed(2)
    return dgl.add_self_loop(dgl.graph((torch.randint(0, 300, (3000,)), torch.randint(0, 300, (3000,))),
                                       num_nodes=300))
