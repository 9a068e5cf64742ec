"""Swapped modules and enable() around unmodified dgl.nn modules give DGL's outputs and gradients
(on both paths), keep state_dict keys, and round-trip weights with native DGL models."""
import copy

import dgl
import dgl.nn
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dgl_accel
import dgl_accel.nn
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.tolerances import assert_close

MODULES = {
    "GraphConv-both": lambda i, o: dgl.nn.GraphConv(i, o, norm="both", allow_zero_in_degree=True),
    "GraphConv-right": lambda i, o: dgl.nn.GraphConv(i, o, norm="right", allow_zero_in_degree=True),
    "GraphConv-none": lambda i, o: dgl.nn.GraphConv(i, o, norm="none", allow_zero_in_degree=True),
    # activations: ReLU runs in place on our fresh output (function and module forms), others as given
    "GraphConv-relu": lambda i, o: dgl.nn.GraphConv(i, o, activation=torch.relu, allow_zero_in_degree=True),
    "GraphConv-ReLU": lambda i, o: dgl.nn.GraphConv(i, o, norm="right", activation=torch.nn.ReLU(),
                                                    allow_zero_in_degree=True),
    "GraphConv-tanh": lambda i, o: dgl.nn.GraphConv(i, o, activation=torch.tanh, allow_zero_in_degree=True),
    "SAGEConv-mean": lambda i, o: dgl.nn.SAGEConv(i, o, "mean"),
    "SAGEConv-gcn": lambda i, o: dgl.nn.SAGEConv(i, o, "gcn"),
    "SAGEConv-pool": lambda i, o: dgl.nn.SAGEConv(i, o, "pool"),
    "GINConv-sum": lambda i, o: dgl.nn.GINConv(torch.nn.Linear(i, o), "sum", learn_eps=True),
    "GINConv-mean": lambda i, o: dgl.nn.GINConv(torch.nn.Linear(i, o), "mean"),
    "GINConv-max": lambda i, o: dgl.nn.GINConv(torch.nn.Linear(i, o), "max"),
}
MAX_KINDS = {"SAGEConv-pool", "GINConv-max"}
EDGE_WEIGHTS = {"GraphConv-both", "GraphConv-right", "GraphConv-none", "GraphConv-relu", "GraphConv-ReLU",
                "GraphConv-tanh", "SAGEConv-mean", "SAGEConv-gcn",
                "GINConv-sum", "GINConv-mean", "GINConv-max"}


def _run(module, g, x, w):
    module.zero_grad()
    x = x.clone().requires_grad_()
    w = None if w is None else w.clone().requires_grad_()
    out = module(g, x) if w is None else module(g, x, edge_weight=w)
    out.backward(torch.ones_like(out) + torch.arange(out.shape[-1], dtype=out.dtype))
    grads = {k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}
    return out.detach(), x.grad, (None if w is None else w.grad), grads


def _assert_same(a, b, msg):
    assert_close(a[0], b[0], msg=f"{msg} out")
    assert_close(a[1], b[1], msg=f"{msg} dx")
    if a[2] is not None or b[2] is not None:
        assert_close(a[2], b[2], msg=f"{msg} dw")
    assert a[3].keys() == b[3].keys()
    for k in a[3]:
        assert_close(a[3][k], b[3][k], msg=f"{msg} d{k}")


@pytest.mark.interpreter
@pytest.mark.parametrize("kind", sorted(MODULES))
@settings(max_examples=6)
@given(gf=gst.graph_and_features(graph_strategy=st.one_of(gst.graphs(max_nodes=30, max_edges=90),
                                                          gst.blocks(max_dst=12, max_edges=90)),
                                 dim=st.integers(1, 6), non_contiguous=False),
       out_f=st.integers(1, 5), weighted=st.booleans())
def test_swapped_and_enabled_match_native(kind, gf, out_f, weighted):
    g, x = gf
    assume(kind not in MAX_KINDS or g.num_edges() > 0)  # without edges DGL's max leaks: the test below
    w = torch.rand(g.num_edges()) + 0.5 if weighted and kind in EDGE_WEIGHTS else None
    torch.manual_seed(0)
    native = MODULES[kind](x.shape[1], out_f)
    swapped = copy.deepcopy(native)
    report = dgl_accel.nn.swap(swapped)
    assert len(report.swapped) == 1 and isinstance(swapped, type(native))
    expected = _run(native, g, x, w)
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            dgl_accel.reset_stats()
            _assert_same(_run(swapped, g, x, w), expected, f"{kind} swapped {name}")
            assert dgl_accel.stats(), "the swapped module did not reach dgl-accel"
            with dgl_accel.enabled():
                _assert_same(_run(native, g, x, w), expected, f"{kind} enabled {name}")


def test_blocks_from_a_sampler(path):
    g = dgl.rand_graph(200, 1500)
    g.ndata["x"] = torch.randn(200, 8)
    sampler = dgl.dataloading.NeighborSampler([4, 4])
    _, _, blocks = sampler.sample_blocks(g, torch.arange(0, 200, 7))
    torch.manual_seed(0)
    native = torch.nn.ModuleList([dgl.nn.SAGEConv(8, 6, "mean"), dgl.nn.GraphConv(6, 3, allow_zero_in_degree=True)])
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)

    def forward(layers):
        h = blocks[0].srcdata["x"]
        for layer, block in zip(layers, blocks):
            h = layer(block, h)
        return h

    expected, got = forward(native), forward(ours)
    assert got.shape == (blocks[-1].num_dst_nodes(), 3)
    assert_close(got, expected)
    assert set(dgl_accel.stats()) == {"copy_u_mean", "copy_u_sum"}


