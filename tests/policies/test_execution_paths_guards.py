"""Execution paths are exact or refuse: losses that read rows beyond the training ids (all rows,
an L2 term on every output, a penalty on hidden activations) give native DGL's gradients inside
the block (those backward steps run in full, with one warning), raise with ``strict=True``, and
raise under ``restrict_forward=True``, whose forward computed those rows as 0."""
import contextlib
import copy
import warnings

import dgl
import dgl.nn
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
import dgl_accel.nn
from dgl_accel.testing.tolerances import assert_close


class Net(torch.nn.Module):
    """GraphConv / SAGEConv layers with ReLU and dropout; returns the output and every hidden state."""

    def __init__(self, kinds, dims, dropout):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            dgl.nn.GraphConv(i, o, allow_zero_in_degree=True) if kind == "gcn" else dgl.nn.SAGEConv(i, o, "mean")
            for kind, (i, o) in zip(kinds, zip(dims[:-1], dims[1:])))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, g, x):
        hidden = []
        for k, layer in enumerate(self.layers):
            x = layer(g, x)
            if k + 1 < len(self.layers):
                x = self.dropout(torch.relu(x))
                hidden.append(x)
        return x, hidden


def _loss(kind, out, hidden, y, idx):
    if kind == "all_rows":
        return F.cross_entropy(out, y)
    loss = F.cross_entropy(out[idx], y[idx])
    if kind == "l2_outputs":
        loss = loss + 1e-2 * out.square().sum()
    elif kind == "l2_hidden":
        loss = loss + 1e-2 * sum(h.square().sum() for h in hidden)
    return loss


def _step(model, g, x, y, idx, kind, ctx):
    torch.manual_seed(0)  # same dropout masks on both sides
    model.zero_grad()
    x = x.clone().requires_grad_()
    with ctx:
        out, hidden = model(g, x)
        _loss(kind, out, hidden, y, idx).backward()
    return {k: p.grad.clone() for k, p in model.named_parameters()}, x.grad


