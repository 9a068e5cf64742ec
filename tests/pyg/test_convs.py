"""The PyG drop-ins (``dgl_accel.pyg.nn``) against PyG's own modules with the same weights: outputs
and gradients (features, every parameter, edge weights) on hypothesis graphs with self-loops,
isolated nodes, zero-in-degree targets and multi-edges, homogeneous and bipartite (``(x_src, x_dst)``
with ``size``); fp32 at the tolerance table's fp32 row, fp16/bf16 under the flash-attention rule
against PyG in fp64 (``dgl_accel.testing.tolerances``); the compiled CPU loops and the torch path
where numba is there; a few cases on the Triton kernels under the interpreter; GAT's attention
dropout drawing PyG's masks on the native path; the attention weights returned as PyG returns them."""
import copy

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.pyg.graph import edges_of  # noqa: E402
from dgl_accel.pyg.nn.products import with_in_edges  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.cpu_loops import forced_jit  # noqa: E402
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference  # noqa: E402

EXAMPLES = max(1, settings.default.max_examples // 2)  # per test: 12 under "ci" (seconds per lane), 100 "local"
HALF = (torch.float16, torch.bfloat16)
CORE_OPS = ("copy_u_sum", "copy_u_sum_self", "copy_u_mean", "copy_u_max", "copy_u_min", "u_mul_e_sum", "u_mul_e_mean",
            "gat_attention", "gatv2_attention")


# ---------------------------------------------------------------------------------------------- helpers
def build(cls, *args, seed=0, **kwargs):
    """PyG's module with every parameter drawn from U(-1, 1) (non-zero biases, attention vectors)."""
    torch.manual_seed(seed)
    return uniform(cls(*args, **kwargs))


def uniform(module):
    """``module`` with every parameter drawn from U(-1, 1), in place."""
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(-1, 1)
    return module


def swapped(theirs):
    """A deep copy of ``theirs`` with dgl-accel's class (through ``dgl_accel.pyg.swap``)."""
    ours = copy.deepcopy(theirs)
    report = dgl_accel.pyg.swap(ours)
    assert [row[0] for row in report.swapped] == [""], str(report)
    assert type(ours).__module__.startswith("dgl_accel.pyg.nn") and isinstance(ours, type(theirs))
    return ours


def results(module, call, feats, edge_weight, cot):
    """(output, grad of each feature tensor, of the edge weights, of every parameter) of ``call(m,
    feats, edge_weight)`` on a copy of ``module`` in the features' dtype; loss <out, cot>."""
    dtype = feats[0].dtype
    m = copy.deepcopy(module).to(dtype)
    feats = [f.detach().clone().requires_grad_() for f in feats]
    ew = None if edge_weight is None else edge_weight.detach().to(dtype).requires_grad_()
    out = call(m, feats, ew)
    wrt = feats + ([ew] if ew is not None else []) + [p for p in m.parameters() if p.requires_grad]
    grads = torch.autograd.grad((out * cot.to(out.dtype)).sum(), wrt, allow_unused=True)
    return (out,) + tuple(torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads))


def check(theirs, call, feats, edge_weight=None, dtype=torch.float32):
    """Ours (``swapped(theirs)``) gives PyG's output and gradients: at the tolerance table's row in
    fp32/fp64, under the flash-attention rule against PyG in fp64 in fp16/bf16."""
    ours = swapped(theirs)
    out = call(copy.deepcopy(theirs), [f.detach() for f in feats], edge_weight)
    cot = tst.randn(tuple(out.shape), torch.float32, 7)
    feats = [f.to(dtype) for f in feats]
    got = results(ours, call, feats, edge_weight, cot)
    if dtype in HALF:
        assert_matches_reference(got, lambda *a: results(theirs, call, list(a[:len(feats)]), a[len(feats)], a[-1]),
                                 *feats, edge_weight, cot)
    else:
        want = results(theirs, call, feats, edge_weight, cot)
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_close(a, b, msg=f"result {k}")
    fallthrough = {op: v for op, v in dgl_accel.stats().items() if op.startswith("pyg.")}
    assert not fallthrough, fallthrough
    return ours


