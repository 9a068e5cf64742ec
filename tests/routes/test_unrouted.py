"""Every aggregation DGL runs itself while dgl_accel is enabled (UDF message or reduce functions,
max/min reducers, messages with no fused op, unsupported shapes, heterographs) is counted in
stats() as a fallthrough with its reason and reported once to the execution-path session; models
mixing routed and unrouted layers train with plain DGL's gradients inside execution_paths (issue 14,
item 5)."""
import contextlib
import copy

import dgl
import dgl.core
import dgl.function as fn
import dgl.nn
import dgl.ops
import pytest
import torch
import torch.nn.functional as F

import dgl_accel
import dgl_accel.nn
from dgl_accel import functional, patching
from dgl_accel.routes import edge_softmax as routed_edge_softmax
from dgl_accel.testing.tolerances import assert_close

ORIGINAL_MP = dgl.core.message_passing


@pytest.fixture(autouse=True)
def _always_restore():
    dgl_accel.reset_stats()
    yield
    dgl_accel.disable()
    assert dgl.core.message_passing is ORIGINAL_MP


@pytest.fixture
def noted(monkeypatch):
    """Graphs handed to note_unrouted, in order (by DGL's routing, our fused attention and the
    edge-softmax route alike)."""
    calls = []
    real = patching.note_unrouted
    for module in (patching, functional, routed_edge_softmax):
        monkeypatch.setattr(module, "note_unrouted", lambda g: (calls.append(g), real(g)))
    return calls


def test_enable_disable_patch_and_restore_dgls_message_passing_exactly():
    dgl_accel.enable()
    assert dgl.core.message_passing is patching.routed_message_passing
    dgl_accel.disable()
    assert dgl.core.message_passing is ORIGINAL_MP
    with dgl_accel.enabled():
        assert dgl.core.message_passing is patching.routed_message_passing
    assert dgl.core.message_passing is ORIGINAL_MP


def _mean_udf(nodes):
    return {"h": nodes.mailbox["m"].mean(1)}


def _mul_udf(edges):
    return {"m": edges.src["x"] * edges.data["w"]}


# name: (message, reduce, stats key, reason); every one is an aggregation DGL runs itself
UNROUTED = {
    "udf reduce": (fn.copy_u("x", "m"), _mean_udf, "copy_u_udf", "udf reduce"),
    "udf message and reduce": (_mul_udf, _mean_udf, "udf_udf", "udf reduce"),
    "udf message": (_mul_udf, fn.sum("m", "h"), "udf_sum", "udf message"),
    "no fused op": (fn.u_dot_v("x", "x", "m"), fn.sum("m", "h"), "u_dot_v_sum", "message u_dot_v has no fused op"),
    "per-head weights": (fn.u_mul_e("x", "w3", "m"), fn.sum("m", "h"), "u_mul_e_sum", "broadcast shape"),
}


def _run(g, message, reduce):
    with g.local_scope():
        g.update_all(message, reduce)
        return g.ndata["h"]


def _graph():
    torch.manual_seed(0)
    g = dgl.add_self_loop(dgl.rand_graph(30, 90))
    g.ndata["x"] = torch.randn(30, 4)
    g.edata["w"] = torch.rand(g.num_edges(), 1)
    g.edata["w3"] = torch.rand(g.num_edges(), 2, 1)  # [E, H, 1] on [N, F]: DGL broadcasts to [N, 2, 4]
    return g


@pytest.mark.parametrize("kind", UNROUTED, ids=list(UNROUTED))
def test_each_unrouted_aggregation_is_counted_once_with_its_reason(kind, noted):
    message, reduce, key, reason = UNROUTED[kind]
    g = _graph()
    expected = _run(g, message, reduce)
    with dgl_accel.enabled():
        got = _run(g, message, reduce)
    assert torch.equal(got, expected)  # DGL itself ran
    assert dgl_accel.stats() == {key: {f"fallthrough: {reason}": 1}}
    assert len(noted) == 1 and all(torch.equal(a, b) for a, b in zip(noted[0].edges(), g.edges()))  # a view of g


def test_routed_aggregations_are_not_reported_as_unrouted(noted):
    g = _graph()
    with dgl_accel.enabled():
        _run(g, fn.copy_u("x", "m"), fn.sum("m", "h"))
        _run(g, fn.u_mul_e("x", "w", "m"), fn.mean("m", "h"))
    assert noted == []
    assert all(not label.startswith("fallthrough") for d in dgl_accel.stats().values() for label in d)


