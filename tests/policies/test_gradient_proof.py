"""The execution-path guard proves from the autograd graph that a loss reads only training rows
(``policies/exec_paths/gradient_proof.py``) instead of reading the gradient: proved for the losses
of ordinary training steps (no gradient read at all), never for a loss that reaches other rows,
whose gradients must still equal plain DGL's (a wrong proof would make them differ)."""
import contextlib
import copy
import warnings

import dgl
import dgl.nn
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import dgl_accel
import dgl_accel.nn
from dgl_accel.policies.exec_paths.gradient_proof import _inside
from dgl_accel.testing.tolerances import assert_close

N = 90


class Model(torch.nn.Module):
    """GraphConv -> ReLU -> dropout -> GraphConv (-> optional linear head)."""

    def __init__(self, head: bool, dropout: float):
        super().__init__()
        self.a, self.b = dgl.nn.GraphConv(6, 8, allow_zero_in_degree=True), dgl.nn.GraphConv(8, 5)
        self.head = torch.nn.Linear(5, 4) if head else None
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, g, x):
        out = self.b(g, self.dropout(torch.relu(self.a(g, x))))
        return self.head(torch.relu(out)) if self.head is not None else out


def _graph():
    rng = np.random.default_rng(7)
    g = dgl.add_self_loop(dgl.graph((rng.integers(0, N, 240), rng.integers(0, N, 240)), num_nodes=N))
    train = torch.from_numpy(rng.permutation(N)[:6])
    return g, train


# Losses that read training rows only: each must be proved, so no gradient row is read.
TRAINING_LOSSES = {
    "index": lambda out, y, t, m: F.cross_entropy(out[t], y[t]),
    "log_softmax_then_index": lambda out, y, t, m: F.nll_loss(F.log_softmax(out, 1)[t], y[t]),
    "bool_mask": lambda out, y, t, m: F.cross_entropy(out[m], y[m]),
    "index_select": lambda out, y, t, m: F.cross_entropy(out.index_select(0, t), y[t]),
    "subset_of_a_copy": lambda out, y, t, m: F.cross_entropy(out[t[:3].clone()], y[t[:3]]),
    "scaled_twice": lambda out, y, t, m: 2 * F.cross_entropy((out * 0.5 + 1)[t], y[t]) + out[t].square().mean(),
}
# Losses that reach rows outside the training set through something the proof must not accept.
OTHER_LOSSES = {
    "other_rows": lambda out, y, t, m: F.cross_entropy(out[(t + 1) % N], y[t]),
    "softmax_over_nodes": lambda out, y, t, m: torch.softmax(out, 0)[t].square().sum(),
    "slice": lambda out, y, t, m: F.cross_entropy(out[:20], y[:20]),
    "transpose": lambda out, y, t, m: out.t()[:, t].sum() + out.t()[0].square().sum(),
    "all_rows_plus_index": lambda out, y, t, m: F.cross_entropy(out[t], y[t]) + 1e-2 * out.square().sum(),
    "broadcast_against_nodes": lambda out, y, t, m: (out.unsqueeze(0) * out[:, :1].unsqueeze(1))[t].sum(),
}


def _step(model, g, x, y, train, loss_fn, ctx, backward=None):
    torch.manual_seed(0)  # the same dropout masks on both sides
    model.zero_grad()
    x = x.clone().requires_grad_()
    mask = torch.zeros(N, dtype=torch.bool)
    mask[train] = True
    with ctx as session:
        loss = loss_fn(model(g, x), y, train, mask)
        (backward or torch.autograd.backward)(loss)
    return {k: p.grad.clone() for k, p in model.named_parameters()}, x.grad, session


def _compare(loss_fn, head=False, dropout=0.5, backward=None):
    """(session of the second step inside the block) after checking every gradient against DGL."""
    g, train = _graph()
    torch.manual_seed(3)
    native = Model(head, dropout)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    x, y = torch.randn(N, 6), torch.randint(0, 4, (N,))
    want, want_x, _ = _step(native, g, x, y, train, loss_fn, contextlib.nullcontext(), backward)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the guard's warning for OTHER_LOSSES
            got, got_x, session = _step(ours, g, x, y, train, loss_fn, dgl_accel.execution_paths(g, train),
                                        backward)
        for k in want:
            assert_close(got[k], want[k])
        assert_close(got_x, want_x)
    return session