@st.composite
def graphs(draw, bipartite=None, max_nodes=14, max_edges=40):
    """(edge_index [2, E], num_src, num_dst, bipartite, seed): homogeneous edge lists (self-loops,
    isolated nodes, multi-edges, zero in-degree) or bipartite blocks (num_src >= num_dst)."""
    bip = draw(st.booleans()) if bipartite is None else bipartite
    if bip:
        e = draw(tst.block_edge_lists(max_dst=max_nodes // 2 + 1, max_extra_src=max_nodes // 2, max_edges=max_edges,
                                      idtypes=INT64))
    else:
        e = draw(tst.edge_lists(max_nodes=max_nodes, max_edges=max_edges, idtypes=INT64))
    return torch.stack([e.src, e.dst]), e.num_src, e.num_dst, bip, draw(tst.SEEDS)


def features(num_src, num_dst, channels, bip, seed):
    x_src = tst.randn((num_src, channels), torch.float32, seed)
    return [x_src, tst.randn((num_dst, channels), torch.float32, seed + 1)] if bip else [x_src]


def pair_or_one(feats):
    return tuple(feats) if len(feats) == 2 else feats[0]


INT64 = (torch.int64,)  # PyG's index dtype (with int32 its mean fails on torch 2.2, its gradients on 2.11)
JIT = st.booleans()  # the compiled CPU loops at every size, or the torch path (where numba is there)


# ---------------------------------------------------------------------------------------------- GCNConv
@settings(max_examples=EXAMPLES)
@given(graphs(bipartite=False), st.sampled_from([False, True]), st.sampled_from([True, False]),
       st.sampled_from([True, False]), st.booleans(), st.sampled_from(["add", "mean"]), JIT)
def test_gcn(graph, improved, loops, normalize, weighted, aggr, jit):
    ei, n, _, _, seed = graph
    loops = loops and normalize  # PyG refuses self-loops without normalisation
    theirs = build(pyg_nn.GCNConv, 5, 3, improved=improved, add_self_loops=loops, normalize=normalize, aggr=aggr)
    ew = (tst.randn((ei.shape[1],), torch.float32, seed + 2).abs() + 0.5) if weighted else None
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(f[0], ei, w), features(n, n, 5, False, seed), ew)


def test_gcn_cached_keeps_pygs_first_normalisation():
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x = tst.randn((4, 5), torch.float32, 1)
    theirs = build(pyg_nn.GCNConv, 5, 3, cached=True)
    ours = swapped(theirs)
    other = torch.tensor([[0, 0], [1, 2]])
    for graph in (ei, other):  # the second graph is ignored by both: cached=True
        assert_close(ours(x, graph), theirs(x, graph))
    assert ours._cached_edge_index is not None and ours._cached_edge_index[0].shape == theirs._cached_edge_index[0].shape
    ours.reset_parameters()  # PyG's reset clears the cache
    assert ours._cached_edge_index is None


# ---------------------------------------------------------------------------------------------- SAGEConv
@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(["mean", "max", "add", "min"]), st.booleans(), st.booleans(), st.booleans(),
       st.booleans(), JIT)
def test_sage(graph, aggr, root_weight, project, normalize, pass_size, jit):
    ei, ns, nd, bip, seed = graph
    theirs = build(pyg_nn.SAGEConv, 4, 3, aggr=aggr, root_weight=root_weight, project=project, normalize=normalize)
    size = (ns, nd) if pass_size else None
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(pair_or_one(f), ei, size=size), features(ns, nd, 4, bip, seed))


# ---------------------------------------------------------------------------------------------- GraphConv
@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(["add", "mean", "max", "min"]), st.booleans(), st.sampled_from([3, 6]), JIT)
def test_graph_conv(graph, aggr, weighted, out_channels, jit):
    """Weighted or not, narrowing (the product first) or widening (the aggregation first); max and
    min with weights go to PyG (counted)."""
    ei, ns, nd, bip, seed = graph
    dgl_accel.reset_stats()  # per example: check() counts the fallthroughs since
    theirs = build(pyg_nn.GraphConv, 4, out_channels, aggr=aggr)
    ew = tst.randn((ei.shape[1],), torch.float32, seed + 2) if weighted else None
    call = lambda m, f, w: m(pair_or_one(f), ei, w, size=(ns, nd) if bip else None)  # noqa: E731
    feats = features(ns, nd, 4, bip, seed)
    if weighted and aggr in ("max", "min"):
        ours = swapped(theirs)
        assert_close(call(ours, feats, ew), call(theirs, feats, ew))
        assert dgl_accel.stats()["pyg.GraphConv"][f"fallthrough: aggr {aggr!r} with edge weights"] == 1
        return
    with forced_jit(jit):
        check(theirs, call, feats, ew)


