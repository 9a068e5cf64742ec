"""The locality split (``dgl_accel.core.aggregation.locality``): a view's entries shared out into a hot
part (the most-read columns, sized to the L2 budget) and a cold part, run as two launches of the
grouped kernels (under the Triton interpreter here) into one buffer or, deterministic, one partial
buffer combined by the two-part reduce.  Results in the user's order against the torch reference
for every dtype, message kind, normalisation, combine and a hub above 1,024 in-edges, forward,
backward and double backward; the plan built once per graph, with a bounded number of host reads and
none in the calls after it; the choice and its explanation."""
import sys

import pytest
import torch

import dgl_accel
from dgl_accel.core.aggregation import launchers, locality
from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.locality import choose_locality, locality_parts, split_structure, use_locality
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.csr import Structure
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.host_reads import HostReads
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_matches_reference

from .test_aggregation import reference

KINDS = {"sum": ("none", "sum"), "gcn": ("both", "sum"), "mean": ("none", "mean")}
WIDTH = 16
HOT_ROWS = 6  # the l2_bytes below hold this many 16-wide rows in half the cache, whatever the dtype's size


def l2_for(dtype: torch.dtype, rows: int = HOT_ROWS) -> int:
    return 2 * rows * WIDTH * torch.empty(0, dtype=dtype).element_size()