@st.composite
def setups(draw):
    n = draw(st.integers(10, 50))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    e = draw(st.integers(n, 4 * n))
    g = dgl.add_self_loop(dgl.graph((rng.integers(0, n, e), rng.integers(0, n, e)), num_nodes=n))
    layers = draw(st.integers(2, 4))
    kinds = [draw(st.sampled_from(["gcn", "sage"])) for _ in range(layers)]
    dims = [draw(st.integers(2, 6)) for _ in range(layers + 1)]
    idx = torch.from_numpy(rng.permutation(n)[: max(1, n // 10)])
    return g, kinds, dims, idx, draw(st.sampled_from([0.0, 0.5]))


@settings(max_examples=12, deadline=None)
@given(setup=setups(), kind=st.sampled_from(["all_rows", "l2_outputs", "l2_hidden"]))
def test_losses_beyond_the_training_rows_keep_native_gradients(setup, kind):
    g, kinds, dims, idx, dropout = setup
    torch.manual_seed(1)
    native = Net(kinds, dims, dropout)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    x, y = torch.randn(g.num_nodes(), dims[0]), torch.randint(0, dims[-1], (g.num_nodes(),))
    grads0, xgrad0 = _step(native, g, x, y, idx, kind, contextlib.nullcontext())
    for model in (ours, native):  # swapped modules, and unmodified dgl.nn through the backend
        for _ in range(2):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                grads, xgrad = _step(model, g, x, y, idx, kind, dgl_accel.execution_paths(g, idx))
            for k in grads0:
                assert_close(grads[k], grads0[k])
            assert_close(xgrad, xgrad0)
            if bool(torch.count_nonzero(torch.stack([v.abs().sum() for v in grads0.values()]))):
                assert any("outside the" in str(w.message) for w in caught) or not _reaches_outside(
                    g, idx, kinds), [str(w.message) for w in caught]


def _reaches_outside(g, idx, kinds):
    """Whether some node outside N^L exists (else every gradient is inside the frontier anyway)."""
    from dgl_accel.policies.exec_paths.session import prepare

    return bool((~prepare(g, idx).frontier(len(kinds))).any())


def _fixed():
    rng = np.random.default_rng(3)
    n = 80
    g = dgl.add_self_loop(dgl.graph((rng.integers(0, n, 200), rng.integers(0, n, 200)), num_nodes=n))
    torch.manual_seed(2)
    model = Net(["gcn", "gcn"], [5, 8, 3], 0.0)
    dgl_accel.nn.swap(model)
    return g, model, torch.randn(n, 5), torch.randint(0, 3, (n,)), torch.arange(4)


def test_a_training_rows_loss_gives_no_warning():
    g, model, x, y, idx = _fixed()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _step(model, g, x, y, idx, "train_rows", dgl_accel.execution_paths(g, idx))


def test_strict_mode_refuses_a_loss_beyond_the_training_rows():
    g, model, x, y, idx = _fixed()
    with pytest.raises(ValueError, match=r"expected the gradient reaching .* to be 0 outside .* Fix: compute the loss"):
        _step(model, g, x, y, idx, "all_rows", dgl_accel.execution_paths(g, idx, strict=True))


@pytest.mark.parametrize("kind", ["all_rows", "l2_outputs"])
def test_restrict_forward_refuses_a_loss_beyond_the_training_rows(kind):
    g, model, x, y, idx = _fixed()
    with pytest.raises(RuntimeError, match="restrict_forward=True the forward pass computed those rows as 0"):
        for _ in range(2):  # the first step learns the number of layers
            _step(model, g, x, y, idx, kind, dgl_accel.execution_paths(g, idx, restrict_forward=True))


class _MaxThenGCN(torch.nn.Module):
    """GraphConv -> max aggregation (through the front door, or DGL's op) -> GraphConv."""

    def __init__(self, front_door: bool):
        super().__init__()
        self.a, self.b = dgl.nn.GraphConv(5, 6, allow_zero_in_degree=True), dgl.nn.GraphConv(6, 3)
        self.front_door = front_door

    def forward(self, g, x):
        h = torch.relu(self.a(g, x))
        h = dgl_accel.functional.gspmm(g, "copy_u", "max", h) if self.front_door else dgl.ops.copy_u_max(g, h)
        return self.b(g, h), []


def test_a_max_aggregation_through_the_front_door_counts_as_a_layer():
    """max/min run on the extrema op over every row; inside execution paths they count as an aggregation, so
    the layers before them keep the right frontier depth (exact without the gradient guard's
    fallback, hence no warning)."""
    g, _, x, y, idx = _fixed()
    torch.manual_seed(5)
    native = _MaxThenGCN(front_door=False)
    ours = copy.deepcopy(native)
    ours.front_door = True
    dgl_accel.nn.swap(ours)
    grads0, xgrad0 = _step(native, g, x, y, idx, "train_rows", contextlib.nullcontext())
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            grads, xgrad = _step(ours, g, x, y, idx, "train_rows", dgl_accel.execution_paths(g, idx))
        for k in grads0:
            assert_close(grads[k], grads0[k])
        assert_close(xgrad, xgrad0)


def test_a_gradient_penalty_runs_in_full_without_tripping_strict_mode():
    """Under create_graph the backward is recorded on the full graph (no frontier check); a penalty
    on the training rows' input gradient keeps every gradient inside the frontiers, so strict mode
    has nothing to refuse, and the gradients equal plain DGL's.  (A penalty on every row's input
    gradient reads all rows: strict mode refuses it like any such loss.)"""
    g, native, x, y, idx = _fixed()
    dgl_accel.nn.unswap(native)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)

    def penalised(model, ctx):
        model.zero_grad()
        xx = x.clone().requires_grad_()
        with ctx:
            out, _ = model(g, xx)
            gx, = torch.autograd.grad(out[idx].square().sum(), xx, create_graph=True)
            (F.cross_entropy(out[idx], y[idx]) + gx.square().sum()).backward()
        return {k: p.grad.clone() for k, p in model.named_parameters()}

    want = penalised(native, contextlib.nullcontext())
    got = penalised(ours, dgl_accel.execution_paths(g, idx, strict=True))
    for k in want:
        assert_close(got[k], want[k])


def test_a_penalty_on_every_rows_input_gradient_is_refused_in_strict_mode():
    g, model, x, y, idx = _fixed()
    xx = x.clone().requires_grad_()
    with pytest.raises(ValueError, match="reads rows beyond train_idx"):
        with dgl_accel.execution_paths(g, idx, strict=True):
            out, _ = model(g, xx)
            gx, = torch.autograd.grad(out.square().sum(), xx, create_graph=True)
            (F.cross_entropy(out[idx], y[idx]) + gx.square().sum()).backward()