@pytest.mark.parametrize("head", [False, True])
@pytest.mark.parametrize("name", sorted(TRAINING_LOSSES))
def test_a_training_rows_loss_is_proved_without_reading_gradient_rows(name, head):
    session = _compare(TRAINING_LOSSES[name], head=head)
    assert session.proofs >= 1 and session.scans == 0, (session.proofs, session.scans)


@pytest.mark.parametrize("name", sorted(OTHER_LOSSES))
def test_a_loss_beyond_the_training_rows_is_never_proved(name):
    session = _compare(OTHER_LOSSES[name], dropout=0.0)
    assert session.scans >= 1, (session.proofs, session.scans)


def test_a_gradient_given_for_the_output_itself_is_not_proved():
    """backward() with the model output as a root: its gradient comes from the caller, not the graph."""
    g, train = _graph()
    torch.manual_seed(4)
    model = Model(False, 0.0)
    dgl_accel.nn.swap(model)
    x = torch.randn(N, 6)
    with dgl_accel.execution_paths(g, train) as session, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = model(g, x)
        torch.autograd.backward([out[train].sum(), out], [torch.tensor(1.0), torch.ones_like(out)])
    assert session.proofs == 0 and session.scans >= 1


def test_a_nested_backward_proves_nothing_and_stays_exact():
    """Reentrant checkpointing runs a backward inside the backward: the inner call sees part of
    the graph only, so neither call proves anything, and the gradients stay DGL's."""
    def checkpointed(loss):
        torch.autograd.backward(loss)

    class Ckpt(Model):
        def forward(self, g, x):
            h = checkpoint(lambda v: self.dropout(torch.relu(self.a(g, v))), x, use_reentrant=True)
            return self.b(g, h)

    g, train = _graph()
    torch.manual_seed(3)
    native = Ckpt(False, 0.0)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    x, y = torch.randn(N, 6), torch.randint(0, 4, (N,))
    loss = TRAINING_LOSSES["index"]
    want, want_x, _ = _step(native, g, x, y, train, loss, contextlib.nullcontext(), checkpointed)
    got, got_x, session = _step(ours, g, x, y, train, loss, dgl_accel.execution_paths(g, train), checkpointed)
    for k in want:
        assert_close(got[k], want[k])
    assert_close(got_x, want_x)


def test_an_index_changed_in_place_is_checked_by_value():
    mask = torch.zeros(10, dtype=torch.bool)
    mask[[1, 3, 5]] = True
    idx = torch.tensor([1, 3, 5])
    assert _inside(idx, mask, 3, (idx, idx._version))
    idx[0] = 2  # same object, new version: the identity no longer vouches for it
    assert not _inside(idx, mask, 3, (idx, idx._version - 1))
    assert _inside(torch.tensor([-5, 3]), mask, 3, (None, None))        # -5 is row 5
    assert not _inside(torch.tensor([3, 10]), mask, 3, (None, None))    # out of range
    assert not _inside(torch.tensor([1, 3, 5, 1]), mask, 3, (None, None))  # longer than the training set: not read
    assert not _inside(mask.clone().fill_(True), mask, 3, (None, None))  # a mask with more rows
    assert _inside(mask.clone(), mask, 3, (None, None))


def test_torch_entry_points_are_wrapped_only_inside_the_block():
    original = torch.autograd.backward, torch.autograd.grad
    g, train = _graph()
    with dgl_accel.execution_paths(g, train):
        assert torch.autograd.backward is not original[0]
        with dgl_accel.execution_paths(g, train):
            pass
        assert torch.autograd.grad is not original[1]  # the outer block still holds them
    assert (torch.autograd.backward, torch.autograd.grad) == original
    with pytest.raises(KeyError), dgl_accel.execution_paths(g, train):
        raise KeyError("boom")
    assert (torch.autograd.backward, torch.autograd.grad) == original


def test_a_hook_on_the_way_to_the_selection_is_not_proved_and_stays_exact():
    """A Tensor.register_hook on the model output may write any row of its gradient."""
    def spread(grad):
        return grad + 0.1  # every row, not only the training rows

    def hooked_loss(out, y, t, m):
        out.register_hook(spread)
        return F.cross_entropy(out[t], y[t])

    session = _compare(hooked_loss, dropout=0.0)
    assert session.scans >= 1, (session.proofs, session.scans)
    assert torch.Tensor.register_hook.__name__ == "register_hook" and not hasattr(
        torch.Tensor.register_hook, "__wrapped__")  # restored after the block
