"""The DGL drop-ins under CPU bf16 autocast (issue 45): each swapped module against DGL's under the same
``torch.autocast("cpu", dtype=torch.bfloat16)``, called first under autocast and after an fp32 step,
forward and backward (``dgl_accel.testing.autocast``: at most twice DGL's bf16 error against fp64, in the
output, the input gradient and every parameter gradient; gradients in their leaves' dtypes).  On the
graph's default CPU path and with the compiled loops forced on.

DGL's ``GATConv`` and ``GATv2Conv`` raise under autocast (``DGLError``: their projected features come
out in bf16, their scores in fp32); ours run (the fused op, in bf16): they are checked against DGL's
module run whole in bf16.
"""
import copy

import dgl
import dgl.nn
import pytest
import torch
import torch.nn.functional as F
from dgl.base import DGLError

import dgl_accel
from dgl_accel.testing.autocast import assert_autocast_matches
from dgl_accel.testing.cpu_loops import forced_jit

IN = 24


def _hetero_sage():
    return dgl.nn.HeteroGraphConv({r: dgl.nn.SAGEConv(IN, 8, "mean")
                                   for r in ("follows", "buys", "bought_by")}, aggregate="sum")


# name -> (module, DGL raises under autocast); ReLU only where named (gradients checked loosely there:
# dgl_accel.testing.autocast's grads=False)
MODULES = {
    "GraphConv": (lambda: dgl.nn.GraphConv(IN, 8), None),
    "GraphConv-relu": (lambda: dgl.nn.GraphConv(IN, 8, activation=F.relu), None),
    "GraphConv-widening": (lambda: dgl.nn.GraphConv(IN, 40, norm="right"), None),
    "SAGEConv-mean": (lambda: dgl.nn.SAGEConv(IN, 8, "mean"), None),
    "SAGEConv-gcn": (lambda: dgl.nn.SAGEConv(IN, 8, "gcn"), None),
    "SAGEConv-pool": (lambda: dgl.nn.SAGEConv(IN, 8, "pool"), None),
    "GINConv-sum": (lambda: dgl.nn.GINConv(torch.nn.Linear(IN, 8), "sum", learn_eps=True), None),
    "GATConv": (lambda: dgl.nn.GATConv(IN, 4, 3, residual=True), DGLError),
    "GATConv-1x16": (lambda: dgl.nn.GATConv(IN, 16, 1), DGLError),
    "GATv2Conv": (lambda: dgl.nn.GATv2Conv(IN, 4, 3), DGLError),
    "DotGatConv": (lambda: dgl.nn.DotGatConv(IN, 4, 3), None),
    "EdgeConv": (lambda: dgl.nn.EdgeConv(IN, 8), None),
    "HeteroGraphConv-SAGE": (_hetero_sage, None),
}


def _graph():
    gen = torch.Generator().manual_seed(0)
    src, dst = (torch.randint(0, 60, (400,), generator=gen) for _ in range(2))
    return dgl.add_self_loop(dgl.graph((src, dst), num_nodes=60))


def _hetero():
    gen = torch.Generator().manual_seed(1)

    def rel(ns, nd):
        return torch.randint(0, ns, (5 * ns,), generator=gen), torch.randint(0, nd, (5 * ns,), generator=gen)

    return dgl.heterograph({("u", "follows", "u"): rel(40, 40), ("u", "buys", "i"): rel(40, 20),
                            ("i", "bought_by", "u"): rel(20, 40)}, num_nodes_dict={"u": 40, "i": 20})


@pytest.mark.parametrize("jit", [False, True], ids=["default-path", "compiled-loops"])
@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "after-fp32"])
@pytest.mark.parametrize("name", list(MODULES))
def test_dropin_under_autocast(name, warm, jit):
    make, peer_raises = MODULES[name]
    torch.manual_seed(0)
    theirs = make()
    with torch.no_grad():  # parameters in [-1, 1]: spread scores, non-zero biases
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = copy.deepcopy(theirs)
    assert dgl_accel.swap(ours).swapped
    hetero = name.startswith("Hetero")
    g = _hetero() if hetero else _graph()
    gen = torch.Generator().manual_seed(2)
    x = {t: torch.randn(g.num_nodes(t), IN, generator=gen) for t in g.ntypes} if hetero else \
        torch.randn(g.num_nodes(), IN, generator=gen)
    with forced_jit(jit):
        dgl_accel.reset_stats()
        assert_autocast_matches(theirs, ours, lambda m, h: m(g, h), x, warm, peer_raises, where=name,
                                grads="relu" not in name)
        stats = dgl_accel.stats()
    assert stats, f"{name}: nothing ran on dgl-accel"


def test_attention_under_autocast_never_takes_dgls_raising_forward():
    """Under autocast the attention drop-ins take the fused op (GATv2 and the dot product at every shape,
    GAT wherever it would in fp32), or, for GAT's several narrow heads on the CPU, DGL's forward with the
    projection widened to fp32 (DGL's own forward would raise on the mixed dtypes); outside autocast the
    rule is unchanged."""
    from dgl_accel.policies.attention import choose_attention
    like = torch.zeros(1)
    assert not choose_attention("gat", 8, 8, like).fused
    with torch.autocast("cpu", dtype=torch.bfloat16):
        narrow, wide = choose_attention("gat", 8, 8, like), choose_attention("gat", 4, 32, like)
        v2, dot = choose_attention("gatv2", 8, 8, like), choose_attention("dot", 8, 8, like)
    assert not narrow.fused and narrow.widen and "autocast" in narrow.reason
    assert wide.fused and v2.fused and dot.fused and not (wide.widen or v2.widen or dot.widen)