@pytest.mark.parametrize("conv,dtype", [(c, d) for c in ("sage_mean", "sage_max", "sage_wide", "graph_conv",
                                                        "graph_conv_weighted")
                                         for d in (torch.float32, torch.bfloat16) if (c, d) != ("sage_max", torch.bfloat16)])
def test_targets_past_the_last_in_edge_take_only_the_root_term(conv, dtype):
    """A sampled mini-batch lists its last hop last, without in-edges: the aggregation and ``lin``'s
    product cover the targets up to the last with an in-edge (``products.with_in_edges``), the rest
    is the root term plus ``lin``'s bias, as in PyG's full product; narrowing and widening layers.
    (Max in fp32 only: bf16 rounding makes ties, where PyG splits the gradient: the module docstring.)"""
    gen = torch.Generator().manual_seed(3)  # sources anywhere in 0..19, targets in 0..11: 12..19 get no in-edges
    ei = torch.stack([torch.randint(0, 20, (60,), generator=gen), torch.randint(0, 12, (60,), generator=gen)])
    wide = conv == "sage_wide"
    channels, out = (4, 8) if wide else (8, 3)
    theirs = {"sage_mean": lambda: build(pyg_nn.SAGEConv, channels, out),
              "sage_wide": lambda: build(pyg_nn.SAGEConv, channels, out),
              "sage_max": lambda: build(pyg_nn.SAGEConv, channels, out, aggr="max"),
              "graph_conv": lambda: build(pyg_nn.GraphConv, channels, out),
              "graph_conv_weighted": lambda: build(pyg_nn.GraphConv, channels, out, aggr="mean")}[conv]()
    ew = tst.randn((60,), torch.float32, 4) if conv == "graph_conv_weighted" else None
    views = edges_of(ei).views(20, 20, homogeneous=True)
    assert with_in_edges(edges_of(ei), views, root=True).num_dst == int(ei[1].max()) + 1 < 20
    call = (lambda m, f, w: m(f[0], ei, w)) if conv.startswith("graph_conv") else (lambda m, f, w: m(f[0], ei))
    check(theirs, call, [tst.randn((20, channels), torch.float32, 5)], ew, dtype=dtype)


def test_graph_conv_takes_pygs_edge_weight_shapes_and_refuses_others():
    theirs = build(pyg_nn.GraphConv, 4, 3)
    ours = swapped(theirs)
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x, w = tst.randn((4, 4), torch.float32, 1), torch.rand(4)
    assert_close(ours(x, ei, w.view(-1, 1)), theirs(x, ei, w.view(-1, 1)))  # [E, 1], as PyG's message reads it
    with pytest.raises(ValueError, match=r"Expected 'edge_weight' of shape \[4\]"):
        ours(x, ei, torch.rand(5))


# ---------------------------------------------------------------------------------------------- GINConv
@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from(["add", "mean", "max"]), st.booleans(), st.floats(-0.5, 0.5), JIT)
def test_gin(graph, aggr, train_eps, eps, jit):
    ei, ns, nd, bip, seed = graph
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    theirs = build(pyg_nn.GINConv, mlp, eps=eps, train_eps=train_eps, aggr=aggr)
    with torch.no_grad():
        theirs.eps.fill_(eps)
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(pair_or_one(f), ei), features(ns, nd, 4, bip, seed))


@pytest.mark.parametrize("nn", ["linear", "sequential", "subclass"])
def test_gin_without_gradients_sums_into_scratch_that_never_leaves(nn):
    """No gradient recorded and ``nn`` starting with a linear layer: the sum goes to a reused
    buffer read only by that product.  Outputs equal PyG's, and an output stays what it was after
    later calls on other features (a leaked buffer would change under it); a Linear subclass (it
    may override forward) runs ``nn`` on a fresh sum."""
    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)
    gen = torch.Generator().manual_seed(0)
    n = 3000  # large enough for the compiled loops
    ei = torch.randint(0, n, (2, 20000), generator=gen)
    layer = {"linear": lambda: torch.nn.Linear(8, 16),
             "sequential": lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()),
             "subclass": lambda: Scaled(8, 16)}[nn]()
    theirs = build(pyg_nn.GINConv, layer, eps=0.5)
    ours = swapped(theirs)
    xs = [tst.randn((n, 8), torch.float32, seed) for seed in (1, 2)]
    with torch.no_grad(), forced_jit(True):
        first = ours(xs[0], ei)
        kept = first.clone()
        second = ours(xs[1], ei)
        assert_close(first, theirs(xs[0], ei))
        assert_close(second, theirs(xs[1], ei))
    assert torch.equal(first, kept)


