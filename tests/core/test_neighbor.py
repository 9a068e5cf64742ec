"""Neighbour sampling on CSR views without DGL (``core/sampling/neighbor.py``): the entry gives the
same edges on the Triton kernels (``kernels/sampling.py``, under the interpreter) as on the CPU twin,
those are the positions the pure-torch spec (``ref_neighbor_choice``) picks, and every sampled edge
is a real in-edge of its seed.  (tests/test_neighbor_sampler.py runs the DGL sampler.)"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.neighbor import choose_neighbors, sample_neighbors
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.reference import ref_neighbor_choice


@settings(max_examples=20)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300), fanout=st.sampled_from([-1, 1, 3, 10]),
       replace=st.booleans(), seed=st.integers(0, 2**64 - 1), step=st.integers(0, 3), data=st.data())
def test_sample_neighbors_same_on_both_paths_and_follows_the_spec(e, fanout, replace, seed, step, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), max_size=12, unique=True)),
                         dtype=e.src.dtype)
    out = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out[name] = sample_neighbors(csr, seeds, fanout, seed=seed, replace=replace, step=step)
    for a, b in zip(out["native"], out["triton"]):
        assert a.dtype == b.dtype and torch.equal(a, b)
    s_src, s_dst, s_eid = out["native"]
    # real in-edges of their seeds, grouped by seed in the given order
    assert torch.equal(e.src[s_eid.long()], s_src) and torch.equal(e.dst[s_eid.long()], s_dst)
    deg = torch.bincount(e.dst.long(), minlength=e.num_src)
    want_counts = [int(deg[v]) if fanout < 0 or (not replace and deg[v] <= fanout) else
                   (fanout if deg[v] else 0) for v in seeds.tolist()]
    assert s_dst.tolist() == [v for v, c in zip(seeds.tolist(), want_counts) for _ in range(c)]
    if fanout >= 0:  # the spec's positions, slot by slot
        ref = ref_neighbor_choice(csr.indptr, seeds.long(), fanout, seed, step, csr.num_rows, replace)
        assert torch.equal(csr.eids[ref[ref >= 0]], s_eid)
    if not replace:
        assert s_eid.unique().numel() == s_eid.numel()


def test_choose_neighbors_records_the_path_it_ran():
    indptr, transits = torch.tensor([0, 3, 3, 7]), torch.tensor([2, 0, 1])
    for name, label in (("native", "native-cpu"), ("triton", "triton-interpreter")):
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            pos = choose_neighbors(indptr, transits, 2, seed=9, step=1, num_nodes=3)
        assert dgl_accel.stats()["neighbor_choice"] == {label: 1}
        assert torch.equal(pos, ref_neighbor_choice(indptr, transits, 2, 9, 1, 3, False))


@pytest.mark.parametrize("bad, match", [
    (lambda csr: sample_neighbors(csr, torch.tensor([5]), 2, seed=0), "seeds"),
    (lambda csr: sample_neighbors(csr, torch.tensor([0]), -2, seed=0), "fanout"),
    (lambda csr: sample_neighbors(csr, torch.tensor([0]), 2, seed=-1), "seed"),
])
def test_bad_input_is_a_clear_error(bad, match):
    csr = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 2]), num_nodes=3).csr("in")
    with pytest.raises(ValueError, match=match):
        bad(csr)
