"""The propagation drop-ins (``SGConv``, ``APPNP``, ``LGConv`` of :mod:`dgl_accel.pyg.nn`) against
PyG's own modules with the same weights: outputs and gradients (features, edge weights, every
parameter) on hypothesis graphs (self-loops, isolated nodes, multi-edges, zero in-degree) in fp32,
fp16/bf16 by the flash-attention rule and under CPU bf16 autocast; PyG's ``cached`` semantics;
``torch.sparse`` adjacencies with values; APPNP's edge dropout drawing PyG's masks; the normalised
graph built once per graph; what goes to PyG counted with PyG's numbers; bad input refused with
PyG's exception type; ``torch.compile`` of a model with a swapped layer giving eager's numbers
(traced whole, ``fullgraph=True``, where torch has custom ops)."""
import copy

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.core.jit import runtime  # noqa: E402
from dgl_accel.core.library import AVAILABLE as TRACEABLE  # noqa: E402
from dgl_accel.pyg.graph import edges_of  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.autocast import assert_autocast_matches  # noqa: E402
from dgl_accel.testing.cpu_loops import forced_jit  # noqa: E402
from dgl_accel.testing.marks import quick_first  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402
from tests.pyg.test_conv_inputs import SPARSE, pyg_stats  # noqa: E402
from tests.pyg.test_convs import EXAMPLES, HALF, JIT, build, check, features, graphs, swapped  # noqa: E402

pytestmark = pytest.mark.filterwarnings(  # PyG's and torch's notes on the sparse inputs PyG's own modules get
    "ignore:Converting sparse tensor to CSR:UserWarning", "ignore:Sparse CSR tensor support is in beta:UserWarning",
    "ignore:Sparse invariant checks are implicitly disabled:UserWarning")

EI = torch.tensor([[0, 1, 2, 3, 4, 4, 0, 2, 2], [1, 2, 0, 0, 1, 2, 2, 2, 4]])  # a self-loop, a multi-edge
N = 5


def weights_of(ei, seed, positive=True):
    """Edge weights: positive (``gcn_norm`` takes deg^-1/2 of their sums) or of either sign."""
    w = tst.randn((ei.shape[1],), torch.float32, seed)
    return w.abs() + 0.5 if positive else w


def symmetrised(ei):
    """Every edge both ways (each node as many out- as in-edges: the core's ``both`` norm stands
    for ``gcn_norm``'s weights there)."""
    return torch.cat([ei, ei.flip(0)], dim=1)


def core_ran() -> bool:
    return any(not op.startswith("pyg.") for op in dgl_accel.stats())


# ---------------------------------------------------------------------------------------------- vs PyG
@settings(max_examples=EXAMPLES)
@given(graphs(bipartite=False), st.booleans(), st.integers(0, 3), st.sampled_from([3, 6]), st.booleans(),
       st.booleans(), st.sampled_from(["add", "mean"]), st.booleans(), JIT)
def test_sg_conv(graph, symmetric, k, out_channels, loops, weighted, aggr, bias, jit):
    """Narrowing (the product first) and widening (the K sums first) layers."""
    ei, n, _, _, seed = graph
    ei = symmetrised(ei) if symmetric else ei
    theirs = build(pyg_nn.SGConv, 4, out_channels, K=k, add_self_loops=loops, aggr=aggr, bias=bias)
    ew = weights_of(ei, seed + 2) if weighted else None
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(f[0], ei, w), features(n, n, 4, False, seed), ew)


@settings(max_examples=EXAMPLES)
@given(graphs(bipartite=False), st.booleans(), st.integers(0, 3), st.sampled_from([0.1, 0.5, 1.0]),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from(["add", "mean"]), JIT)
def test_appnp(graph, symmetric, k, alpha, normalize, loops, weighted, aggr, jit):
    ei, n, _, _, seed = graph
    ei = symmetrised(ei) if symmetric else ei
    theirs = build(pyg_nn.APPNP, K=k, alpha=alpha, normalize=normalize, add_self_loops=loops, aggr=aggr)
    ew = weights_of(ei, seed + 2, positive=normalize) if weighted else None
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(f[0], ei, w), features(n, n, 4, False, seed), ew)


