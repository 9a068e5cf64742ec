"""Bulk neighbour sampling on the device (``core/sampling/bulk/neighbor_device.py``): under the Triton
interpreter it gives the CPU path's blocks (``bulk/neighbor.py``'s ``sample_bulk_cpu``: ``sample_layer``,
compiled or numpy), array for array, for every minibatch and layer; and it reads the host at most its stated bound."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.sampling.bulk import neighbor_device as bulk_device
from dgl_accel.core.sampling.bulk.matrix import canonical_adjacency
from dgl_accel.core.sampling.bulk.neighbor import sample_bulk_cpu
from dgl_accel.core.sampling.bulk.neighbor_device import sample_bulk_device
from dgl_accel.core.sampling.checks import SamplingInputError
from dgl_accel.core.sampling.output import assert_same_output
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first


def _canon(e):
    """The canonical adjacency of ``e``'s distinct (src, dst) pairs (the device path's domain)."""
    pairs = sorted(set(zip(e.src.tolist(), e.dst.tolist())))
    n = e.num_src
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return canonical_adjacency(indptr, src[order], order.astype(np.int64) * 3 + 1, n)  # edge ids: not positions


@settings(max_examples=25, deadline=None)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300), k=st.integers(1, 4),
       fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5, 17]), min_size=1, max_size=3), replace=st.booleans(),
       seed=st.integers(0, 2**64 - 1), data=st.data())
@pytest.mark.interpreter
def test_device_blocks_are_the_cpu_paths_for_every_minibatch(e, k, fanouts, replace, seed, data):
    canon = _canon(e)
    n = canon.n
    batches = [torch.tensor(sorted(set(data.draw(st.lists(st.integers(0, n - 1), max_size=8)))), dtype=torch.int64)
               for _ in range(k)]
    keys = [(seed + 7919 * b) % 2**64 for b in range(k)]
    excl = None
    if data.draw(st.booleans()) and canon.eids.size:
        excl = torch.tensor(sorted(set(data.draw(st.lists(st.sampled_from(canon.eids.tolist()), max_size=5)))))
    want = sample_bulk_cpu(canon, [b.numpy() for b in batches], keys, fanouts, replace=replace,
                           excl=None if excl is None else np.sort(excl.numpy()))
    got = sample_bulk_device(*(torch.from_numpy(a) for a in (canon.indptr, canon.indices, canon.eids)), n,
                             batches, keys, fanouts, replace=replace, exclude=excl)
    assert len(got) == k
    assert_same_output(got, want)
    for b, out in enumerate(got):
        assert torch.equal(out.seeds, batches[b]) and len(out.layers) == len(fanouts)
        for i, layer in enumerate(out.layers):
            if i + 1 < len(out.layers):
                assert torch.equal(out.layers[i + 1].src_nodes, layer.dst_nodes)
        assert torch.equal(out.layers[-1].dst_nodes, batches[b])


def _canon_multi(src: np.ndarray, dst: np.ndarray, n: int):
    """The canonical adjacency of a multigraph: parallel edges merged, their count the weight."""
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return canonical_adjacency(indptr, src[order], order.astype(np.int64), n)


def _device_vs_cpu(canon, batches, keys, fanouts, replace, excl=None):
    want = sample_bulk_cpu(canon, [b.numpy() for b in batches], keys, fanouts, replace=replace,
                           excl=None if excl is None else np.sort(excl.numpy()))
    got = sample_bulk_device(*(torch.from_numpy(a) for a in (canon.indptr, canon.indices, canon.eids)), canon.n,
                             batches, keys, fanouts, replace=replace, exclude=excl,
                             prefix=None if canon.unit else canon.weight_prefix("cpu"))
    assert_same_output(got, want)
    return got


@pytest.mark.interpreter
# 20 examples: over 2 s on 2 cores under the interpreter (the slow case); the quick case draws 5 of the same
@pytest.mark.parametrize("examples", quick_first([5, 20]))
def test_device_blocks_with_parallel_edges_are_the_cpu_paths(examples):
    """Parallel edges merged into weighted entries: ITS's weighted rule on the device, the same picks."""

    @settings(max_examples=examples, deadline=None)
    @given(e=tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=300), k=st.integers(1, 3),
           fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5]), min_size=1, max_size=3), replace=st.booleans(),
           seed=st.integers(0, 2**64 - 1), data=st.data())
    def check(e, k, fanouts, replace, seed, data):
        src, dst = e.src.long().numpy(), e.dst.long().numpy()
        if src.size:  # every third edge twice more: multiplicities 1 and 3
            src, dst = np.concatenate([src, src[::3], src[::3]]), np.concatenate([dst, dst[::3], dst[::3]])
        canon = _canon_multi(src, dst, e.num_src)
        batches = [torch.tensor(sorted(set(data.draw(st.lists(st.integers(0, canon.n - 1), max_size=8)))),
                                dtype=torch.int64) for _ in range(k)]
        excl = None
        if data.draw(st.booleans()) and canon.eids.size:
            excl = torch.tensor(sorted(set(data.draw(st.lists(st.sampled_from(canon.eids.tolist()), max_size=5)))))
        _device_vs_cpu(canon, batches, [(seed + 31 * b) % 2**64 for b in range(k)], fanouts, replace, excl)

    check()


