"""Double backward (``create_graph=True``: gradient penalties, Hessian-vector products) through every
autograd Function of ours, issue 14 item 2: ``torch.autograd.gradgradcheck`` in float64 on both
paths (the Triton kernels under the interpreter), and the issue's repro against ``dgl.nn.GraphConv``
(our drop-in module, and unmodified dgl.nn modules under ``dgl_accel.enable()``)."""
import contextlib

import dgl
import numpy as np
import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import dgl_accel
from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.functional import dense, gspmm, scale
from dgl_accel.graph.views import DGLGraphViews
from dgl_accel.policies import redundancy as R
from dgl_accel.policies.exec_paths.plan import RowsSpMMFunction
from dgl_accel.policies.exec_paths.session import prepare
from dgl_accel.testing.marks import QUICK_NATIVE
from dgl_accel.testing.plans import FixedRowsPlan
from dgl_accel.testing.tolerances import assert_close

F64 = torch.float64
NORMS = ("none", "both", "left", "right")
WEIGHTS = [("copy_u", None), ("u_mul_e", "scalar"), ("u_mul_e", "per_feature")]


def _graph(seed: int = 0, n: int = 6, e: int = 10):
    """A small random directed graph with self-loops (no zero in-degree) and a multi-edge."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    src, dst = np.append(src, src[0]), np.append(dst, dst[0])
    return dgl.add_self_loop(dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n))


def _label(path: str) -> str:
    return "native-cpu" if path == "native" else "triton-interpreter"


def _inputs(gen, num_src: int, num_edges: int, weights, width: int = 2):
    x = torch.randn(num_src, width, dtype=F64, generator=gen, requires_grad=True)
    if weights is None:
        return (x,)
    shape = (num_edges,) if weights == "scalar" else (num_edges, width)
    return x, (torch.rand(shape, dtype=F64, generator=gen) + 0.5).requires_grad_()


@pytest.mark.parametrize("op, weights", WEIGHTS)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("norm", NORMS)
def test_gspmm_gradgradcheck(path, op, weights, reduce, norm):
    g = _graph()
    inputs = _inputs(torch.Generator().manual_seed(1), g.num_nodes(), g.num_edges(), weights)

    def f(x, w=None):
        return gspmm(g, op, reduce, x, w, norm=norm)

    fast = path == "triton"  # the interpreter: random projections; the native path checks every entry
    assert gradcheck(f, inputs, fast_mode=fast)
    assert gradgradcheck(f, inputs, fast_mode=fast)
    stats = dgl_accel.stats()
    assert stats[f"{op}_{reduce}"] == {_label(path): stats[f"{op}_{reduce}"][_label(path)]}
    assert stats[f"{op}_{reduce}_backward"][_label(path)] > 0  # backward calls are counted too


@pytest.mark.parametrize("op, weights", WEIGHTS)
def test_gspmm_gradgradcheck_on_a_block(path, op, weights):
    g = _graph(2, n=8, e=14)
    seeds = torch.tensor([0, 3, 5])
    block = dgl.to_block(dgl.in_subgraph(g, seeds), seeds)  # (to_block of g itself crashes DGL 2.1)
    inputs = _inputs(torch.Generator().manual_seed(3), block.num_src_nodes(), block.num_edges(), weights)
    for reduce, norm in (("sum", "both"), ("mean", "right"), ("sum", "left")):
        def f(x, w=None, reduce=reduce, norm=norm):
            return gspmm(block, op, reduce, x, w, norm=norm)

        assert gradgradcheck(f, inputs, fast_mode=path == "triton"), (reduce, norm)


def test_core_aggregate_gradgradcheck_without_dgl(path):
    src, dst = torch.tensor([0, 1, 2, 2, 3, 4, 0]), torch.tensor([1, 2, 1, 0, 0, 3, 1])
    g = TensorGraph(src, dst, num_nodes=5)
    x, w = _inputs(torch.Generator().manual_seed(4), 5, 7, "per_feature", width=3)
    assert gradgradcheck(lambda x, w: aggregate(g, "u_mul_e", "mean", x, w, norm="both"), (x, w))
    assert dgl_accel.stats()["u_mul_e_mean_backward"] == {_label(path): dgl_accel.stats()["u_mul_e_mean_backward"][
        _label(path)]}


def test_backward_calls_are_counted_in_stats(path):
    g = _graph()
    x = torch.randn(g.num_nodes(), 3, requires_grad=True)
    gspmm(g, "copy_u", "sum", x, norm="both").sum().backward()
    assert dgl_accel.stats() == {"copy_u_sum": {_label(path): 1}, "copy_u_sum_backward": {_label(path): 1}}
    dgl_accel.reset_stats()
    out = gspmm(g, "copy_u", "mean", x)
    (gx,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
    gx.pow(2).sum().backward()  # through the recorded backward (the transposed op) and the forward again
    assert dgl_accel.stats() == {"copy_u_mean": {_label(path): 1}, "copy_u_mean_backward": {_label(path): 3}}


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_dense_gradgradcheck(relu, bias):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(7, 4, dtype=F64, generator=gen, requires_grad=True)
    w = torch.randn(4, 3, dtype=F64, generator=gen, requires_grad=True)
    b = torch.randn(3, dtype=F64, generator=gen, requires_grad=True) if bias else None
    inputs = (x, w, b) if bias else (x, w)

    def f(x, w, b=None):
        return dense(x, w, b, relu, None, 0)

    assert gradcheck(f, inputs)
    assert gradgradcheck(f, inputs)


def test_dense_gradgradcheck_with_restricted_backward_rows():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(8, 4, dtype=F64, generator=gen, requires_grad=True)
    w = torch.randn(4, 3, dtype=F64, generator=gen, requires_grad=True)
    b = torch.randn(3, dtype=F64, generator=gen, requires_grad=True)
    rows = torch.tensor([1, 4, 6])

    def f(x, w, b):  # the loss reads only the plan's rows, as inside an execution path
        return dense(x, w, b, True, FixedRowsPlan(rows), 1)[rows]

    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_dense_float32_double_backward_avoids_out_buffers():
    # the issue's "threshold_backward(): functions with out=..." error: float32 CPU, ReLU fused
    x = torch.randn(9, 4, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    (gx,) = torch.autograd.grad(dense(x, w, b, True, None, 0).pow(2).sum(), x, create_graph=True)
    gx.pow(2).sum().backward()
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    (gxr,) = torch.autograd.grad(torch.relu(xr @ wr + br).pow(2).sum(), xr, create_graph=True)
    gxr.pow(2).sum().backward()
    for ours, ref in ((gx, gxr), (w.grad, wr.grad), (b.grad, br.grad), (x.grad, xr.grad)):
        assert_close(ours, ref)


def test_scale_gradgradcheck(path):
    x = torch.randn(5, 3, dtype=F64, requires_grad=True)
    assert gradgradcheck(lambda x: scale(x, 1.5), (x,))
    assert dgl_accel.stats()["scale"] == {_label(path): dgl_accel.stats()["scale"][_label(path)]}


@pytest.mark.parametrize("norm", ["none", "both", "right"])
def test_rows_spmm_gradgradcheck(norm):
    g = _graph(7, n=10, e=12)
    paths = prepare(g, torch.tensor([0, 4]))
    src_scale, dst_scale = DGLGraphViews(g).scales(norm, "sum", F64)
    rows = paths.rows(1)
    assert 0 < rows.numel() < g.num_nodes()
    row_scale = None if dst_scale is None else dst_scale.index_select(0, rows).unsqueeze(1)
    x = torch.randn(10, 2, dtype=F64, requires_grad=True)
    assert gradgradcheck(lambda x: RowsSpMMFunction.apply(paths, 1, src_scale, row_scale, x), (x,))


@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)  # triton (the interpreter): about 5 s on 2 cores
def test_pre_add_gradgradcheck(path):
    rng = np.random.default_rng(8)
    g = dgl.graph((torch.from_numpy(rng.integers(0, 4, 40)), torch.from_numpy(rng.integers(0, 12, 40))),
                  num_nodes=12)
    plan = R.reduce_redundancy(g, theta=2, rounds=2)
    assert plan.num_pair_nodes > 0
    x = torch.randn(12, 2, dtype=F64, requires_grad=True)
    for reduce, norm in (("sum", "both"), ("mean", None)):
        assert gradgradcheck(lambda x, reduce=reduce, norm=norm: plan.aggregate(x, reduce=reduce, norm=norm), (x,))


# ---------------------------------------------------------------------- issue 14's repro, against DGL
def _penalty_grads(module, g, x, ew, idx=None, ctx=None):
    """The issue's repro: a gradient penalty through one layer; every gradient it produces."""
    ctx = contextlib.nullcontext() if ctx is None else ctx
    x = x.clone().requires_grad_()
    ew = None if ew is None else ew.clone().requires_grad_()
    module.zero_grad()
    with ctx:
        o = module(g, x, edge_weight=ew)
        o = o if idx is None else o[idx]
        inputs = (x,) if ew is None else (x, ew)
        grads = torch.autograd.grad((o ** 2).sum(), inputs, create_graph=True)
        sum((gr ** 2).sum() for gr in grads).backward()
    out = {f"first d{i}": gr.detach() for i, gr in enumerate(grads)}
    out.update({f"d{name}": p.grad for name, p in module.named_parameters()})
    out["dx"] = x.grad
    if ew is not None:
        out["dew"] = ew.grad
    return out