@settings(max_examples=EXAMPLES)
@given(graphs(bipartite=False), st.booleans(), st.booleans(), st.booleans(), st.sampled_from(["add", "mean"]), JIT)
def test_lg_conv(graph, symmetric, normalize, weighted, aggr, jit):
    ei, n, _, _, seed = graph
    ei = symmetrised(ei) if symmetric else ei
    theirs = build(pyg_nn.LGConv, normalize=normalize, aggr=aggr)
    ew = weights_of(ei, seed + 2, positive=normalize) if weighted else None
    with forced_jit(jit):
        check(theirs, lambda m, f, w: m(f[0], ei, w), features(n, n, 4, False, seed), ew)


LAYERS = {  # name -> the layer for features of `c` channels
    "sg_narrow": lambda c=8: build(pyg_nn.SGConv, c, 4, K=2),
    "sg_wide": lambda c=8: build(pyg_nn.SGConv, c, c + 4, K=3),
    "sg_cached": lambda c=8: build(pyg_nn.SGConv, c, 4, K=2, cached=True),
    "appnp": lambda c=8: build(pyg_nn.APPNP, K=3, alpha=0.2),
    "appnp_plain": lambda c=8: build(pyg_nn.APPNP, K=2, alpha=0.2, normalize=False),
    "lg": lambda c=8: build(pyg_nn.LGConv),
    "lg_plain": lambda c=8: build(pyg_nn.LGConv, normalize=False),
}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_half_precision(layer, dtype):
    """fp16/bf16 modules and inputs: as close to PyG in fp64 as PyG itself in that dtype."""
    check(LAYERS[layer](), lambda m, f, w: m(f[0], EI, w), [tst.randn((N, 8), torch.float32, 5)],
          weights_of(EI, 1), dtype=dtype)


@pytest.mark.parametrize("jit", [False] + ([True] if runtime.enabled() else []))
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_under_autocast(layer, jit):
    """CPU bf16 autocast (first call, and after an fp32 step): ``dgl_accel.testing.autocast``'s rule."""
    theirs = LAYERS[layer](24)
    gen = torch.Generator().manual_seed(1)
    edge_index, x = torch.randint(0, 60, (2, 400), generator=gen), torch.randn(60, 24, generator=gen)
    x.requires_grad_()  # the warm-up step's backward needs a leaf: APPNP and LGConv have no parameters
    ours = swapped(theirs)
    for warm in (False,) if getattr(theirs, "cached", False) else (False, True):  # PyG's _cached_x (no leaf) defeats deepcopy
        with forced_jit(jit):
            dgl_accel.reset_stats()
            assert_autocast_matches(copy.deepcopy(theirs), copy.deepcopy(ours), lambda m, h: m(h, edge_index), x,
                                    warm, where=f"{layer}, warm={warm}")
        assert core_ran() and not pyg_stats(), dgl_accel.stats()


# ---------------------------------------------------------------------------------------------- cached
def test_sg_conv_cached_keeps_pygs_propagated_features():
    theirs = build(pyg_nn.SGConv, 5, 3, K=2, cached=True)
    ours = swapped(theirs)
    x = tst.randn((4, 5), torch.float32, 1)
    ei, other = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), torch.tensor([[0, 0], [1, 2]])
    for graph in (ei, other):  # the second graph is ignored by both: cached=True
        assert_close(ours(x, graph), theirs(x, graph))
    assert_close(ours._cached_x, theirs._cached_x)
    leaf = x.clone().requires_grad_()
    ours(leaf, ei).sum().backward()  # the cache is read detached: no gradient reaches x
    assert leaf.grad is None and ours.lin.weight.grad is not None
    ours.reset_parameters()  # PyG's reset clears the cache
    assert ours._cached_x is None