def skewed_graph(seed: int = 0, n: int = 120, e: int = 900, hub_in: int = 1100) -> tst.EdgeList:
    """Power-law sources (a few columns carry most entries), node 0 a hub of ``hub_in`` in-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = (torch.rand(e, generator=gen) ** 4 * n).long()
    dst = torch.randint(0, n, (e,), generator=gen)
    src = torch.cat([src, torch.randint(0, n, (hub_in,), generator=gen)])
    dst = torch.cat([dst, torch.zeros(hub_in, dtype=torch.int64)])
    return tst.EdgeList(src, dst, n, n)


def inputs(e: tst.EdgeList, dtype, mode: str, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(e.num_src, WIDTH, generator=gen).to(dtype)
    w = None
    if mode != "copy_u":
        w = torch.rand(e.src.numel(), 1 if mode == "u_mul_e scalar" else WIDTH, generator=gen).add_(0.5).to(dtype)
    return x, w, torch.randn(e.num_dst, WIDTH, generator=gen).to(dtype)


def launched_parts(monkeypatch) -> list[int]:
    """Records how many parts each grouped launch ran (1: plain, 2: split)."""
    seen, plan = [], sys.modules["dgl_accel.core.aggregation.plan"]  # where the op calls its launcher
    original = plan.gspmm_forward
    monkeypatch.setattr(plan, "gspmm_forward", lambda parts, *a: seen.append(len(parts)) or original(parts, *a))
    return seen


def run_case(e, dtype, mode, kind, det, monkeypatch):
    g = tst.tensor_graph(e)
    x, w, gout = inputs(e, dtype, mode)
    norm, reduce = KINDS[kind]
    op = "copy_u" if w is None else "u_mul_e"
    leaves = [x.clone().requires_grad_()] + ([w.clone().requires_grad_()] if w is not None else [])
    seen = launched_parts(monkeypatch)
    with dgl_accel.use_backend("triton"), use_locality("on", l2_bytes=l2_for(dtype)):
        out = aggregate(g, op, reduce, leaves[0], leaves[1] if w is not None else None, norm=norm, deterministic=det)
        grads = torch.autograd.grad(out, leaves, gout)
    assert seen == [2, 2], seen  # forward and backward both ran split
    label = f"{dtype} {mode} {kind} {'deterministic' if det else 'atomic'}"

    def ref(xs, ws, gs):
        leaves = [xs.requires_grad_()] + ([ws.requires_grad_()] if ws is not None else [])
        r = reference(e, op, reduce, norm, xs, ws)
        return (r, *torch.autograd.grad(r, leaves, gs))
    for k, actual in enumerate((out.detach(), *grads)):
        assert_matches_reference(actual, lambda *a, k=k: ref(*a)[k], x, w, gout, msg=f"{label} output {k}")


@pytest.mark.interpreter
@pytest.mark.parametrize("det", [False, True])
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("mode", quick_first(["copy_u", "u_mul_e scalar", "u_mul_e per-feature"]))
def test_split_matches_reference_fp32(mode, kind, det, monkeypatch):
    run_case(skewed_graph(), torch.float32, mode, kind, det, monkeypatch)


@pytest.mark.interpreter
@pytest.mark.parametrize("det", quick_first([False, True]))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_split_matches_reference_other_dtypes(dtype, det, monkeypatch):
    run_case(skewed_graph(seed=3), dtype, "copy_u", "gcn", det, monkeypatch)


@pytest.mark.interpreter
# the interpreter: about 2 minutes for the whole product, slow but for its first case (under 1 s)
@pytest.mark.parametrize("det", quick_first([False, True]))
@pytest.mark.parametrize("kind", quick_first(list(KINDS)))
@pytest.mark.parametrize("mode", quick_first(["copy_u", "u_mul_e scalar", "u_mul_e per-feature"]))
@pytest.mark.parametrize("dtype", quick_first([torch.float16, torch.bfloat16, torch.float64]))
def test_split_matches_reference_every_dtype(dtype, mode, kind, det, monkeypatch):
    run_case(skewed_graph(seed=5), dtype, mode, kind, det, monkeypatch)


def test_split_structure_keeps_every_entry_once_in_row_order():
    e = skewed_graph(seed=2)
    s = tst.tensor_graph(e).csr("in")
    hot_cols = torch.tensor([3, 0, 7])
    sp = split_structure(s, hot_cols)
    is_hot = torch.isin(s.indices.long(), hot_cols)
    assert sp.hot.num_edges + sp.cold.num_edges == s.num_edges and sp.num_hot_cols == 3
    for part, keep in ((sp.hot, is_hot), (sp.cold, ~is_hot)):
        assert part.indptr[-1] == part.num_edges and (part.indptr[1:] >= part.indptr[:-1]).all()
        assert torch.equal(part.eids, s.eids[keep]) and torch.equal(part.indices, s.indices[keep])
        rows = torch.repeat_interleave(torch.arange(s.num_rows), part.indptr[1:] - part.indptr[:-1])
        full_rows = torch.repeat_interleave(torch.arange(s.num_rows), s.indptr[1:] - s.indptr[:-1])
        assert torch.equal(rows, full_rows[keep])  # each entry stays in its row, in the row's order


@pytest.mark.interpreter
# every column of the Jacobians: 20 s on 2 cores under the interpreter (the slow case); the quick case checks
# one random direction (gradgradcheck's fast_mode), as the interpreted gradchecks elsewhere do
@pytest.mark.parametrize("fast", quick_first([True, False]), ids=["fast_mode", "full"])
def test_double_backward_through_the_split(fast):
    e = skewed_graph(seed=4, n=20, e=60, hub_in=30)
    g = tst.tensor_graph(e)
    x = torch.randn(e.num_src, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(e.src.numel(), 1, dtype=torch.float64).add_(0.5).requires_grad_()
    with dgl_accel.use_backend("triton"), use_locality("on", l2_bytes=2 * 4 * 3 * 8):
        assert choose_locality(g, "in", 3, torch.float64).split
        assert torch.autograd.gradgradcheck(lambda a, b: aggregate(g, "u_mul_e", "sum", a, b, norm="both"), (x, w),
                                            fast_mode=fast)


@pytest.mark.interpreter
def test_the_plan_is_built_once_per_graph_and_direction(monkeypatch):
    e = skewed_graph(seed=6)
    g = tst.tensor_graph(e)
    builds = []
    original = locality.split_structure
    monkeypatch.setattr(locality, "split_structure", lambda *a: builds.append(1) or original(*a))
    x = torch.randn(e.num_src, WIDTH, requires_grad=True)
    with dgl_accel.use_backend("triton"), use_locality("on", l2_bytes=l2_for(torch.float32)):
        for _ in range(3):
            aggregate(g, "copy_u", "sum", x, norm="both").sum().backward()
        first = g.cached("locality.split.in.6", lambda: None)
        aggregate(g, "copy_u", "mean", x).sum().backward()  # another normalisation: the same plan
        assert g.cached("locality.split.in.6", lambda: None) is first
    assert len(builds) == 2  # one per view (forward "in", backward "out")


@pytest.mark.interpreter
def test_the_plan_reads_the_host_three_times_per_view_beside_its_groups_and_calls_after_it_none():
    """What makes a GPU stream wait: the hot set's entry count and the two parts' positions (3 reads),
    plus each part's neighbour groups, which read as often as the plain view's; then a forward and
    backward through the split read nothing (launches left out: interpreted, they read their
    arguments; compiled, nothing)."""
    e = skewed_graph(seed=8)
    g, fresh = tst.tensor_graph(e), tst.tensor_graph(e)
    x = torch.randn(e.num_src, WIDTH, requires_grad=True)
    with dgl_accel.use_backend("triton"), use_locality("on", l2_bytes=l2_for(torch.float32)):
        g.csr("in"), fresh.csr("in")
        with HostReads() as plain:
            fresh.groups("in", 4)
        with HostReads() as build:
            assert len(locality_parts(g, "in", x, 4)) == 2
        assert build.events == ["scalar read", "nonzero", "nonzero"] + 2 * plain.events, build.events
        aggregate(g, "copy_u", "sum", x, norm="both").sum().backward()  # every plan and cache built
        with HostReads(leave_out=[(launchers, "gspmm_forward"), (launchers, "edge_grad_forward")]) as after:
            aggregate(g, "copy_u", "sum", x, norm="both").sum().backward()
        assert after.events == [], after.events


def test_choice_model_and_modes(monkeypatch):
    e = skewed_graph(seed=7)
    g = tst.tensor_graph(e)
    s = g.csr("in")
    with use_locality("on", l2_bytes=l2_for(torch.float32)):
        on = choose_locality(g, "in", WIDTH, torch.float32)
    reads = torch.bincount(s.indices.long(), minlength=s.num_cols).sort(descending=True).values
    assert on.split and on.hot_rows == HOT_ROWS
    assert on.hot_share == pytest.approx(float(reads[:HOT_ROWS].sum()) / s.num_edges)
    assert on.bytes_split < on.bytes_plain  # the power-law sources make the split pay in the model
    with use_locality("on", l2_bytes=10**9):  # every row fits: no split even when asked
        assert not choose_locality(g, "in", WIDTH, torch.float32).split
    with use_locality("auto", l2_bytes=l2_for(torch.float32)):
        assert "not a GPU" in choose_locality(g, "in", WIDTH, torch.float32).reason
    with use_locality("off"):
        assert not choose_locality(g, "in", WIDTH, torch.float32).split
    assert "native path" in choose_locality(g, "in", WIDTH, torch.float32, path="native").reason


class FakeGPUGraph(TensorGraph):
    """A CPU graph the choice takes for a GPU's: "auto" then models and times (timer replaced)."""

    def __init__(self, e: tst.EdgeList, bipartite: bool = False):
        super().__init__(e.src, e.dst, num_nodes=e.num_src)
        self.device, self.bipartite = torch.device("cuda"), bipartite