def _compare(ours, ref):
    assert ours.keys() == ref.keys()
    for k in ref:
        assert ours[k] is not None, f"{k}: gradient dropped"
        assert_close(ours[k], ref[k], msg=k)


def _pair(in_f, out_f, norm, act, bias=True):
    torch.manual_seed(0)
    ref = dgl.nn.GraphConv(in_f, out_f, norm=norm, activation=act, bias=bias).double()
    ours = dgl_accel.nn.GraphConv(in_f, out_f, norm=norm, activation=act, bias=bias).double()
    ours.load_state_dict(ref.state_dict())
    return ours, ref


@pytest.mark.parametrize("in_f, out_f", [(6, 3), (3, 6), (4, 4)])  # both product orders
@pytest.mark.parametrize("norm", ["both", "right", "none", "left"])
@pytest.mark.parametrize("edge_weight", [None, "scalar"])
@pytest.mark.parametrize("act", [None, torch.relu])
def test_graphconv_gradient_penalty_matches_dgl(path, in_f, out_f, norm, edge_weight, act):
    g = _graph(9, n=12, e=30)
    gen = torch.Generator().manual_seed(10)
    x = torch.randn(12, in_f, dtype=F64, generator=gen)
    ew = None if edge_weight is None else torch.rand(g.num_edges(), dtype=F64, generator=gen) + 0.5
    ours, ref = _pair(in_f, out_f, norm, act)
    _compare(_penalty_grads(ours, g, x, ew), _penalty_grads(ref, g, x, ew))
    op = "copy_u_sum" if ew is None else "u_mul_e_sum"
    assert dgl_accel.stats()[f"{op}_backward"][_label(path)] > 0


