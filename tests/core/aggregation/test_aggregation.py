"""The aggregation op core (``dgl_accel.core.aggregation``) on plain tensors, without DGL:
:func:`aggregate` over :class:`TensorGraph` against the pure-torch reference, forward and backward,
on the native CPU path and on the grouped kernels (``kernels/gspmm_grouped.py``) under the Triton
interpreter; fp32/fp64/fp16/bf16, copy_u and u_mul_e, sum and mean, every GCN norm, atomic and
deterministic combine, hubs above 1024 neighbours.  (tests/functional/test_gspmm.py runs the DGL entry.)"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.reference import ref_gspmm
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference, tolerance

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
NORMS = ("none", "both", "left", "right")
PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}


def reference(e: tst.EdgeList, op, reduce, norm, x, w=None):
    """Scale sources by out-degree, aggregate with ref_gspmm, scale destinations by in-degree
    (degrees clamped to >= 1, as dgl.nn.GraphConv does)."""
    src, dst = e.src.long(), e.dst.long()

    def factor(deg):
        deg = deg.to(x.dtype).clamp(min=1)
        return deg.pow(-0.5) if norm == "both" else 1.0 / deg

    if norm in ("left", "both"):
        x = x * factor(torch.bincount(src, minlength=e.num_src)).reshape(-1, 1)
    out = ref_gspmm((src, dst, e.num_dst), op, reduce, x, w)
    if norm in ("right", "both"):
        out = out * factor(torch.bincount(dst, minlength=e.num_dst)).reshape(-1, 1)
    return out


@st.composite
def cases(draw, edges=None, dim=st.integers(1, 24), dtypes=DTYPES):
    e = draw(edges if edges is not None else st.one_of(tst.edge_lists(), tst.block_edge_lists()))
    x = draw(tst.features(e.num_src, dim=dim, dtypes=dtypes))
    op = draw(st.sampled_from(["copy_u", "u_mul_e"]))
    w = None if op == "copy_u" else draw(tst.edge_weights(e.src.numel(), per_feature_dim=x.shape[1],
                                                          dtypes=(x.dtype,)))
    return e, x, op, w, draw(st.sampled_from(["sum", "mean"])), draw(st.sampled_from(NORMS))


@pytest.mark.interpreter
@given(case=cases(), deterministic=st.booleans(), gs=st.one_of(st.none(), st.integers(1, 9)))
def test_forward_matches_reference(case, deterministic, gs):
    e, x, op, w, reduce, norm = case
    g = tst.tensor_graph(e)
    for name in ("native", "triton"):
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            out = aggregate(g, op, reduce, x, w, norm=norm, deterministic=deterministic, group_size=gs)
        assert dgl_accel.stats()[f"{op}_{reduce}"] == {PATH_LABEL[name]: 1}  # the path really ran
        assert out.shape == (e.num_dst, x.shape[1]) and out.dtype == x.dtype
        assert_matches_reference(out, lambda x_, w_: reference(e, op, reduce, norm, x_, w_), x, w,
                                 msg=f"{name} {op} {reduce} {norm} {x.dtype}")


@given(case=cases(edges=st.one_of(tst.edge_lists(max_nodes=30, max_edges=90),
                                  tst.block_edge_lists(max_dst=12, max_edges=90)),
                  dim=st.integers(1, 6), dtypes=(torch.float32, torch.float64)),
       deterministic=st.booleans())
@pytest.mark.interpreter
def test_backward_matches_reference_autograd(case, deterministic):
    e, x, op, w, reduce, norm = case
    g = tst.tensor_graph(e)
    grad_out = torch.randn(e.num_dst, x.shape[1], dtype=x.dtype)
    leaves_ref = [x.clone().requires_grad_()] + ([w.clone().requires_grad_()] if w is not None else [])
    expected = torch.autograd.grad(reference(e, op, reduce, norm, *leaves_ref), leaves_ref, grad_out)
    for name in ("native", "triton"):
        leaves = [x.clone().requires_grad_()] + ([w.clone().requires_grad_()] if w is not None else [])
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            out = aggregate(g, op, reduce, leaves[0], leaves[1] if w is not None else None, norm=norm,
                            deterministic=deterministic)
            got = torch.autograd.grad(out, leaves, grad_out)
        assert dgl_accel.stats()[f"{op}_{reduce}_backward"] == {PATH_LABEL[name]: 1}
        for k, (a, b) in enumerate(zip(got, expected)):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert_close(a, b, msg=f"{name} grad[{k}] {op} {reduce} {norm} {x.dtype}")


# The property needs rows longer than any Triton block: hubs of more than 1,024 in- and out-edges on ~2k
# rows, over 2 s on 2 cores under the interpreter (the slow case).  The quick case runs the same code on
# hubs of 41 to 60 edges over 40 to 60 nodes.
HUB_GRAPHS = quick_first([(40, dict(min_nodes=40, max_nodes=60, max_background_edges=60, hub_degree=(41, 60))),
                          (1024, {})])


@pytest.mark.interpreter
@pytest.mark.parametrize("hub, graph", HUB_GRAPHS, ids=["small-hubs", "hubs-above-1024"])
@settings(max_examples=3)  # ~2k rows with >1024-neighbour hubs: slow under the interpreter
@given(dim=st.integers(1, 8), deterministic=st.booleans(), norm=st.sampled_from(NORMS), data=st.data())
def test_hubs_above_1024(hub, graph, dim, deterministic, norm, data):
    e = data.draw(tst.power_law_edge_lists(**graph), label="e")
    g = tst.tensor_graph(e)
    assert int(g.in_degrees().max()) > hub and int(g.out_degrees().max()) > hub
    x = tst.randn((e.num_src, dim), torch.float32, 5)

    def reference_grad(x_):
        xr = x_.clone().requires_grad_()
        return torch.autograd.grad(reference(e, "copy_u", "sum", norm, xr).sum(), xr)[0]

    for name in ("native", "triton"):
        xx = x.clone().requires_grad_()
        with dgl_accel.use_backend(name):
            out = aggregate(g, "copy_u", "sum", xx, norm=norm, deterministic=deterministic)
            (grad,) = torch.autograd.grad(out.sum(), xx)
        assert_matches_reference(out.detach(), lambda x_: reference(e, "copy_u", "sum", norm, x_), x, msg=name)
        # a hub's gradient sums ~1100 scaled terms: an fp32 reference is itself ~1e-5 off (measured
        # 4.4e-4 at magnitude 32), so the rule is the flash-attention one against fp64, as for out
        assert_matches_reference(grad, reference_grad, x, msg=f"{name} grad")


@pytest.mark.parametrize("op, wshape", [("copy_u", None), ("u_mul_e", (9,)), ("u_mul_e", (9, 3))])
@pytest.mark.parametrize("norm, reduce", [("none", "sum"), ("both", "sum"), ("left", "mean"), ("right", "mean")])
def test_gradcheck_fp64_on_directed_graph(path, op, wshape, norm, reduce):
    # Not symmetric, with a self loop, a multi-edge and an isolated node.
    g = TensorGraph(torch.tensor([0, 0, 1, 2, 3, 3, 4, 4, 1]), torch.tensor([1, 2, 2, 0, 0, 3, 2, 2, 3]), num_nodes=6)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    inputs = (x,) if wshape is None else (x, torch.rand(wshape, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(lambda *t: aggregate(g, op, reduce, *t, norm=norm, group_size=2), inputs)
    assert dgl_accel.stats()[f"{op}_{reduce}"].get(PATH_LABEL[path], 0) > 0


@pytest.mark.interpreter
# 300 sources, 4,000 edges: over 2 s on 2 cores under the interpreter (the slow case); 60 sources and
# 400 edges (still ten per destination) run the same code quickly
@pytest.mark.parametrize("n, m", quick_first([(60, 400), (300, 4000)]))
def test_deterministic_combine_is_bit_identical_and_matches_atomics(n, m):
    gen = torch.Generator().manual_seed(3)
    g = TensorGraph(torch.randint(0, n, (m,), generator=gen), torch.randint(0, 40, (m,), generator=gen),
                    num_nodes=n)
    x = torch.randn(n, 17, generator=gen)
    with dgl_accel.use_backend("triton"):
        runs = [aggregate(g, "copy_u", "sum", x, deterministic=True, group_size=3) for _ in range(2)]
        atomic = aggregate(g, "copy_u", "sum", x, deterministic=False, group_size=3)
    assert torch.equal(runs[0], runs[1])
    assert_close(atomic, runs[0])


def test_tensor_graph_bipartite_sizes_and_bad_edges():
    g = TensorGraph(torch.tensor([0, 4]), torch.tensor([1, 0]), num_src=5, num_dst=2)
    assert (g.num_src, g.num_dst, g.bipartite) == (5, 2, True)
    out = aggregate(g, "copy_u", "sum", torch.arange(5.0).reshape(5, 1))
    assert out.flatten().tolist() == [4.0, 0.0]
    with pytest.raises(ValueError, match="expected source ids in"):
        TensorGraph(torch.tensor([0, 7]), torch.tensor([1, 0]), num_nodes=3)
    with pytest.raises(ValueError, match="1-D int32/int64"):
        TensorGraph(torch.tensor([0.0]), torch.tensor([1]))
    with pytest.raises(ValueError, match="expected ufeat with 5 rows"):
        aggregate(g, "copy_u", "sum", torch.ones(3, 2))
    with pytest.raises(ValueError, match="reduce 'sum' or 'mean' in the core"):
        aggregate(g, "copy_u", "max", torch.ones(5, 2))


def test_a_graph_is_timed_from_its_third_aggregation_at_a_width(monkeypatch):
    """A training step aggregates twice on its graph (forward, backward): a minibatch's sampled graph,
    used for one step, keeps the cost model (timing it would cost more than it saves), and a graph
    trained on for epochs is handed to the autotuner from its second step on."""
    from dgl_accel.core.aggregation import views as views_mod

    asked = []
    real = views_mod.choose_group_size
    monkeypatch.setattr(views_mod, "choose_group_size",
                        lambda v, f, d, policy: asked.append((id(v), f, policy)) or real(v, f, d, policy=policy))
    gen = torch.Generator().manual_seed(3)
    full = TensorGraph(torch.randint(0, 50, (400,), generator=gen), torch.randint(0, 50, (400,), generator=gen),
                       num_nodes=50)
    for _ in range(3):  # three steps: forward and backward each
        full.group_size(32, torch.float32)
        full.group_size(32, torch.float32)
    assert [p for _, _, p in asked] == ["cost", "cost", "auto", "auto", "auto", "auto"]
    asked.clear()
    full.group_size(64, torch.float32)  # a new width counts afresh
    full.group_size(32, torch.bfloat16)  # so does a new dtype
    assert [p for _, _, p in asked] == ["cost", "cost"]
    asked.clear()
    for _ in range(5):  # five minibatches, one step each
        batch = TensorGraph(torch.randint(0, 30, (90,), generator=gen), torch.randint(0, 30, (90,), generator=gen),
                            num_nodes=30)
        batch.group_size(32, torch.float32)
        batch.group_size(32, torch.float32)
    assert {p for _, _, p in asked} == {"cost"} and len({i for i, _, _ in asked}) >= 2


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 1500), min_size=1, max_size=300))
def test_degree_statistics_on_the_device_equal_numpys_with_one_host_read(degrees):
    """A GPU graph's statistics are computed where it lives and read back once (a minibatch's
    sampled graph computes them per batch); they equal numpy's, hubs, empty rows and percentiles."""
    from dgl_accel.core.csr import Structure
    from dgl_accel.core.grouping.degree_stats import degree_stats_of
    from dgl_accel.testing.host_reads import HostReads

    indptr = torch.zeros(len(degrees) + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor(degrees), 0, out=indptr[1:])
    e = int(indptr[-1])
    s = Structure(indptr=indptr, indices=torch.zeros(e, dtype=torch.int64), eids=torch.arange(e), num_rows=len(degrees),
                  num_cols=7, device=torch.device("cpu"))
    host = degree_stats_of(s, on_device=False)
    with HostReads() as reads:
        device = degree_stats_of(s, on_device=True)
    assert len(reads.events) == 1, reads.events
    for field, want in vars(host).items():
        got = getattr(device, field)
        assert type(got) is type(want) and got == pytest.approx(want, rel=1e-12, abs=1e-12), (field, got, want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
# the interpreter takes 20-30 s a case: the Triton path on the positive inputs only (where the
# storage-dtype sum is shown to fail), both signs on the native path
@pytest.mark.parametrize("path,sign", [("native", "positive"), ("native", "mixed"),
                                       pytest.param("triton", "positive", marks=pytest.mark.slow)])
def test_low_precision_sums_of_a_hub_with_over_100000_in_edges_stay_accurate(path, dtype, sign):
    """bf16 / fp16 sums over a hub of 120,000 in-edges stay within the dtype's tolerance of the exact
    sum of the same rounded inputs (float64), on both paths: the accumulation is fp32 whatever the
    storage dtype.  A sum accumulated in the storage dtype (each fp16 addition rounded, as a
    low-precision sparse product does) misses the bar by far on the positive inputs: the bar is
    not loose."""
    hub_in = 120_000
    n = hub_in + 3
    src = torch.cat([torch.arange(1, hub_in + 1), torch.tensor([0, 2])])
    dst = torch.cat([torch.zeros(hub_in, dtype=torch.int64), torch.tensor([n - 1, n - 2])])
    g = TensorGraph(src, dst, num_nodes=n)
    gen = torch.Generator().manual_seed(7)
    x = torch.rand((n, 4), generator=gen)
    x = (x if sign == "positive" else x - 0.5).to(dtype)
    exact = torch.zeros((n, 4), dtype=torch.float64).index_add_(0, dst, x.double()[src])
    dgl_accel.reset_stats()
    with dgl_accel.use_backend(path):
        out = aggregate(g, "copy_u", "sum", x)
    assert out.dtype == dtype and dgl_accel.stats()["copy_u_sum"] == {PATH_LABEL[path]: 1}
    assert_close(out, exact.to(dtype), msg=f"{path} {dtype} hub sum")
    if sign == "positive" and dtype == torch.float16:  # numpy rounds each fp16 addition: the storage-dtype sum
        naive = torch.from_numpy(np.add.accumulate(x[1:hub_in + 1].numpy(), axis=0)[-1]).double()
        rtol, atol = tolerance(dtype)
        assert ((naive - exact[0]).abs() > atol + rtol * exact[0].abs()).all(), naive


@pytest.mark.parametrize("op", ["copy_u", "u_mul_e"])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("jit", [True, False])
def test_keep_acc_returns_the_fp32_sums_of_bf16_rows_and_their_gradients(op, reduce, jit):
    """``keep_acc``: bf16 rows come back as their fp32 sums (what the default rounds to bf16: the
    same values to bf16's resolution, the fp32 reference's to fp32's), and the gradients arrive in
    the inputs' dtypes, equal to the default's within bf16's tolerance."""
    g = TensorGraph(torch.tensor([0, 1, 2, 3, 3, 4, 0, 2]), torch.tensor([1, 2, 1, 0, 2, 2, 4, 4]), num_nodes=5)
    x = tst.randn((5, 6), torch.float32, 1).bfloat16().requires_grad_()
    w = tst.randn((8, 1), torch.float32, 2).requires_grad_() if op == "u_mul_e" else None
    with forced_jit(jit):
        kept = aggregate(g, op, reduce, x, w, keep_acc=True)
        rounded = aggregate(g, op, reduce, x, w)
        exact = aggregate(g, op, reduce, x.detach().float(), None if w is None else w.detach())
        assert kept.dtype == torch.float32 and rounded.dtype == torch.bfloat16
        assert_close(kept, exact, msg="fp32 sums")  # the fp32 tolerance: nothing was rounded to bf16
        assert torch.equal(kept.bfloat16(), rounded)
        cot = tst.randn(tuple(kept.shape), torch.float32, 3)
        wrt = [x] + ([w] if w is not None else [])
        got = torch.autograd.grad((kept * cot).sum(), wrt)
        want = torch.autograd.grad((rounded.float() * cot).sum(), wrt)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        assert_close(a.float(), b.float(), dtype=torch.bfloat16)