@pytest.mark.interpreter
@pytest.mark.parametrize("replace", quick_first([True, False]))  # each about 2 s on 2 cores under the interpreter
def test_device_weighted_rows_on_a_hub_above_1024_entries(replace):
    src = np.concatenate([np.arange(1, 1101), np.repeat(np.arange(1, 40), 4)])  # 1,100 sources, 39 of them x5
    dst = np.zeros(src.shape[0], dtype=np.int64)
    canon = _canon_multi(src, dst, 1101)
    assert not canon.unit
    got = _device_vs_cpu(canon, [torch.tensor([0]), torch.tensor([0, 5])], [3, 2**63 + 9], [2, 60], replace)
    heavy = (got[0].layers[-1].src_nodes[got[0].layers[-1].src_local] < 40).float().mean()
    assert 0.05 < float(heavy) < 0.4  # the 39 x5 sources hold 195 of 1,256 weight: drawn more than 39/1,100


@pytest.mark.interpreter
@pytest.mark.parametrize("exclude", [False, True])
def test_bulk_device_reads_the_host_at_most_its_bound_whatever_k(exclude):
    from dgl_accel.testing.host_reads import HostReads
    n = 400
    src = torch.tensor([(v + d) % n for v in range(n) for d in range(1, 4 if v % 50 else 120)])
    dst = torch.tensor([v for v in range(n) for d in range(1, 4 if v % 50 else 120)])
    order = torch.argsort(dst * n + src)
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    fanouts = [3, 5, 4]
    excl = torch.tensor([3, 40, 41, 500]) if exclude else None
    for k in (1, 6):
        batches = [torch.arange(b, n, 37)[:10] for b in range(k)]
        with HostReads() as reads:
            sample_bulk_device(indptr, src[order], order, n, batches, list(range(k)), fanouts, replace=False,
                               exclude=excl)
        bound = len(fanouts) * (bulk_device.HOST_READS_PER_BULK_LAYER + exclude)
        assert 0 < len(reads.events) <= bound, (k, reads.events)


def test_labels_beyond_the_counter_range_are_refused_before_any_draw():
    indptr = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(SamplingInputError, match="2\\^39"):  # 3 layers x 2^38 nodes: labels up to 3 * 2^38 - 1
        sample_bulk_device(indptr, torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64), 1 << 38,
                           [torch.tensor([0])], [1], [2, 2, 2], replace=False)


# ------------------------------------------------------------------------------ bulk LADIES
def _ladies_both(seed: int, replace: bool, s: int, k: int = 3, n: int = 60):
    """One layer of bulk LADIES on random gathered in-edges (parallel edges included): the CPU
    path (``bulk/ladies.py``'s ``sample_layer``) and the device one (``bulk/ladies_device.py``)."""
    import dgl_accel
    from dgl_accel.core.sampling.bulk.ladies import ladies_matrix, normalise_rows, sample_layer
    from dgl_accel.core.sampling.bulk.ladies_device import ladies_layer_device
    gen = torch.Generator().manual_seed(seed)
    sizes = [int(x) for x in torch.randint(1, 8, (k,), generator=gen)]
    rows = sum(sizes)
    m = 400
    row_pos = torch.sort(torch.randint(0, rows, (m,), generator=gen)).values
    src = torch.randint(0, n, (m,), generator=gen)
    src[::7] = src[0]  # repeated sources: parallel edges within a row, shared columns across rows
    eid = torch.randperm(m, generator=gen)
    c = torch.rand(m, generator=gen, dtype=torch.float64) + 0.1
    keys = [(seed * 7919 + b) % 2**64 for b in range(k)]
    row_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    with dgl_accel.use_backend("native"):
        p_ptr, p_cols, p_val = ladies_matrix(row_pos, src, c, row_ptr, n, k)
        want = sample_layer((p_ptr, p_cols, normalise_rows(p_ptr, p_val), p_val), (row_pos, src, eid, c), row_ptr,
                            1, s, keys, replace, n)
    got = ladies_layer_device(row_pos, src, eid, c, sizes, n, 1, s, keys, replace)
    return got, want


@pytest.mark.interpreter
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("seed, budget", [(0, 6), (1, 6), (2, 6), (3, 64)])  # 64 > n = 60: every candidate taken
def test_bulk_ladies_layer_on_the_device_is_the_cpu_paths(seed, budget, replace):
    got, want = _ladies_both(seed, replace, budget)
    assert len(got) == len(want)
    for g_part, w_part in zip(got, want):
        for a, b in zip(g_part[:3], w_part[:3]):  # destination positions, sources, edge ids: exact
            assert torch.equal(a.long(), b.long())
        torch.testing.assert_close(g_part[3], w_part[3], rtol=1e-12, atol=0)  # weights: to rounding


@pytest.mark.interpreter
def test_bulk_ladies_layer_reads_the_host_at_most_its_bound():
    from dgl_accel.core.sampling.bulk import ladies_device as bulk_ladies_device
    from dgl_accel.testing.host_reads import HostReads
    gen = torch.Generator().manual_seed(5)
    row_pos = torch.sort(torch.randint(0, 12, (300,), generator=gen)).values
    src = torch.randint(0, 50, (300,), generator=gen)
    # the interpreter reads the kernel's arguments on the host; a compiled launch does not
    with HostReads(leave_out=[(bulk_device, "triton_kernel")]) as reads:
        bulk_ladies_device.ladies_layer_device(row_pos, src, torch.arange(300), torch.ones(300, dtype=torch.float64),
                                               [4, 5, 3], 50, 0, 5, [1, 2, 3], False)
    assert 0 < len(reads.events) <= bulk_ladies_device.HOST_READS, reads.events