@pytest.mark.parametrize("plain_ms,split_ms,expect", [(2.0, 1.0, True), (1.0, 2.0, False)])
def test_auto_splits_where_the_model_saves_and_the_timing_agrees(monkeypatch, plain_ms, split_ms, expect):
    monkeypatch.setattr(locality, "_time_both", lambda *a: (plain_ms, split_ms))
    with use_locality("auto", l2_bytes=l2_for(torch.float32)):
        choice = choose_locality(FakeGPUGraph(skewed_graph(seed=8, hub_in=0)), "in", WIDTH, torch.float32)
        assert choice.split is expect and choice.timed_ms == (plain_ms, split_ms), choice
        block = choose_locality(FakeGPUGraph(skewed_graph(seed=8), bipartite=True), "in", WIDTH, torch.float32)
        assert not block.split and "block" in block.reason
        uniform = tst.EdgeList(torch.arange(120).repeat(8), torch.randint(0, 120, (960,)), 120, 120)
        flat = choose_locality(FakeGPUGraph(uniform), "in", WIDTH, torch.float32)
        assert not flat.split and flat.timed_ms is None and "under" in flat.reason  # no skew: not even timed


def test_explain_prints_both_views_plans():
    g = tst.tensor_graph(skewed_graph(seed=9))
    with dgl_accel.use_backend("triton"), use_locality("on", l2_bytes=l2_for(torch.float32)):
        text = str(locality.explain(g, WIDTH))
    assert "locality split (in view, mode 'on'): on" in text and "locality split (out view" in text
    assert f"the {HOT_ROWS} most-read rows" in text and "modelled bytes per pass" in text


@pytest.mark.parametrize("bad,kwargs", [("sometimes", {}), ("on", {"l2_bytes": 0}), ("on", {"l2_bytes": 2.5})])
def test_bad_modes_are_refused_with_a_fix(bad, kwargs):
    with pytest.raises(ValueError, match="Fix"):
        with use_locality(bad, **kwargs):
            pass


def test_empty_graph_and_isolated_rows():
    s = Structure(torch.tensor([0, 0, 0]), torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64),
                  2, 3, torch.device("cpu"))
    sp = split_structure(s, torch.tensor([1]))
    assert sp.hot.num_edges == sp.cold.num_edges == 0 and sp.hot.indptr.tolist() == [0, 0, 0]