def test_appnp_cached_keeps_pygs_first_normalisation():
    theirs = build(pyg_nn.APPNP, K=2, alpha=0.1, cached=True)
    ours = swapped(theirs)
    x = tst.randn((N, 4), torch.float32, 1)
    for graph in (EI, torch.tensor([[0, 0], [1, 2]]), SPARSE["csr"](EI, None)):  # the later graphs: ignored
        assert_close(ours(x, graph), theirs(x, graph))
    assert [t.shape for t in ours._cached_edge_index] == [t.shape for t in theirs._cached_edge_index]
    ours.reset_parameters()
    assert ours._cached_edge_index is None


@pytest.mark.parametrize("layer", ["sg_narrow", "appnp", "lg"])
def test_a_symmetric_graph_sums_with_the_cores_degree_norm(layer):
    """Each node as many out- as in-edges: the core's ``both`` norm in place of per-edge weights
    (an unweighted sum), PyG's numbers; with ``edge_weight``, the weighted sum."""
    ei = symmetrised(EI)
    check(LAYERS[layer](), lambda m, f, w: m(f[0], ei, w), [tst.randn((N, 8), torch.float32, 5)])
    assert set(dgl_accel.stats()) == {"copy_u_sum", "copy_u_sum_backward"}, dgl_accel.stats()
    dgl_accel.reset_stats()
    check(LAYERS[layer](), lambda m, f, w: m(f[0], ei, w), [tst.randn((N, 8), torch.float32, 5)], weights_of(ei, 1))
    assert set(dgl_accel.stats()) == {"u_mul_e_sum", "u_mul_e_sum_backward"}, dgl_accel.stats()


def test_the_normalised_graph_is_built_once_per_graph():
    """Every layer and call on one graph reuses the normalised graph kept with it (and its views)."""
    ei = EI.clone()
    sg, appnp = swapped(build(pyg_nn.SGConv, 4, 3, K=3)), swapped(build(pyg_nn.APPNP, K=3, alpha=0.1))
    x = tst.randn((N, 4), torch.float32, 2)
    builds = dgl_accel.pyg.graph.CACHE.builds
    for _ in range(3):
        sg(x, ei), appnp(x, ei)
    assert dgl_accel.pyg.graph.CACHE.builds - builds == 2  # the graph and its normalised graph
    assert [key[0] for key in edges_of(ei)._derived] == ["gcn_norm"]
    assert dgl_accel.stats()["u_mul_e_sum"] == {"native-cpu": 18}


# ---------------------------------------------------------------------------------------------- sparse
@pytest.mark.parametrize("layout", sorted(SPARSE))
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_sparse_adjacency_with_values(layer, layout):
    """adj_t (rows = targets) with non-unit values, normalised and summed as PyG's spmm does."""
    adj_t = SPARSE[layout](EI, weights_of(EI, 3))
    theirs = LAYERS[layer]()
    ours = swapped(theirs)
    x0, x1 = tst.randn((N, 8), torch.float32, 0).requires_grad_(), tst.randn((N, 8), torch.float32, 0).requires_grad_()
    want, got = theirs(x0, adj_t), ours(x1, adj_t)
    assert_close(got, want)
    cot = tst.randn(tuple(want.shape), torch.float32, 1)
    assert_close(torch.autograd.grad((got * cot).sum(), x1)[0], torch.autograd.grad((want * cot).sum(), x0)[0])
    assert not pyg_stats() and core_ran()


# ---------------------------------------------------------------------------------------------- dropout
@pytest.mark.parametrize("case", ["normalized", "weighted", "plain_weighted", "csr", "plain_coo"])
def test_appnp_edge_dropout_draws_pygs_masks(case):
    """Training with edge dropout: from one torch.manual_seed, PyG's output and gradients."""
    theirs = build(pyg_nn.APPNP, K=3, alpha=0.1, dropout=0.4, normalize=not case.startswith("plain")).train()
    ours = swapped(theirs).train()
    graph, ew = EI, (weights_of(EI, 4) if "weighted" in case else None)
    if case.endswith(("csr", "coo")):
        graph = SPARSE[case[-3:]](EI, weights_of(EI, 4))
    results = []
    for m in (theirs, ours):
        x = tst.randn((N, 4), torch.float32, 3).requires_grad_()
        w = None if ew is None else ew.clone().requires_grad_()
        torch.manual_seed(7)
        out = m(x, graph, w)
        grads = torch.autograd.grad((out * tst.randn(tuple(out.shape), torch.float32, 1)).sum(),
                                    [x] + ([w] if w is not None else []))
        results.append((out, *grads))
    for k, (got, want) in enumerate(zip(results[1], results[0], strict=True)):
        assert_close(got, want, msg=f"result {k}")
    assert not pyg_stats() and core_ran()


