"""The transit engine: grouping by transit, work classes, and the Triton neighbour-choice kernel
(under the interpreter) reproducing the spec bit for bit."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.sampling.neighbor.engine import classify, group_by_transit
from dgl_accel.core.sampling.neighbor.launchers import neighbor_choice_triton
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.reference import ref_neighbor_choice


@st.composite
def csr_and_transits(draw, max_nodes=40, max_transits=30):
    n = draw(st.integers(1, max_nodes))
    degrees = draw(st.lists(st.one_of(st.integers(0, 6), st.integers(30, 70)), min_size=n, max_size=n))
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.tensor(degrees), 0)
    transits = torch.tensor(draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=max_transits)), dtype=torch.int64)
    return indptr, transits, n


@pytest.mark.interpreter
# up to 40 rows and 30 transits: up to 4 s on 2 busy cores under the interpreter (the slow case); the quick case
# draws up to 10 rows and 6 transits
@pytest.mark.parametrize("sizes", quick_first([dict(max_nodes=10, max_transits=6), {}]), ids=["small", "up-to-40-rows"])
@settings(max_examples=20)
@given(fanout=st.sampled_from([1, 3, 10, 40]), replace=st.booleans(), seed=st.integers(0, 2**40),
       step=st.integers(0, 3), data=st.data())
def test_triton_kernel_matches_the_spec(sizes, fanout, replace, seed, step, data):
    indptr, transits, n = data.draw(csr_and_transits(**sizes), label="case")
    got = neighbor_choice_triton(indptr, transits, fanout, seed=seed, step=step, num_nodes=n, replace=replace)
    assert torch.equal(got, ref_neighbor_choice(indptr, transits, fanout, seed, step, n, replace))
    if not replace:  # a k-subset: no position twice in a row
        for row in got.tolist():
            picked = [p for p in row if p >= 0]
            assert len(picked) == len(set(picked))


def test_group_by_transit_inverts_the_map():
    transit_of_sample = torch.tensor([5, 2, 5, 9, 2, 5])
    groups = group_by_transit(transit_of_sample)
    assert groups.transits.tolist() == [2, 5, 9] and groups.counts.tolist() == [2, 3, 1]
    for g, t in enumerate(groups.transits.tolist()):
        samples = groups.order[groups.ptr[g]:groups.ptr[g + 1]].tolist()
        assert all(transit_of_sample[s] == t for s in samples) and samples == sorted(samples)


def test_classify_by_work():
    sub, blk, grid = classify(torch.tensor([1, 31, 32, 500, 1024, 1025, 10**5]))
    assert sub.tolist() == [0, 1] and blk.tolist() == [2, 3, 4] and grid.tolist() == [5, 6]


@settings(max_examples=4, deadline=None)
@given(degrees=st.lists(st.sampled_from([0, 5, 1100, 1300, 2600]), min_size=1, max_size=3),
       fanout=st.sampled_from([1025, 1200, 2100]), replace=st.booleans(), seed=st.integers(0, 2**40))
@pytest.mark.interpreter
def test_grid_class_kernel_matches_the_spec(degrees, fanout, replace, seed):
    """fanout > 1024 runs the grid-class kernel (several programs per transit; Floyd chunk by chunk)."""
    indptr = torch.zeros(len(degrees) + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.tensor(degrees), 0)
    transits = torch.arange(len(degrees) - 1, -1, -1)
    n = len(degrees)
    got = neighbor_choice_triton(indptr, transits, fanout, seed=seed, step=1, num_nodes=n, replace=replace)
    assert torch.equal(got, ref_neighbor_choice(indptr, transits, fanout, seed, 1, n, replace))
    if not replace:
        for row in got.tolist():
            picked = [p for p in row if p >= 0]
            assert len(picked) == len(set(picked))


@pytest.mark.interpreter
@settings(max_examples=10, deadline=None)
@given(case=csr_and_transits(), fanout=st.sampled_from([1, 5, 40]), replace=st.booleans(), seed=st.integers(0, 2**40))
def test_counter_ids_replace_transit_ids_in_the_counters(case, fanout, replace, seed):
    """HAS_CIDS: the kernel keys draws by caller-given counter ids (k-hop's per-sample ids)."""
    indptr, transits, n = case
    cids = torch.arange(transits.numel(), dtype=torch.int64) * n + transits  # sample i, transit v
    got = neighbor_choice_triton(indptr, transits, fanout, seed=seed, step=0, num_nodes=n * max(1, transits.numel()),
                                 replace=replace, counter_ids=cids)
    ref = ref_neighbor_choice(indptr, transits, fanout, seed, 0, n * max(1, transits.numel()), replace, counter_ids=cids)
    assert torch.equal(got, ref)
