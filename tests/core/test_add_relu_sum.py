"""The core's rectified edge-sum, :func:`dgl_accel.core.add_relu_sum.add_relu_sum` (GINE's neighbour
sum), without PyG: the compiled loops (in edge order, per CSR row) and the projected pass against
the composed torch ops in fp64 (float32/64, bf16, mixed dtypes), gradients (also
:func:`~dgl_accel.core.add_relu_sum.add_relu_sum_grads`, the custom op's backward), ``create_graph``,
bad arguments.  The custom op itself: tests/core/library/test_edges.py."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.add_relu_sum import add_relu_sum, add_relu_sum_grads, add_relu_sum_reference
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.jit import runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit, loop_threads
from dgl_accel.testing.tolerances import assert_close

EXAMPLES = max(1, settings.default.max_examples // 2)
INT64 = (torch.int64,)


@st.composite
def graphs(draw):
    """(edge_index [2, E], num_src, num_dst, bipartite, seed): small homogeneous or bipartite graphs."""
    if draw(st.booleans()):
        e = draw(tst.block_edge_lists(max_dst=8, max_extra_src=7, max_edges=40, idtypes=INT64))
    else:
        e = draw(tst.edge_lists(max_nodes=14, max_edges=40, idtypes=INT64))
    return torch.stack([e.src, e.dst]), e.num_src, e.num_dst, e.num_src != e.num_dst, draw(tst.SEEDS)


@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from([(torch.float32,) * 2, (torch.float64,) * 2, (torch.bfloat16,) * 2,
                                  (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32)]),
       st.booleans(), st.integers(1, 9), st.booleans())
def test_add_relu_sum_loops_equal_composed_ops(graph, dtypes, need_w, width, edge_order):
    """The compiled loops (in edge order, one thread's; or per CSR row, several threads') against the
    composed ops in fp64, at the tolerance table's row of each result's dtype (fp32 sums in another
    order; bf16 results rounded once); gradients in their inputs' dtypes."""
    if not runtime.enabled():
        pytest.skip("numba absent: add_relu_sum runs the composed ops")
    ei, ns, nd, _, seed = graph
    g = TensorGraph(ei[0], ei[1], num_src=ns, num_dst=nd)
    x = tst.randn((ns, width), torch.float32, seed).to(dtypes[0]).requires_grad_()
    w = tst.randn((ei.shape[1], width), torch.float32, seed + 1).to(dtypes[1]).requires_grad_(need_w)
    with forced_jit(True), loop_threads(edge_order):
        out = add_relu_sum(g, x, w)
        assert out.dtype == torch.promote_types(*dtypes)
        cot = tst.randn(tuple(out.shape), torch.float32, seed + 2).to(out.dtype)
        wrt = [x, w] if need_w else [x]
        got = torch.autograd.grad((out * cot).sum(), wrt)
    ref = add_relu_sum_reference(g, x.double(), w.double())
    want = torch.autograd.grad((ref * cot.double()).sum(), wrt)
    assert_close(out, ref, msg="out")  # at the table's row for out's dtype: bf16 results rounded once
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == wrt[k].dtype
        assert_close(a, b, msg=f"grad {k}")


def test_add_relu_sum_backward_under_create_graph_is_recorded():
    g = TensorGraph(torch.tensor([0, 1, 2, 2]), torch.tensor([1, 1, 2, 0]), num_nodes=3)
    x = torch.tensor([[1.0, -2.0], [2.0, 0.5], [-1.0, 3.0]], requires_grad=True)
    w = torch.tensor([[1.0, 1.0], [-5.0, 0.0], [0.5, -4.0], [2.0, 2.0]], requires_grad=True)
    with forced_jit(True):
        out = add_relu_sum(g, x, w)
    cot = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    gx, = torch.autograd.grad((out * cot).sum(), x, create_graph=True)
    ref = add_relu_sum_reference(g, x, w)
    rx, = torch.autograd.grad((ref * cot).sum(), x, create_graph=True)
    assert torch.equal(gx, rx)
    assert torch.equal(torch.autograd.grad(gx.sum(), cot)[0], torch.autograd.grad(rx.sum(), cot)[0])


def test_add_relu_sum_rejects_bad_arguments():
    g = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 0]), num_nodes=2)
    with pytest.raises(ValueError, match=r"expected w with one row per edge \(2; got 3\)"):
        add_relu_sum(g, torch.zeros(2, 4), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="expected w with x's 4 features"):
        add_relu_sum(g, torch.zeros(2, 4), torch.zeros(2, 3))


@settings(max_examples=EXAMPLES)
@given(graphs(), st.sampled_from([torch.float32, torch.float64, torch.bfloat16]), st.booleans(), st.integers(1, 6))
def test_add_relu_sum_projected_pass_equals_composed_ops(graph, dtype, with_bias, depth):
    """Inference with a linear layer on the edge features: the per-edge product inside the pass against
    ``F.linear`` then the composed ops in fp64, at the table's row of the output's dtype."""
    if not runtime.enabled():
        pytest.skip("numba absent: add_relu_sum runs the composed ops")
    ei, ns, nd, _, seed = graph
    g = TensorGraph(ei[0], ei[1], num_src=ns, num_dst=nd)
    wide = torch.float64 if dtype == torch.float64 else torch.float32  # the layer's dtype (F.linear's rule)
    x = tst.randn((ns, 3), torch.float32, seed).to(dtype)
    a = tst.randn((ei.shape[1], depth), wide, seed + 1)
    weight = tst.randn((3, depth), wide, seed + 2)
    bias = tst.randn((3,), wide, seed + 3) if with_bias else None
    dgl_accel.reset_stats()
    with torch.no_grad(), forced_jit(True):
        out = add_relu_sum(g, x, a, weight, bias)
    assert dgl_accel.stats()["add_relu_sum_projected"]
    assert out.dtype == torch.promote_types(dtype, wide)
    ref = add_relu_sum_reference(g, x.double(), torch.nn.functional.linear(
        a.double(), weight.double(), None if bias is None else bias.double()))
    assert_close(out, ref)


@pytest.mark.parametrize("jit", [False] + ([True] if runtime.enabled() else []))
@pytest.mark.parametrize("need", [(True, True), (True, False), (False, True)])
def test_add_relu_sum_grads_are_autograds(jit, need):
    """The custom op's backward (loops where the forward runs them, else torch ops): the gradients
    autograd gives through :func:`add_relu_sum`, None where not asked for."""
    gen = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 30, (2, 150), generator=gen)
    g = TensorGraph(ei[0], ei[1], num_nodes=30)
    x, w = torch.randn(30, 5, generator=gen, requires_grad=True), torch.randn(150, 5, generator=gen, requires_grad=True)
    cot = torch.randn(30, 5, generator=gen)
    with forced_jit(jit):
        want = torch.autograd.grad((add_relu_sum(g, x, w) * cot).sum(), [x, w])
        with torch.no_grad():
            got = add_relu_sum_grads(g, x, w, cot, *need)
    for a, b, asked in zip(got, want, need, strict=True):
        assert (a is None) != asked
        if asked:
            torch.testing.assert_close(a, b)