# ---------------------------------------------------------------------------------------------- fallbacks, errors
def _hooked():
    theirs = build(pyg_nn.LGConv)
    ours = swapped(theirs)
    for m in (theirs, ours):
        m.register_propagate_forward_hook(lambda module, inputs, out: out * 2)
    return theirs, ours, (X, EI)


X = tst.randn((N, 4), torch.float32, 0)
FALLBACKS = {  # name -> (make: (theirs, ours or None, args), layer, reason); each call works in PyG
    "sg_max": (lambda: (build(pyg_nn.SGConv, 4, 3, aggr="max"), None, (X, EI)), "SGConv", "aggr 'max'"),
    "sg_weight_2d": (lambda: (build(pyg_nn.SGConv, 4, 3), None, (X, EI, weights_of(EI, 1).view(-1, 1))), "SGConv",
                     "edge_weight of shape [9, 1]"),
    "appnp_weight_dtype": (lambda: (build(pyg_nn.APPNP, K=2, alpha=0.1, normalize=False), None,
                                    (X, EI, torch.rand(9, dtype=torch.float64))),
                           "APPNP", "edge_weight of another dtype than the features"),
    "appnp_sparse_weight": (lambda: (build(pyg_nn.APPNP, K=2, alpha=0.1), None,
                                     (X, SPARSE["csr"](EI, None), torch.rand(9))),
                            "APPNP", "edge_weight with a sparse adjacency"),
    "appnp_edge_index_type": (lambda: (build(pyg_nn.APPNP, K=2, alpha=0.1), None,
                                       (X, torch_geometric.EdgeIndex(EI, sparse_size=(N, N)))),
                              "APPNP", "EdgeIndex input"),
    "appnp_flow": (lambda: (build(pyg_nn.APPNP, K=2, alpha=0.1, flow="target_to_source"), None, (X, EI)), "APPNP",
                   "flow 'target_to_source'"),
    "lg_hook": (_hooked, "LGConv", "message passing hooks"),
    "lg_static": (lambda: (build(pyg_nn.LGConv), None, (tst.randn((2, N, 4), torch.float32, 0), EI)), "LGConv",
                  "features of shape [2, 5, 4] (not [num_nodes, channels])"),
    "lg_sparse_values_grad": (lambda: (build(pyg_nn.LGConv), None,
                                       (X, SPARSE["csr"](EI, torch.rand(9, requires_grad=True)))),
                              "LGConv", "sparse values that need a gradient"),
}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_what_goes_to_pyg_is_counted_and_gives_pygs_numbers(case):
    make, layer, reason = FALLBACKS[case]
    theirs, ours, args = make()
    ours = swapped(theirs) if ours is None else ours
    want = theirs(*args)
    dgl_accel.reset_stats()
    assert_close(ours(*args), want)
    assert pyg_stats() == {f"pyg.{layer}": {f"fallthrough: {reason}": 1}}
    assert not core_ran()


