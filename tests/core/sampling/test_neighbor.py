"""Neighbour sampling on CSR views without DGL (``core/sampling/neighbor/sample.py``): the entry gives the
same edges on the Triton kernels (``kernels/sampling.py``, under the interpreter) as on the CPU twin,
those are the positions the pure-torch spec (``ref_neighbor_choice``) picks, and every sampled edge
is a real in-edge of its seed.  (tests/sampling/test_neighbor.py runs the DGL sampler.)"""
import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.neighbor.sample import choose_neighbors, sample_layers, sample_neighbors
from dgl_accel.core.sampling.output import SampledLayer, SamplerOutput, assert_same_output
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.reference import ref_neighbor_choice


@settings(max_examples=20)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300), fanout=st.sampled_from([-1, 1, 3, 10]),
       replace=st.booleans(), seed=st.integers(0, 2**64 - 1), step=st.integers(0, 3), data=st.data())
@pytest.mark.interpreter
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


@pytest.mark.interpreter
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


# ------------------------------------------------ the device pipeline (the Triton path): same samples, bounded reads
def _star(hub_degree: int, idtype):
    """Node 0 has ``hub_degree`` in-edges (from 1..hub_degree, node 1 twice: a multi-edge); node
    hub_degree + 1 is isolated."""
    src = torch.cat([torch.arange(1, hub_degree + 1), torch.tensor([1, 0])]).to(idtype)
    dst = torch.cat([torch.zeros(hub_degree, dtype=torch.int64), torch.tensor([0, 1])]).to(idtype)
    return TensorGraph(src, dst, num_nodes=hub_degree + 2).csr("in")


@pytest.mark.interpreter
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
# fanout 700 without replacement: about 10 s on 2 cores under the interpreter; the first case is the quick one
@pytest.mark.parametrize("fanout, replace", quick_first([(5, False), (5, True), (700, False), (1500, True), (-1, False)]))
def test_device_pipeline_gives_the_cpu_samples_on_hubs_repeats_and_isolated_nodes(idtype, fanout, replace):
    csr = _star(1100, idtype)  # a hub above 1,024 in-edges
    seeds = torch.tensor([0, 1101, 0, 1, 1101, 2], dtype=idtype)  # repeated, isolated, a leaf
    out = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out[name] = sample_neighbors(csr, seeds, fanout, seed=2**63 + 5, replace=replace, step=2)
    for a, b in zip(out["native"], out["triton"]):
        assert a.dtype == b.dtype == idtype and torch.equal(a, b)
    assert out["triton"][1].tolist().count(0) == (1101 if fanout == -1 or (fanout > 1101 and not replace)
                                                  else fanout) * 2


@pytest.mark.interpreter
@pytest.mark.parametrize("fanout", [4, -1])
def test_device_pipeline_reads_the_host_at_most_its_bound(fanout):
    from dgl_accel.core.sampling.neighbor import sample_device as neighbor_device
    from dgl_accel.testing.host_reads import HostReads
    csr = _star(300, torch.int64)
    seeds = torch.arange(0, 200, 3)
    # the interpreter reads the kernel's arguments on the host; a compiled launch does not
    with HostReads(leave_out=[(neighbor_device, "neighbor_choice_triton")]) as reads:
        with dgl_accel.use_backend("triton"):
            sample_neighbors(csr, seeds, fanout, seed=1)
    assert 0 < len(reads.events) <= neighbor_device.HOST_READS_PER_LAYER, reads.events


# ------------------------------------------------ multi-layer blocks: a typed output, the same on both paths
def _layers_on(name, csr, seeds, fanouts, **kw):
    with dgl_accel.use_backend(name):
        return sample_layers(csr, seeds, fanouts, **kw)


@settings(max_examples=25)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=40, max_edges=300),
       fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 5]), min_size=1, max_size=3), replace=st.booleans(),
       seed=st.integers(0, 2**64 - 1), data=st.data())
@pytest.mark.interpreter
def test_sample_layers_same_on_both_paths_and_consistent(e, fanouts, replace, seed, data):
    csr = TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), max_size=10)), dtype=e.src.dtype)
    exclude = torch.tensor(data.draw(st.lists(st.integers(0, max(e.src.numel() - 1, 0)), max_size=6))
                           if e.src.numel() else [], dtype=torch.int64)
    kw = dict(seed=seed, replace=replace, exclude=exclude if data.draw(st.booleans()) else None)
    native, device = (_layers_on(name, csr, seeds, fanouts, **kw) for name in ("native", "triton"))
    assert isinstance(device, SamplerOutput) and len(device.layers) == len(fanouts)
    for a, b in zip(native.layers, device.layers):
        for field in dataclasses.fields(SampledLayer):
            x, y = getattr(a, field.name), getattr(b, field.name)
            assert x.dtype == y.dtype == torch.int64 and torch.equal(x, y), field.name
    excluded = set(exclude.tolist()) if kw["exclude"] is not None else set()
    for i, layer in enumerate(device.layers):
        t = layer.dst_nodes.numel()
        assert torch.equal(layer.src_nodes[:t], layer.dst_nodes)
        assert layer.src_nodes[t:].tolist() == sorted(set(layer.src_nodes[t:].tolist()))  # new ones: increasing
        # every edge is a real in-edge of its destination, not excluded
        assert torch.equal(e.src[layer.eids].long(), layer.src_nodes[layer.src_local])
        assert torch.equal(e.dst[layer.eids].long(), layer.dst_nodes[layer.dst_local])
        assert not excluded & set(layer.eids.tolist())
        if i + 1 < len(device.layers):
            assert torch.equal(device.layers[i + 1].src_nodes, layer.dst_nodes)
    assert torch.equal(device.layers[-1].dst_nodes, seeds.long())


@pytest.mark.interpreter
@pytest.mark.parametrize("exclude", [None, torch.tensor([3, 40, 41])])
@pytest.mark.parametrize("distinct", [False, True])
def test_sample_layers_reads_the_host_at_most_its_bound(exclude, distinct):
    from dgl_accel.core.sampling.neighbor import sample_device as neighbor_device
    from dgl_accel.testing.host_reads import HostReads
    csr = _star(300, torch.int64)
    fanouts = [3, 5, 4]
    seeds = torch.arange(0, 120, 7) if distinct else torch.cat([torch.arange(0, 120, 7), torch.tensor([14])])
    with HostReads(leave_out=[(neighbor_device, "neighbor_choice_triton")]) as reads:
        with dgl_accel.use_backend("triton"):
            out = sample_layers(csr, seeds, fanouts, seed=3, exclude=exclude)
    per_layer = neighbor_device.HOST_READS_PER_BLOCK_LAYER + (exclude is not None) - distinct
    bound = 1 + neighbor_device.HOST_READS_DISTINCT_SEEDS + len(fanouts) * per_layer
    assert 0 < len(reads.events) <= bound, reads.events
    with dgl_accel.use_backend("native"):
        assert_same_output([out], [sample_layers(csr, seeds, fanouts, seed=3, exclude=exclude)])
