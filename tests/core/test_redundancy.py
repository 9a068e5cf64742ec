"""GraphACT on plain tensors (``dgl_accel.core.redundancy``, what the GPU report runs without DGL):
the plan of ``reduce_edges`` aggregates as the original graph does, forward and backward, for sum,
mean and every GCN norm, on the native path and the Triton kernels (interpreter); the inputs are
left as they were.  (tests/policies/test_redundancy.py covers the DGL entry, the matching and the hook.)"""
import pytest
import torch

import dgl_accel
from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.redundancy import reduce_edges
from dgl_accel.testing.marks import PATHS
from dgl_accel.testing.tolerances import assert_close


def shared_pairs_graph(seed: int = 0, n: int = 40, active: int = 10, m: int = 400):
    """Many targets drawing from few sources: many shared pairs (with multi-edges and self-loops)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, active, (m,), generator=gen), torch.randint(0, n, (m,), generator=gen), n


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("reduce,norm", [("sum", "none"), ("mean", "none"), ("sum", "both"), ("sum", "left"),
                                         ("sum", "right")])
def test_plan_aggregates_as_the_original_graph(path, reduce, norm):
    src, dst, n = shared_pairs_graph()
    before = (src.clone(), dst.clone())
    plan = reduce_edges(src, dst, n, n, theta=2, rounds=3)
    assert plan.num_pair_nodes > 0 and plan.gamma_read > 1.2  # the graph was built to have pairs to share
    assert torch.equal(src, before[0]) and torch.equal(dst, before[1])  # inputs untouched
    g = TensorGraph(src, dst, num_nodes=n)
    x = torch.randn(n, 5, dtype=torch.float64)
    gout = torch.randn(n, 5, dtype=torch.float64)
    with dgl_accel.use_backend(path):
        want_x = x.clone().requires_grad_()
        want = aggregate(g, "copy_u", reduce, want_x, norm=norm)
        want.backward(gout)
        got_x = x.clone().requires_grad_()
        got = plan.aggregate(got_x, reduce, norm)
        got.backward(gout)
    assert_close(got, want.detach(), msg=f"{path} {reduce} {norm} forward")
    assert_close(got_x.grad, want_x.grad, msg=f"{path} {reduce} {norm} backward")


def test_rewritten_graph_keeps_every_target_multiset_and_counts():
    src, dst, n = shared_pairs_graph(seed=1)
    plan = reduce_edges(src, dst, n, n)
    rs, rd = plan.rewritten.edges_by_id()
    assert plan.rewritten.num_src == n + plan.num_pair_nodes and plan.rewritten.num_dst == n
    assert plan.num_edges_rewritten == rs.numel() < src.numel()
    # expand each pair node back to its original sources: every target reads what it read before
    expand = [[i] for i in range(n)] + [None] * plan.num_pair_nodes
    for i, (a, b) in enumerate(zip(plan.pair_a.tolist(), plan.pair_b.tolist())):
        expand[n + i] = expand[a] + expand[b]
    for v in range(n):
        before = sorted(src[dst == v].tolist())
        after = sorted(u for s in rs[rd == v].tolist() for u in expand[s])
        assert before == after, v
    assert torch.equal(plan.in_degrees, torch.bincount(dst, minlength=n))


@pytest.mark.parametrize("bad", [dict(theta=1), dict(rounds=-1), dict(max_pair_nodes=-2), dict(theta=2.5)])
def test_bad_options_are_refused_with_a_fix_or_the_expected_range(bad):
    src, dst, n = shared_pairs_graph()
    with pytest.raises(ValueError, match="expected"):
        reduce_edges(src, dst, n, n, **bad)