def test_gin_without_target_features_sizes_targets_as_pyg():
    ei = torch.tensor([[0, 1, 2, 4], [1, 1, 0, 2]])
    theirs = build(pyg_nn.GINConv, torch.nn.Linear(3, 2))
    x = tst.randn((5, 3), torch.float32, 0)
    check(theirs, lambda m, f, w: m((f[0], None), ei, size=(5, 3)), [x])
    check(theirs, lambda m, f, w: m((f[0], None), ei), [x])  # as many targets as sources


# ---------------------------------------------------------------------------------------------- GATConv
GAT_OPTIONS = st.fixed_dictionaries({"heads": st.integers(1, 3), "concat": st.booleans(),
                                     "add_self_loops": st.booleans(), "residual": st.booleans(),
                                     "bias": st.booleans(), "negative_slope": st.sampled_from([0.2, 0.0, 1.5])})


@settings(max_examples=EXAMPLES)
@given(graphs(), GAT_OPTIONS, st.booleans(), st.booleans(), JIT)
def test_gat(graph, options, split_lin, attention, jit):
    """One projection (the whole layer fused) or lin_src/lin_dst, homogeneous or a pair, with the
    attention weights returned (their gradient flows too)."""
    ei, ns, nd, bip, seed = graph
    theirs = build(pyg_nn.GATConv, (4, 4) if split_lin else 4, 3, **options)

    def call(m, f, w):
        out = m(pair_or_one(f), ei, return_attention_weights=True if attention else None)
        if not attention:
            return out
        out, (graph, alpha) = out
        return torch.cat([out.flatten(), alpha.flatten(), graph.flatten().to(out.dtype)])

    with forced_jit(jit):
        check(theirs, call, features(ns, nd, 4, bip, seed))


@pytest.mark.parametrize("one_projection", [True, False])
def test_gat_attention_dropout_draws_pygs_mask(one_projection):
    """Training with dropout: from one torch.manual_seed, PyG's numbers (native CPU path)."""
    ei = torch.tensor([[0, 1, 2, 3, 3, 1], [1, 2, 3, 0, 1, 1]])
    theirs = build(pyg_nn.GATConv, 4 if one_projection else (4, 4), 3, heads=2, dropout=0.5).train()
    ours = swapped(theirs).train()
    x = tst.randn((4, 4), torch.float32, 3)
    for seed in range(4):
        torch.manual_seed(seed)
        want = theirs(x, ei)
        torch.manual_seed(seed)
        assert_close(ours(x, ei), want, msg=f"seed {seed}")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("conv", ["gcn", "sage", "sage_max", "gin", "gat", "gat_pair", "gatv2"])
def test_half_precision(conv, dtype):
    """fp16/bf16: as close to PyG in fp64 as PyG itself in that dtype (flash-attention rule)."""
    ei, ns, nd = torch.tensor([[0, 1, 2, 3, 4, 5, 5, 2, 1], [1, 2, 3, 0, 0, 1, 1, 2, 5]]), 6, 6
    x = [tst.randn((ns, 8), torch.float32, 5)]
    ew = None
    if conv == "gcn":
        theirs, call, ew = build(pyg_nn.GCNConv, 8, 4), (lambda m, f, w: m(f[0], ei, w)), torch.rand(9) + 0.5
    elif conv.startswith("sage"):
        theirs = build(pyg_nn.SAGEConv, 8, 4, aggr="max" if conv == "sage_max" else "mean")
        call = lambda m, f, w: m(f[0], ei)  # noqa: E731
    elif conv == "gin":
        theirs, call = build(pyg_nn.GINConv, torch.nn.Linear(8, 4)), (lambda m, f, w: m(f[0], ei))
    elif conv == "gat_pair":
        x.append(tst.randn((nd, 8), torch.float32, 6))
        theirs, call = build(pyg_nn.GATConv, 8, 4, heads=2), (lambda m, f, w: m(tuple(f), ei))
    else:
        theirs = build(pyg_nn.GATConv if conv == "gat" else pyg_nn.GATv2Conv, 8, 4, heads=2)
        call = lambda m, f, w: m(f[0], ei)  # noqa: E731
    check(theirs, call, x, ew, dtype=dtype)