@pytest.mark.parametrize("in_f, out_f", [(16, 8), (8, 16)])
def test_issue_repro_float32(in_f, out_f):
    g = dgl.add_self_loop(dgl.rand_graph(30, 90))
    x = torch.randn(30, in_f)
    torch.manual_seed(0)
    ours = dgl_accel.nn.GraphConv(in_f, out_f, activation=torch.relu)
    ref = dgl.nn.GraphConv(in_f, out_f, activation=torch.relu)
    ref.load_state_dict(ours.state_dict())
    _compare(_penalty_grads(ours, g, x, None), _penalty_grads(ref, g, x, None))


@pytest.mark.parametrize("module", ["GraphConv", "SAGEConv", "GINConv"])
def test_unmodified_dgl_modules_under_enable_match_dgl(path, module):
    g = _graph(11, n=12, e=30)
    x = torch.randn(12, 5, dtype=F64, generator=torch.Generator().manual_seed(12))
    ew = torch.rand(g.num_edges(), dtype=F64) + 0.5
    torch.manual_seed(0)
    m = {"GraphConv": lambda: dgl.nn.GraphConv(5, 3, norm="both", activation=torch.relu),
         "SAGEConv": lambda: dgl.nn.SAGEConv(5, 3, "mean"),
         "GINConv": lambda: dgl.nn.GINConv(torch.nn.Linear(5, 3), "sum")}[module]().double()
    ref = _penalty_grads(m, g, x, ew)
    with dgl_accel.enabled():
        ours = _penalty_grads(m, g, x, ew)
    _compare(ours, ref)
    assert any(op.endswith("_backward") and _label(path) in labels for op, labels in dgl_accel.stats().items())


@pytest.mark.parametrize("restrict", [False, True])
@pytest.mark.parametrize("dims", [(6, 3, 2), (3, 5, 6)])
def test_gradient_penalty_inside_execution_paths_matches_dgl(path, restrict, dims):
    g = _graph(13, n=16, e=30)
    idx = torch.tensor([0, 5, 9])
    x = torch.randn(16, dims[0], dtype=F64, generator=torch.Generator().manual_seed(14))
    torch.manual_seed(0)
    ref = torch.nn.ModuleList([dgl.nn.GraphConv(dims[0], dims[1], activation=torch.relu),
                               dgl.nn.GraphConv(dims[1], dims[2])]).double()
    ours = torch.nn.ModuleList([dgl_accel.nn.GraphConv(dims[0], dims[1], activation=torch.relu),
                                dgl_accel.nn.GraphConv(dims[1], dims[2])]).double()
    ours.load_state_dict(ref.state_dict())

    class Net(torch.nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.layers = layers

        def forward(self, g, h, edge_weight=None):
            for layer in self.layers:
                h = layer(g, h, edge_weight=edge_weight)
            return h

    expected = _penalty_grads(Net(ref), g, x, None, idx)
    for _step in range(2):  # the second step runs on the learned number of layers
        ctx = dgl_accel.execution_paths(g, idx, restrict_forward=restrict, num_layers=2)
        _compare(_penalty_grads(Net(ours), g, x, None, idx, ctx), expected)