BAD = {  # name -> (layer, args, PyG's exception type or None where PyG fails otherwise, words of our message)
    "sg: edge_index [E, 2]": ("sg", (X, EI.t().contiguous()), None, ValueError, ["[2, num_edges]", "Fix"]),
    "sg: negative id": ("sg", (X, EI - 1), None, IndexError, ["negative", "Fix"]),
    "appnp: id too large": ("appnp", (X[:4], EI), None, IndexError, ["larger than 3", "Fix"]),
    "appnp: edge_weight length": ("appnp", (X, EI, torch.ones(3)), None, ValueError, ["[9]", "Fix"]),
    "appnp: dropout without weights": ("appnp_drop", (X, EI), AssertionError, AssertionError,
                                       ["edge_weight=torch.ones", "Fix"]),
    "lg: edge_weight integer": ("lg", (X, EI, torch.ones(9, dtype=torch.int64)), None, ValueError, ["float", "Fix"]),
    "lg: float edge_index": ("lg", (X, EI.float()), None, ValueError, ["integer type", "edge_index.long()"]),
}
BAD_LAYERS = {"sg": lambda: build(pyg_nn.SGConv, 4, 3), "appnp": lambda: build(pyg_nn.APPNP, K=2, alpha=0.1),
              "appnp_drop": lambda: build(pyg_nn.APPNP, K=2, alpha=0.1, dropout=0.5, normalize=False).train(),
              "lg": lambda: build(pyg_nn.LGConv)}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_gets_pygs_exception_type_and_a_fix(case):
    layer, args, pygs, error, words = BAD[case]
    theirs = BAD_LAYERS[layer]()
    ours = swapped(theirs).train(theirs.training)
    if pygs is not None:  # gcn_norm's indexing raises RuntimeErrors for the others
        with pytest.raises(pygs):
            theirs(*args)
    with pytest.raises(error) as info:
        ours(*args)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert not core_ran()


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_graph_without_nodes(layer):
    """0 nodes, 0 edges: PyG's empty outputs and gradients."""
    check(LAYERS[layer](), lambda m, f, w: m(f[0], torch.zeros((2, 0), dtype=torch.int64), w),
          [torch.zeros((0, 8))], torch.zeros(0))


@pytest.mark.interpreter
@pytest.mark.parametrize("layer", ["sg_narrow", "appnp", "lg"])
def test_on_both_paths(layer, path):
    check(LAYERS[layer](), lambda m, f, w: m(f[0], EI, w), [tst.randn((N, 8), torch.float32, 11)], weights_of(EI, 2))
    label = {"native": "native-cpu", "triton": "triton-interpreter"}[path]
    assert all(label in paths for op, paths in dgl_accel.stats().items() if op.startswith("u_mul_e"))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("layer", quick_first(["appnp", "sg_narrow", "lg"]))
def test_torch_jit_script_runs_pygs_forward_on_the_same_module(layer):
    theirs = LAYERS[layer](4)
    scripted = torch.jit.script(swapped(theirs))
    assert_close(scripted(X, EI), theirs(X, EI))


# ---------------------------------------------------------------------------------------------- torch.compile
COMPILED = {"SGConv": lambda: pyg_nn.SGConv(16, 12, K=2), "APPNP": lambda: pyg_nn.APPNP(K=3, alpha=0.1),
            "LGConv": lambda: pyg_nn.LGConv(),
            "APPNP-cached": lambda: pyg_nn.APPNP(K=3, alpha=0.1, cached=True)}  # behind the compile boundary


class Net(torch.nn.Module):
    def __init__(self, conv):
        super().__init__()
        width = 12 if isinstance(conv, pyg_nn.SGConv) else 16
        self.pre, self.conv, self.post = torch.nn.Linear(8, 16), conv, torch.nn.Linear(width, 3)

    def forward(self, x, edge_index):
        return self.post(self.conv(self.pre(x).relu(), edge_index).relu())


@pytest.mark.parametrize(("name", "backend"),
                         quick_first([(name, backend) for backend in ("aot_eager", "inductor") for name in COMPILED]))
def test_compiled_model_with_swapped_layer_equals_eager(name, backend):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x, edge_index = torch.randn(200, 8, generator=gen), torch.randint(0, 200, (2, 2500), generator=gen)
    eager = Net(COMPILED[name]())
    assert dgl_accel.pyg.swap(eager).swapped
    compiled_model = copy.deepcopy(eager)
    torch._dynamo.reset()
    traced = TRACEABLE and not name.endswith("cached")  # traced whole (fullgraph) where it can be
    compiled = torch.compile(compiled_model, backend=backend, fullgraph=traced)
    runs = []
    for model in (eager, compiled):
        out = model(x, edge_index)
        out.square().sum().backward()
        runs.append([out.detach()] + [p.grad.clone() for p in model.parameters()])
    for got, want in zip(runs[1], runs[0], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert core_ran() and not pyg_stats()