# ---------------------------------------------------------------------------------------------- GATv2Conv
@settings(max_examples=EXAMPLES)
@given(graphs(), GAT_OPTIONS, st.booleans(), st.booleans(), JIT)
def test_gatv2(graph, options, share_weights, attention, jit):
    ei, ns, nd, bip, seed = graph
    theirs = build(pyg_nn.GATv2Conv, 4, 3, share_weights=share_weights, **options)

    def call(m, f, w):
        out = m(pair_or_one(f), ei, return_attention_weights=True if attention else None)
        return torch.cat([out[0].flatten(), out[1][1].flatten()]) if attention else out

    with forced_jit(jit):
        check(theirs, call, features(ns, nd, 4, bip, seed))


def test_gatv2_eval_mode_with_dropout_runs_on_the_core():
    theirs = build(pyg_nn.GATv2Conv, 4, 3, heads=2, dropout=0.3).eval()
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    check(theirs, lambda m, f, w: m.eval()(f[0], ei), [tst.randn((3, 4), torch.float32, 0)])
    assert dgl_accel.stats()["gatv2_attention"]


# ---------------------------------------------------------------------------------------------- Triton
TRITON_CASES = {
    "gcn": (lambda: build(pyg_nn.GCNConv, 4, 3), lambda m, f, w, ei: m(f[0], ei, w)),
    "sage_max": (lambda: build(pyg_nn.SAGEConv, 4, 3, aggr="max"), lambda m, f, w, ei: m(f[0], ei)),
    "sage_pair": (lambda: build(pyg_nn.SAGEConv, 4, 3), lambda m, f, w, ei: m((f[0], f[0][:3]), ei, size=(5, 3))),
    "gin": (lambda: build(pyg_nn.GINConv, torch.nn.Linear(4, 3), train_eps=True), lambda m, f, w, ei: m(f[0], ei)),
    "gat": (lambda: build(pyg_nn.GATConv, 4, 3, heads=2), lambda m, f, w, ei: m(f[0], ei)),
    "gat_pair": (lambda: build(pyg_nn.GATConv, 4, 3, heads=2), lambda m, f, w, ei: m((f[0], f[0][:3]), ei)),
    "gatv2": (lambda: build(pyg_nn.GATv2Conv, 4, 3, heads=2), lambda m, f, w, ei: m(f[0], ei)),
    "graph_conv": (lambda: build(pyg_nn.GraphConv, 4, 3), lambda m, f, w, ei: m(f[0], ei, w)),
}


@pytest.mark.interpreter
@pytest.mark.parametrize("case", sorted(TRITON_CASES))
def test_on_both_paths(case, path):
    """Each layer on the native path and on the Triton kernels (the interpreter on CPU tensors)."""
    make, call = TRITON_CASES[case]
    ei = torch.tensor([[0, 1, 2, 3, 4, 4, 0, 2], [1, 2, 0, 0, 1, 2, 2, 2]])
    ew = torch.rand(8) + 0.5 if case in ("gcn", "graph_conv") else None
    check(make(), lambda m, f, w: call(m, f, w, ei), [tst.randn((5, 4), torch.float32, 11)], ew)
    label = {"native": "native-cpu", "triton": "triton-interpreter"}[path]
    ran = {op: paths for op, paths in dgl_accel.stats().items() if op in CORE_OPS}
    assert ran and all(label in paths for paths in ran.values()), ran


@pytest.mark.parametrize("case", sorted(TRITON_CASES))
def test_graph_without_nodes(case):
    """0 nodes, 0 edges: PyG's empty outputs and gradients (the fused GAT layer's backward included)."""
    make, call = TRITON_CASES[case]
    ei = torch.zeros((2, 0), dtype=torch.int64)
    x = torch.zeros((0, 4))
    if case.endswith("pair"):  # the pair cases slice and size for 5 nodes: give them an empty pair
        call = lambda m, f, w, ei: m((f[0], f[0]), ei)  # noqa: E731
    check(make(), lambda m, f, w: call(m, f, w, ei), [x], torch.zeros(0) if case in ("gcn", "graph_conv") else None)
