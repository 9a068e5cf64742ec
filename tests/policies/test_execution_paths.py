"""Execution paths: with a fixed training set, partial backward (and receptive-field forward) give
the loss and every weight gradient of native DGL full-graph training; zero-gradient rows are
exactly the rows outside the frontier sets; bad input fails clearly; graph changes rebuild."""
import contextlib
import copy

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
from dgl_accel.policies.exec_paths.session import prepare
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_close


def _frontiers_reference(g, train_idx, depth):
    """N^0..N^depth by plain BFS over in-edges, independent of the implementation."""
    src, dst = (t.numpy() for t in g.edges())
    sets = [set(train_idx.tolist())]
    for _ in range(depth):
        cur = sets[-1]
        sets.append(cur | {int(u) for u, v in zip(src, dst) if int(v) in cur})
    return sets


class Net(torch.nn.Module):
    """L layers of GraphConv (both matmul orders) / SAGEConv, ReLU and dropout in between."""

    def __init__(self, kinds, dims, dropout):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for kind, (i, o) in zip(kinds, zip(dims[:-1], dims[1:])):
            if kind == "gcn":
                self.layers.append(dgl.nn.GraphConv(i, o, allow_zero_in_degree=True))
            elif kind == "gcn_right":
                self.layers.append(dgl.nn.GraphConv(i, o, norm="right", allow_zero_in_degree=True))
            else:
                self.layers.append(dgl.nn.SAGEConv(i, o, kind))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, g, x):
        for k, layer in enumerate(self.layers):
            x = layer(g, x)
            if k + 1 < len(self.layers):
                x = self.dropout(torch.relu(x))
        return x


def _step(model, g, x, y, idx, ctx, seed=0):
    torch.manual_seed(seed)  # same dropout masks on both sides
    model.zero_grad()
    x = x.clone().requires_grad_()
    with ctx:
        loss = F.cross_entropy(model(g, x)[idx], y[idx])
        loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}, x.grad