def test_narrow_gat_under_autocast_widens_the_projection_and_restores_it():
    """The narrow-headed GAT under autocast: the projection runs in bf16, DGL's attention code reads its
    output in fp32 (so DGL's message passing sees one dtype), the output is fp32, gradients reach every
    parameter, and the module's ``fc`` is its own again after the call (and its state_dict unchanged)."""
    g, x = _graph(), torch.randn(60, IN)
    conv = dgl.nn.GATConv(IN, 8, 8)
    dgl_accel.swap(conv)
    keys, fc = list(conv.state_dict()), conv.fc
    seen = []
    hook = conv.fc.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = conv(g, x)
    hook.remove()
    out.float().sum().backward()
    assert seen == [torch.bfloat16] and out.dtype == torch.float32
    assert conv.fc is fc and list(conv.state_dict()) == keys
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in conv.parameters())


def test_graphconv_product_in_autocast_dtype():
    """The weight product of a swapped GraphConv runs in bf16 under autocast, as DGL's ``th.matmul`` does
    (not in fp32 behind autocast's back, which would be slower than DGL), and the bias goes in after it,
    promoted to fp32: the output has DGL's dtype."""
    g, x = _graph(), torch.randn(60, IN)
    conv = dgl.nn.GraphConv(IN, 8, activation=F.relu)
    dgl_accel.swap(conv)
    seen = []
    from dgl_accel.core import dense as core_dense
    original = core_dense.DenseFunction.forward

    def spy(ctx, x, weight, *rest):
        seen.append((x.dtype, weight.dtype))
        return original(ctx, x, weight, *rest)

    core_dense.DenseFunction.forward = staticmethod(spy)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = conv(g, x)
    finally:
        core_dense.DenseFunction.forward = staticmethod(original)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = dgl.nn.GraphConv(IN, 8, activation=F.relu)(g, x).dtype
    assert seen == [(torch.bfloat16, torch.bfloat16)] and out.dtype == want == torch.float32


def test_bf16_aggregation_on_dgl_graphs_runs_dgls_bf16_kernel(monkeypatch):
    """bf16 features without edge weights go to DGL's CPU SpMM as bf16 (it sums in fp32 inside, at half
    the bytes), not widened to fp32 and back; weighted ones are widened (DGL wants one dtype)."""
    from dgl_accel.graph.views import DGLGraphViews
    seen, original = [], DGLGraphViews.native_spmm

    def spy(self, direction, x, w):
        seen.append(x.dtype)
        return original(self, direction, x, w)

    monkeypatch.setattr(DGLGraphViews, "native_spmm", spy)
    g = _graph()
    x = torch.randn(60, IN).to(torch.bfloat16)
    got = dgl_accel.functional.gspmm(g, "copy_u", "sum", x, None, norm="both")
    w = torch.rand(g.num_edges(), 1)
    dgl_accel.functional.gspmm(g, "u_mul_e", "sum", x, w)
    assert seen == [torch.bfloat16, torch.float32] and got.dtype == torch.bfloat16
    want = dgl_accel.functional.gspmm(g, "copy_u", "sum", x.double(), None, norm="both")
    assert (got.double() - want).abs().max() <= 2 ** -7 * want.abs().max()  # within a bf16 ulp or so


def test_hetero_relations_share_one_cast_of_each_node_types_features():
    """Under autocast a swapped HeteroGraphConv of SAGE (mean, narrowing) casts each node type's
    features to bf16 once for all its relations' products; DGL casts them once per product (six
    here: autocast caches casts of leaves that require grad only, weights, not features).  With
    features that require grad, their gradients still come back in fp32."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountCasts(TorchDispatchMode):
        def __init__(self, shapes):
            super().__init__()
            self.shapes, self.casts = shapes, []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if (func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16
                    and args[0].dtype == torch.float32 and tuple(args[0].shape) in self.shapes):
                self.casts.append(tuple(args[0].shape))
            return func(*args, **kwargs)

    g = _hetero()
    x = {t: torch.randn(g.num_nodes(t), IN) for t in g.ntypes}
    shapes = {tuple(v.shape) for v in x.values()}
    counts = {}
    for who in ("dgl", "ours"):
        torch.manual_seed(0)
        conv = _hetero_sage()
        if who == "ours":
            dgl_accel.swap(conv)
        with CountCasts(shapes) as mode, torch.autocast("cpu", dtype=torch.bfloat16):
            conv(g, x)
        counts[who] = sorted(mode.casts)
    assert counts["ours"] == sorted(shapes) and len(counts["dgl"]) == 6
    leaves = {t: v.clone().requires_grad_(True) for t, v in x.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = conv(g, leaves)
    sum(v.float().sum() for v in out.values()).backward()
    assert all(v.grad is not None and v.grad.dtype == torch.float32 for v in leaves.values())


@pytest.mark.parametrize("make", [lambda: dgl.nn.GATConv(IN, 8, 2), lambda: dgl.nn.GATConv(IN, 32, 2),
                                  lambda: dgl.nn.GATv2Conv(IN, 32, 2)], ids=["GAT-narrow", "GAT-fused", "GATv2"])
def test_gat_outputs_come_out_in_fp32_under_autocast(make):
    """Under autocast the GAT drop-ins hand their output on in fp32, as PyG's GAT layers do there (and
    as DGL's would: fp32 scores times bf16 features), on the fused path and the routed one; so a user's
    ``.mean(1)`` over the heads runs in fp32 (in bf16 it takes 16 ms on torch 2.2's CPU at Amazon-CS's
    size); outside autocast the output keeps the input's dtype."""
    g, x = _graph(), torch.randn(60, IN)
    conv = make()
    dgl_accel.swap(conv)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = conv(g, x)
    assert out.dtype == torch.float32
    assert conv(g, x.double().float()).dtype == torch.float32
    conv.double()
    assert conv(g, x.double()).dtype == torch.float64