def test_max_reduce_runs_ours_and_is_reported_as_unrouted_once(noted):
    # the extrema op runs every row (no execution-path plan): it counts as a layer all the same
    g = _graph()
    expected = _run(g, fn.copy_u("x", "m"), fn.max("m", "h"))
    with dgl_accel.enabled():
        got = _run(g, fn.copy_u("x", "m"), fn.max("m", "h"))
    assert torch.equal(got, expected)
    assert dgl_accel.stats() == {"copy_u_max": {"native-cpu": 1}}
    assert len(noted) == 1 and all(torch.equal(a, b) for a, b in zip(noted[0].edges(), g.edges()))


@pytest.mark.parametrize("message", [fn.u_mul_e("h2", "w2", "m"), fn.copy_e("w", "m")], ids=["multi-head", "copy_e"])
def test_head_wise_and_copy_e_run_ours_and_are_reported_as_unrouted_once(noted, message):
    # [E, H, 1] weights on [N, H, D] features and copy_e run the head-wise op, over every row (no
    # execution-path plan): like max/min they count as a layer
    g = _graph()
    g.ndata["h2"] = g.ndata["x"].reshape(30, 2, 2)
    g.edata["w2"] = g.edata["w3"]
    expected = _run(g, message, fn.sum("m", "h"))
    with dgl_accel.enabled():
        got = _run(g, message, fn.sum("m", "h"))
    assert_close(got, expected)
    assert dgl_accel.stats() == {f"{message.name}_sum": {"native-cpu": 1}}
    assert len(noted) == 1 and all(torch.equal(a, b) for a, b in zip(noted[0].edges(), g.edges()))


def test_heterograph_aggregations_are_counted_and_reported(noted):
    hg = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0, 1], [0, 0])})
    hg.nodes["a"].data["h"] = torch.randn(2, 3)
    hg.nodes["b"].data["h"] = torch.randn(2, 3)
    with dgl_accel.enabled():
        hg.update_all(fn.copy_u("h", "m"), fn.sum("m", "o"))  # one call over both relations
    assert dgl_accel.stats() == {"copy_u_sum": {"fallthrough: heterograph": 1}}
    assert len(noted) == 1


def test_sage_lstm_is_visible_in_stats():
    g = _graph()
    conv = dgl.nn.SAGEConv(4, 5, "lstm")
    expected = conv(g, g.ndata["x"])
    with dgl_accel.enabled():
        got = conv(g, g.ndata["x"])
    assert_close(got, expected)
    assert dgl_accel.stats()["copy_u_udf"] == {"fallthrough: udf reduce": 1}


class Mixed(torch.nn.Module):
    """GraphConv -> GATConv(16, 16, 2 heads, flattened) [-> SAGEConv('lstm')] -> GraphConv."""

    def __init__(self, lstm: bool):
        super().__init__()
        self.first = dgl.nn.GraphConv(6, 16, allow_zero_in_degree=True)
        self.gat = dgl.nn.GATConv(16, 8, num_heads=2, allow_zero_in_degree=True)
        self.sage = dgl.nn.SAGEConv(16, 16, "lstm") if lstm else None
        self.last = dgl.nn.GraphConv(16, 3, allow_zero_in_degree=True)

    def forward(self, g, x):
        h = torch.relu(self.first(g, x))
        h = torch.relu(self.gat(g, h).flatten(1))
        if self.sage is not None:
            h = torch.relu(self.sage(g, h))
        return self.last(g, h)


def _grads(model, g, x, y, idx, ctx):
    model.zero_grad()
    with ctx:
        loss = F.cross_entropy(model(g, x)[idx], y[idx])
        loss.backward()
    return float(loss), {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("restrict_forward", [False, True])
@pytest.mark.parametrize("lstm", [False, True], ids=["gcn-gat-gcn", "gcn-gat-lstm-gcn"])
def test_mixed_models_train_with_dgls_gradients_inside_execution_paths(lstm, restrict_forward, noted,
                                                                       fused_attention):  # GATConv's fused op
    torch.manual_seed(0)
    g = dgl.add_self_loop(dgl.rand_graph(60, 150))
    x, y = torch.randn(60, 6), torch.randint(0, 3, (60,))
    idx = torch.tensor([0, 5, 17, 42])
    native = Mixed(lstm)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    loss0, grads0 = _grads(native, g, x, y, idx, contextlib.nullcontext())
    for step in range(2):  # the first step learns the depths, the second uses them
        loss, grads = _grads(ours, g, x, y, idx, dgl_accel.execution_paths(g, idx, restrict_forward=restrict_forward))
        assert loss == pytest.approx(loss0, rel=1e-5), step
        for k in grads0:
            assert_close(grads[k], grads0[k], msg=f"step {step} {k}")
    assert len(noted) == 2 * (2 if lstm else 1)  # the swapped GATConv's fused attention (+ the LSTM reducer) per step

