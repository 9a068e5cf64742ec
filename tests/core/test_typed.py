"""The relational aggregation (:mod:`dgl_accel.core.typed`) against its torch references: per-relation
sum / mean / max / min into [D, R, F] and the relation-selected spread of projected rows, outputs and
gradients, on hypothesis graphs with random relations; the relation id check; the custom op's
``opcheck`` and gradients where torch has custom ops."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core import library
from dgl_accel.core.typed import (
    RelationalGraph,
    TracedRelationalGraph,
    register_relational_kind,
    relation_aggregate,
    relation_aggregate_reference,
    relation_spread,
    relation_spread_reference,
)
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.tolerances import assert_close


@st.composite
def relational(draw):
    e = draw(tst.block_edge_lists(max_dst=8, max_extra_src=6, max_edges=40, idtypes=(torch.int64,)))
    r = draw(st.integers(1, 4))
    seed = draw(tst.SEEDS)
    etype = torch.randint(0, r, (e.src.numel(),), generator=torch.Generator().manual_seed(seed))
    return e.src, e.dst, etype, e.num_src, e.num_dst, r, seed


def _grads(out, x, cot):
    return torch.autograd.grad((out * cot).sum(), x)[0]


@settings(max_examples=20)
@given(relational(), st.sampled_from(["sum", "mean", "max", "min"]))
def test_relation_aggregate(case, reduce):
    src, dst, etype, ns, nd, r, seed = case
    graph = RelationalGraph(src, dst, etype, ns, nd, r)
    x = tst.randn((ns, 3), torch.float64, seed).requires_grad_()
    got = relation_aggregate(graph, reduce, x)
    want = relation_aggregate_reference(src, dst, etype, x, nd, r, reduce)
    assert got.shape == (nd, r, 3)
    assert_close(got, want)
    cot = tst.randn(tuple(got.shape), torch.float64, seed + 1)
    assert_close(_grads(got, x, cot), _grads(want, x, cot))


@settings(max_examples=20)
@given(relational(), st.sampled_from(["sum", "mean"]), st.sampled_from([torch.float32, torch.float64]))
def test_relation_spread(case, reduce, dtype):
    src, dst, etype, ns, nd, r, seed = case
    graph = RelationalGraph(src, dst, etype, ns, nd, r)
    y = tst.randn((ns, r, 3), dtype, seed).requires_grad_()
    got = relation_spread(graph, reduce, y)
    want = relation_spread_reference(src, dst, etype, y, nd, reduce)
    assert_close(got, want)
    cot = tst.randn(tuple(got.shape), dtype, seed + 1)
    assert_close(_grads(got, y, cot), _grads(want, y, cot))


def test_spread_of_bf16_rows_keeps_fp32_sums():
    src, dst, etype = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 0, 0, 1]), torch.tensor([0, 0, 1, 1])
    graph = RelationalGraph(src, dst, etype, 3, 2, 2)
    y = tst.randn((3, 2, 4), torch.float32, 0)
    got = relation_spread(graph, "mean", y.bfloat16(), keep_acc=True)
    assert got.dtype == torch.float32
    assert_close(got, relation_spread_reference(src, dst, etype, y.bfloat16().float(), 2, "mean"))


def test_relation_ids_are_checked():
    graph = RelationalGraph(torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([0, 2]), 2, 2, 2)
    assert graph.type_range == (0, 2)
    with pytest.raises(ValueError, match=r"relation ids in \[0, 2\)"):
        graph.check_types()
    with pytest.raises(ValueError, match="one integer relation id per edge"):
        RelationalGraph(torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([0.0, 1.0]), 2, 2, 2)


def _plain_kind(edge_index, edge_type, num_src, num_dst, num_relations):
    return RelationalGraph(edge_index[0], edge_index[1], edge_type, num_src, num_dst, num_relations)


@pytest.mark.skipif(not library.AVAILABLE, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("layout,reduce", [("targets", "sum"), ("targets", "mean"), ("sources", "sum"),
                                           ("sources", "mean")])
def test_custom_op(layout, reduce):
    """opcheck, and the traced graph's results and gradients are the eager ones."""
    register_relational_kind("test-plain", _plain_kind)
    gen = torch.Generator().manual_seed(2)
    ns, nd, r, e = 9, 7, 3, 40
    edge_index = torch.stack([torch.randint(0, ns, (e,), generator=gen), torch.randint(0, nd, (e,), generator=gen)])
    etype = torch.randint(0, r, (e,), generator=gen)
    traced = TracedRelationalGraph(edge_index, etype, ns, nd, r, "test-plain")
    eager = _plain_kind(edge_index, etype, ns, nd, r)
    x = torch.randn((ns, 4) if layout == "targets" else (ns, r, 4), generator=gen, dtype=torch.float64)
    run = relation_aggregate if layout == "targets" else relation_spread
    xs = [x.clone().requires_grad_() for _ in range(2)]
    got, want = run(traced, reduce, xs[0]), run(eager, reduce, xs[1])
    assert_close(got, want)
    cot = torch.randn(got.shape, generator=gen, dtype=torch.float64)
    assert_close(_grads(got, xs[0], cot), _grads(want, xs[1], cot))
    rows = x if layout == "targets" else x.reshape(ns * r, 4)
    torch.library.opcheck(torch.ops.dgl_accel.relational_aggregate.default,
                          (edge_index, etype, ns, nd, r, "test-plain", layout, reduce, False, False,
                           rows.clone().requires_grad_()))
    bad = TracedRelationalGraph(edge_index, torch.full_like(etype, r), ns, nd, r, "test-plain")
    with pytest.raises(ValueError, match="relation ids"):
        run(bad, reduce, x)