def test_lstm_aggregator_is_left_to_dgl(path):
    g = dgl.rand_graph(20, 80)
    x = torch.randn(20, 4)
    torch.manual_seed(0)
    native = dgl.nn.SAGEConv(4, 3, "lstm")
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    assert torch.equal(ours(g, x), native(g, x))
    assert dgl_accel.stats() == {}


def test_state_dict_round_trip_and_identical_keys():
    torch.manual_seed(0)
    native = torch.nn.Sequential(dgl.nn.GraphConv(5, 4), dgl.nn.SAGEConv(4, 3, "gcn"), dgl.nn.GINConv(None, "sum"))
    g = dgl.add_self_loop(dgl.rand_graph(15, 40))
    x = torch.randn(15, 5)

    def forward(m):
        return m[2](g, m[1](g, m[0](g, x)))

    ours = torch.nn.Sequential(dgl_accel.nn.GraphConv(5, 4), dgl_accel.nn.SAGEConv(4, 3, "gcn"),
                               dgl_accel.nn.GINConv(None, "sum"))
    assert list(ours.state_dict()) == list(native.state_dict())
    ours.load_state_dict(native.state_dict())           # native -> ours
    assert_close(forward(ours), forward(native))
    back = torch.nn.Sequential(dgl.nn.GraphConv(5, 4), dgl.nn.SAGEConv(4, 3, "gcn"), dgl.nn.GINConv(None, "sum"))
    back.load_state_dict(ours.state_dict())             # ours -> native
    assert torch.equal(forward(back), forward(native))


def test_swap_report_unswap_and_user_subclasses():
    class MyConv(dgl.nn.GraphConv):  # a user's own subclass is left alone
        pass

    model = torch.nn.ModuleDict({"a": dgl.nn.GraphConv(3, 3), "b": MyConv(3, 3), "c": torch.nn.Linear(3, 3)})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = dgl_accel.nn.swap(model)
    assert [r[0] for r in report.swapped] == ["a"] and [k[0] for k in report.kept] == ["b"]
    assert type(model["a"]) is dgl_accel.nn.GraphConv and type(model["b"]) is MyConv
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert "a: dgl.nn.pytorch.conv.graphconv.GraphConv -> dgl_accel.nn.graphconv.GraphConv" in str(report)
    assert dgl_accel.swap(model).swapped == []  # idempotent; the top-level name is the same function
    dgl_accel.unswap(model)
    assert type(model["a"]) is dgl.nn.GraphConv
    with pytest.raises(ValueError, match=r"expected a torch.nn.Module \(got str\)"):
        dgl_accel.nn.swap("model")


def test_top_level_names_load_on_first_use_and_unknown_names_fail():
    assert dgl_accel.swap is dgl_accel.nn.swap and dgl_accel.unswap is dgl_accel.nn.unswap
    assert dgl_accel.execution_paths is dgl_accel.patching.execution_paths
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        dgl_accel.no_such_name  # noqa: B018


# a fresh process by necessity: about 4 s on 2 cores (torch and DGL imported), a quick test still
def test_plain_import_exposes_nn_and_sampling():
    """``import dgl_accel`` alone is enough for ``dgl_accel.nn.GraphConv`` and
    ``dgl_accel.sampling.NeighborSampler`` (they load on first use, in a fresh process)."""
    import subprocess
    import sys

    code = ("import dgl_accel, sys; assert 'dgl_accel.nn' not in sys.modules; "
            "print(dgl_accel.nn.GraphConv.__name__, dgl_accel.sampling.NeighborSampler.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["GraphConv", "NeighborSampler"], out.stderr


@pytest.mark.parametrize("kind", sorted(MAX_KINDS))
@pytest.mark.parametrize("backend", ["native", pytest.param("triton", marks=pytest.mark.interpreter)])
def test_max_aggregation_without_edges_sends_no_gradient(kind, backend):
    # A graph (here a block) without edges: no message reaches any row, so the max is 0 and nothing flows
    # back through it.  DGL's backward sends each row's gradient to source 0 (its default argmax), so its
    # pool / GIN MLP parameters get gradients; ours are the module without the aggregation.
    g = dgl.create_block((torch.tensor([], dtype=torch.int64),) * 2, num_src_nodes=3, num_dst_nodes=2)
    torch.manual_seed(0)
    native, x = MODULES[kind](4, 3), torch.randn(3, 4)
    swapped = copy.deepcopy(native)
    dgl_accel.nn.swap(swapped)
    with dgl_accel.use_backend(backend):
        out, dx, _, grads = _run(swapped, g, x, None)
    xd = x[:2].clone().requires_grad_()
    plain = copy.deepcopy(native)
    if kind == "SAGEConv-pool":  # fc_self(h_dst) + fc_neigh(0)
        want = plain.fc_self(xd) + plain.fc_neigh(torch.zeros(2, 4))
    else:  # mlp((1 + eps) h_dst + 0)
        want = plain.apply_func((1 + plain.eps) * xd)
    want.backward(torch.ones_like(want) + torch.arange(want.shape[-1], dtype=want.dtype))
    assert_close(out, want.detach(), msg=f"{kind} out")
    assert_close(dx[:2], xd.grad, msg=f"{kind} dx")
    assert torch.count_nonzero(dx[2:]) == 0  # the source that is no destination: no message, no gradient
    pool = [k for k in grads if k.startswith("fc_pool")]
    assert all(torch.count_nonzero(grads[k]) == 0 for k in pool)
    assert dict(plain.named_parameters()).keys() >= grads.keys()
    for k, p in plain.named_parameters():
        if p.grad is not None and k in grads:
            assert_close(grads[k], p.grad, msg=f"{kind} d{k}")
    with torch.no_grad():
        assert_close(native(g, x), out, msg=f"{kind} DGL's output")  # the forward is DGL's