@st.composite
def setups(draw):
    n = draw(st.integers(8, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    e = draw(st.integers(0, 4 * n))
    g = dgl.graph((rng.integers(0, n, e), rng.integers(0, n, e)), num_nodes=n,
                  idtype=draw(st.sampled_from([torch.int32, torch.int64])))
    if draw(st.booleans()):
        g = dgl.add_self_loop(g)
    layers = draw(st.integers(2, 4))
    kinds = [draw(st.sampled_from(["gcn", "gcn_right", "mean", "gcn_sage"])) for _ in range(layers)]
    kinds = ["gcn" if k == "gcn_sage" else k for k in kinds]
    dims = [draw(st.integers(1, 6)) for _ in range(layers + 1)]
    ratio = draw(st.floats(0.01, 0.8))
    idx = torch.from_numpy(rng.permutation(n)[: max(1, int(ratio * n))])
    return g, kinds, dims, idx, draw(st.sampled_from([0.0, 0.5])), draw(st.booleans())


@pytest.mark.interpreter
# 15 examples: over 2 s on 2 cores under the interpreter (the slow case); the quick case draws 1 of the same
@pytest.mark.parametrize("examples", quick_first([1, 15]))
def test_loss_and_gradients_equal_native_full_graph_training(examples):
    @settings(max_examples=examples)
    @given(setup=setups())
    def check(setup):
        g, kinds, dims, idx, dropout, restrict = setup
        torch.manual_seed(1)
        native = Net(kinds, dims, dropout)
        ours = copy.deepcopy(native)
        dgl_accel.nn.swap(ours)
        x, y = torch.randn(g.num_nodes(), dims[0]), torch.randint(0, dims[-1], (g.num_nodes(),))
        loss0, grads0, xgrad0 = _step(native, g, x, y, idx, contextlib.nullcontext())
        paths = prepare(g, idx)
        reached = paths.frontier(len(kinds))  # N^L: every node the loss can depend on
        assert torch.equal(reached, torch.tensor([i in _frontiers_reference(g, idx, len(kinds))[-1]
                                                  for i in range(g.num_nodes())]))
        assert torch.all(xgrad0[~reached] == 0)  # the math: nothing outside N^L reaches the loss
        for name in ("native", "triton"):
            with dgl_accel.use_backend(name):
                for model in (ours, native):  # swapped modules, and unmodified dgl.nn through the backend
                    for _step_no in range(2):  # the second step reuses the cached paths (and learned L)
                        ctx = dgl_accel.execution_paths(g, idx, restrict_forward=restrict and model is ours)
                        loss, grads, xgrad = _step(model, g, x, y, idx, ctx)
                        assert_close(loss, loss0, msg=f"{name} loss")
                        for k in grads0:
                            assert_close(grads[k], grads0[k], msg=f"{name} d{k}")
                        assert_close(xgrad, xgrad0, msg=f"{name} dx")
                        assert torch.all(xgrad[~reached] == 0)

    check()


def test_zero_gradient_rows_are_exactly_the_rows_outside_the_frontiers(path):
    # A chain 0 <- 1 <- 2 <- 3 <- 4 <- 5 (edges u -> u-1) with self-loops (as GCN adds them) and
    # linear layers with positive weights: the input gradient is nonzero exactly on N^L = {0..L}.
    g = dgl.add_self_loop(dgl.graph((torch.arange(1, 6), torch.arange(0, 5)), num_nodes=6))
    for layers in (2, 3, 4):
        convs = torch.nn.ModuleList([dgl_accel.nn.GraphConv(2, 2, norm="none", bias=False,
                                                            allow_zero_in_degree=True) for _ in range(layers)])
        for c in convs:
            torch.nn.init.uniform_(c.weight, 0.5, 1.0)
        x = torch.rand(6, 2).add_(0.5).requires_grad_()
        with dgl_accel.execution_paths(g, torch.tensor([0])) as session:
            h = x
            for c in convs:
                h = c(g, h)
            h[0].sum().backward()
            frontier = session.paths.frontier(layers)
        assert torch.equal(x.grad.abs().sum(1) > 0, frontier)
        assert frontier.tolist() == [i <= layers for i in range(6)]


@pytest.mark.slow  # over 2 s on 2 cores: the quick lane (scripts/test.sh --quick) leaves it out
def test_cora_same_accuracy_with_execution_paths(tmp_path):
    from dgl_accel import data
    from dgl_accel.train_gcn import GCN, accuracy

    if data.datasets_root() is None:
        pytest.skip("needs ../shared/datasets (Cora)")
    g = dgl.add_self_loop(dgl.remove_self_loop(data.load("cora")))
    x, y = g.ndata["feat"], g.ndata["label"]
    train_idx = g.ndata["train_mask"].nonzero().flatten()
    results = {}
    for mode in ("off", "on", "on_rf"):
        accs = []
        for seed in range(2):
            torch.manual_seed(seed)
            model = GCN(x.shape[1], 16, 7, 0.5)
            opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
            for _ in range(100):
                model.train()
                ctx = (contextlib.nullcontext() if mode == "off" else
                       dgl_accel.execution_paths(g, train_idx, restrict_forward=mode == "on_rf"))
                with ctx:
                    loss = F.cross_entropy(model(g, x)[train_idx], y[train_idx])
                    opt.zero_grad()
                    loss.backward()
                opt.step()
            model.eval()
            with torch.no_grad():  # evaluation outside the block: all-active
                accs.append(accuracy(model(g, x), y, g.ndata["test_mask"]))
        results[mode] = accs
    assert results["on"] == results["off"] and results["on_rf"] == results["off"], results
    assert min(results["off"]) > 0.75


def test_eval_inside_the_block_is_all_active_and_other_graphs_untouched(path):
    g = dgl.add_self_loop(dgl.rand_graph(40, 120))
    other = dgl.add_self_loop(dgl.rand_graph(40, 120))
    conv = dgl_accel.nn.GraphConv(3, 2)
    x = torch.randn(40, 3)
    full, full_other = conv(g, x).detach(), conv(other, x).detach()
    with dgl_accel.execution_paths(g, torch.tensor([0, 1]), restrict_forward=True, num_layers=1) as session:
        with torch.no_grad():
            assert torch.equal(conv(g, x), full)  # no autograd: not a training step, all rows
        assert_close(conv(other, x), full_other)  # another graph: all-active
        assert session.calls == 0


@pytest.mark.parametrize("idx, match", [
    (torch.tensor([0, 40]), r"expected training node ids in \[0, 40\) \(got ids from 0 to 40\)"),
    (torch.tensor([-1, 3]), r"expected training node ids in \[0, 40\)"),
    (torch.tensor([3, 3, 5]), r"expected distinct training node ids \(got 1 duplicates\)"),
    (torch.tensor([], dtype=torch.int64), r"expected at least one training node \(got an empty Vt\)"),
    (torch.tensor([0.5]), r"expected a 1-D integer tensor"),
    (torch.zeros(39, dtype=torch.bool), r"expected a boolean training mask of shape \(40,\)"),
])
def test_bad_training_indices(idx, match):
    g = dgl.rand_graph(40, 100)
    with pytest.raises(ValueError, match=match):
        with dgl_accel.execution_paths(g, idx):
            pass


def test_row_mixing_layers_and_blocks_are_rejected():
    g = dgl.rand_graph(40, 100)
    model = torch.nn.Sequential(dgl.nn.GraphConv(3, 3), torch.nn.BatchNorm1d(3))
    with pytest.raises(ValueError, match=r"expected only row-wise layers .* \(got BatchNorm1d at '1'"):
        with dgl_accel.execution_paths(g, torch.tensor([1]), model=model):
            pass
    block = dgl.to_block(g, torch.arange(10))
    with pytest.raises(ValueError, match=r"expected the full graph of full-graph training \(got a block\)"):
        with dgl_accel.execution_paths(block, torch.tensor([1])):
            pass


def test_graph_changed_after_preparation_rebuilds_transparently(path):
    g = dgl.graph(([1, 2, 0], [0, 1, 0]), num_nodes=5)
    conv = dgl_accel.nn.GraphConv(2, 2, norm="none", allow_zero_in_degree=True)
    x = torch.randn(5, 2)
    idx = torch.tensor([0])

    def grads(ctx):
        xx = x.clone().requires_grad_()
        with ctx:
            conv(g, conv(g, xx))[0].sum().backward()
        return xx.grad

    for restrict in (False, True):
        with dgl_accel.execution_paths(g, idx) as session:
            assert session.paths.frontier(2).tolist() == [True, True, True, False, False]
        assert_close(grads(dgl_accel.execution_paths(g, idx, restrict_forward=restrict, num_layers=2)),
                     grads(contextlib.nullcontext()))
    g.add_edges([3, 4], [0, 3])  # mutate in place: paths built before would miss nodes 3 and 4
    for restrict in (False, True):
        with dgl_accel.execution_paths(g, idx) as session:
            assert session.paths.frontier(2).tolist() == [True, True, True, True, True]
        after = grads(dgl_accel.execution_paths(g, idx, restrict_forward=restrict, num_layers=2))
        assert_close(after, grads(contextlib.nullcontext()))
        assert float(after[4].abs().sum()) > 0  # reached only through the new edges


def test_restrict_forward_refuses_more_layers_than_declared():
    g = dgl.add_self_loop(dgl.rand_graph(30, 90))
    conv = dgl_accel.nn.GraphConv(2, 2)
    x = torch.randn(30, 2)
    with dgl_accel.execution_paths(g, torch.tensor([0]), restrict_forward=True, num_layers=1):
        conv(g, x)
        with pytest.raises(RuntimeError, match=r"expected at most 1 aggregations per training step"):
            conv(g, conv(g, x))


@pytest.mark.parametrize("fmt", ["coo", "csc"])  # csr alone: DGL's GraphConv cannot count in-degrees
def test_graphs_restricted_to_one_sparse_format(fmt):
    g = dgl.add_self_loop(dgl.rand_graph(30, 90)).formats(fmt)
    torch.manual_seed(0)
    native = dgl.nn.GraphConv(3, 2, norm="right")  # "both" needs out-degrees, which csc alone lacks
    x = torch.randn(30, 3, requires_grad=True)
    native(g, x)[[0, 1]].sum().backward()
    expected, x.grad = x.grad.clone(), None
    with dgl_accel.execution_paths(g, torch.tensor([0, 1])) as session:
        native(g, x)[[0, 1]].sum().backward()
        assert session.calls == 1  # the view DGL passes was recognised as this graph
    assert_close(x.grad, expected)


@pytest.mark.parametrize("norm", ["both", "right", "left", "none"])
def test_aggregate_first_layers_stay_on_active_rows(norm, monkeypatch):
    """Receptive-field forward of aggregation-first GraphConv layers (in_feats <= out_feats) runs
    on N^d's rows from aggregation to activation (RowsSpMMFunction): loss, weight and input
    gradients still equal native DGL; the input gradient is zero exactly outside N^L."""
    from dgl_accel.policies.exec_paths.plan import RowsSpMMFunction

    calls = []
    original = RowsSpMMFunction.apply
    monkeypatch.setattr(RowsSpMMFunction, "apply",
                        staticmethod(lambda *a: calls.append(a[1]) or original(*a)))
    rng = np.random.default_rng(5)
    n = 300
    g = dgl.add_self_loop(dgl.graph((rng.integers(0, n, 900), rng.integers(0, n, 900)), num_nodes=n))
    idx = torch.from_numpy(rng.permutation(n)[:20])
    torch.manual_seed(0)
    native = torch.nn.ModuleList([dgl.nn.GraphConv(4, 8, norm=norm, activation=torch.relu),
                                  dgl.nn.GraphConv(8, 8, norm=norm, activation=torch.tanh),
                                  dgl.nn.GraphConv(8, 3, norm=norm)])
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    x, y = torch.randn(n, 4), torch.randint(0, 3, (n,))

    def run(model, ctx):
        model.zero_grad()
        xx = x.clone().requires_grad_()
        with ctx:
            h = xx
            for conv in model:
                h = conv(g, h)
            loss = F.cross_entropy(h[idx], y[idx])
            loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()], xx.grad

    loss0, grads0, xgrad0 = run(native, contextlib.nullcontext())
    loss, grads, xgrad = run(ours, dgl_accel.execution_paths(g, idx, restrict_forward=True, num_layers=3))
    assert calls == [2, 1]  # layers 1 and 2 (aggregation first) on N^2 and N^1; layer 3 multiplies first
    assert_close(loss, loss0)
    for a, b in zip(grads, grads0):
        assert_close(a, b)
    assert_close(xgrad, xgrad0)
    reached = prepare(g, idx).frontier(3)
    assert torch.all(xgrad[~reached] == 0) and reached.sum() < n  # a real restriction: not every node


@pytest.mark.parametrize("kind", ["full", "compact", "subgraph", "subgraph_without_numba"])
@pytest.mark.parametrize("dense_rows", ["restricted", "all"])
def test_every_path_structure_gives_native_gradients(kind, dense_rows, monkeypatch):
    """Each structure an aggregation can run on (the full graph, a compact block, the all-rows CSR
    that the compiled pass reads, or DGL's subgraph without numba), with the dense backward on the
    frontier's rows or on all rows, gives native DGL's loss and gradients."""
    from dgl_accel.core.jit import runtime as jit_runtime
    from dgl_accel.policies.exec_paths import paths as paths_mod
    from dgl_accel.policies.exec_paths import plan as plan_mod

    if kind == "subgraph_without_numba":
        monkeypatch.setattr(jit_runtime, "enabled", lambda: False)
        kind = "subgraph"
    monkeypatch.setattr(paths_mod, "MAX_EDGE_FRACTION", 0.0 if kind == "full" else 1.0)
    monkeypatch.setattr(paths_mod, "COMPACT_MAX_NODES", 1.0 if kind == "compact" else 0.0)
    monkeypatch.setattr(plan_mod, "MAX_ROW_FRACTION", 1.0 if dense_rows == "restricted" else 0.0)
    rng = np.random.default_rng(5)
    n = 400
    g = dgl.add_self_loop(dgl.graph((rng.integers(0, n, 1500), rng.integers(0, n, 1500)), num_nodes=n))
    idx = torch.from_numpy(rng.permutation(n)[:30])
    kinds, dims = ["gcn", "gcn_right", "gcn"], [8, 16, 70, 3]  # both product orders; 70 wide: oneDNN's wgrad
    torch.manual_seed(0)
    native = Net(kinds, dims, 0.0)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    x, y = torch.randn(n, dims[0]), torch.randint(0, dims[-1], (n,))
    loss0, grads0, xgrad0 = _step(native, g, x, y, idx, contextlib.nullcontext())
    assert plan_mod.prepare_path(paths_mod.Paths(g, idx), 0, "out") == kind
    for _ in range(2):
        loss, grads, xgrad = _step(ours, g, x, y, idx, dgl_accel.execution_paths(g, idx))
        assert_close(loss, loss0)
        for k in grads0:
            assert_close(grads[k], grads0[k], msg=f"d{k}")
        assert_close(xgrad, xgrad0)


def test_training_indices_changed_in_place_are_checked_again():
    """The checks of a training-index tensor are remembered between steps, but an in-place change
    (its version moves) is validated and used anew: no stale frontiers, no unchecked ids."""
    g = dgl.add_self_loop(dgl.rand_graph(40, 120))
    idx = torch.tensor([1, 2, 3])
    with dgl_accel.execution_paths(g, idx) as session:
        first = session.paths.frontier(0).nonzero().flatten().tolist()
    idx[0] = 7
    with dgl_accel.execution_paths(g, idx) as session:
        assert session.paths.frontier(0).nonzero().flatten().tolist() == [2, 3, 7] != first
    idx[0] = 3
    with pytest.raises(ValueError, match="expected distinct training node ids"):
        with dgl_accel.execution_paths(g, idx):
            pass
    idx[0] = 40
    with pytest.raises(ValueError, match=r"expected training node ids in \[0, 40\)"):
        with dgl_accel.execution_paths(g, idx):
            pass
