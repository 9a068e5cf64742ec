"""Heterograph blocks on the device (``core/sampling/neighbor/relations_device.py``): ``sample_typed_layers``
on the Triton path gives its CPU path's typed layers, array for array, on random heterographs
(several node types of different sizes, relations between them, isolated nodes, multi-edges, zero
fanouts, exclusions, weights with zeros, a hub above 1,024 in-edges), every edge is a real edge of
its relation, and a call reads the host at most its stated bound."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.csr import Structure
from dgl_accel.core.sampling.neighbor import choice_device as weighted_device
from dgl_accel.core.sampling.neighbor import relations_device
from dgl_accel.core.sampling.neighbor import sample_device as neighbor_device
from dgl_accel.core.sampling.neighbor.choice import weight_tables
from dgl_accel.core.sampling.neighbor.relations import sample_typed_layers, stack_relations, stacked_weights
from dgl_accel.core.sampling.output import TypedSamplerOutput, assert_same_typed_output
from dgl_accel.testing.cpu_loops import native_and_triton
from dgl_accel.testing.host_reads import HostReads
from dgl_accel.testing.marks import quick_first


def _relation(src, dst, n_src: int, n_dst: int, idtype=torch.int64) -> Structure:
    """The in-CSR of one relation (rows: its destinations), edge ids in the given order."""
    order = torch.argsort(dst * max(n_src, 1) + src, stable=True)
    indptr = torch.zeros(n_dst + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(dst, minlength=n_dst), 0, out=indptr[1:])
    return Structure(indptr, src[order].to(idtype), order.to(idtype), n_dst, n_src, torch.device("cpu"))


@st.composite
def heterographs(draw, max_nodes=30, max_edges=150):
    """(node counts per type, [(src type, dst type, src, dst)] per relation)."""
    sizes = draw(st.lists(st.integers(1, max_nodes), min_size=1, max_size=3))
    rels = []
    for _ in range(draw(st.integers(1, 4))):
        s, d = draw(st.integers(0, len(sizes) - 1)), draw(st.integers(0, len(sizes) - 1))
        m = draw(st.integers(0, max_edges))
        gen = torch.Generator().manual_seed(draw(st.integers(0, 999)))
        # edges land on the first half of the destinations: the rest have no in-edge of this relation
        src = torch.randint(sizes[s], (m,), generator=gen)
        dst = torch.randint(max(sizes[d] // 2, 1), (m,), generator=gen)
        if m > 2:  # a multi-edge
            src[-1], dst[-1] = src[0], dst[0]
        rels.append((s, d, src, dst))
    return sizes, rels


def _check_edges(out: TypedSamplerOutput, rels, excluded):
    for layer in out.layers:
        for t, dst in enumerate(layer.dst_nodes):
            assert torch.equal(layer.src_nodes[t][:dst.shape[0]], dst)
            extra = layer.src_nodes[t][dst.shape[0]:].tolist()
            assert extra == sorted(set(extra))  # new sources: increasing, distinct
        for r, (s, d, src, dst) in enumerate(rels):
            block = layer.relations[r]
            assert block.src_nodes is layer.src_nodes[s] and block.dst_nodes is layer.dst_nodes[d]
            assert torch.equal(src[block.eids], block.src_nodes[block.src_local])
            assert torch.equal(dst[block.eids], block.dst_nodes[block.dst_local])
            assert not set(block.eids.tolist()) & excluded[r]


@settings(max_examples=25, deadline=None)
@given(g=heterographs(), layers=st.lists(st.lists(st.sampled_from([-1, 0, 1, 2, 4]), min_size=4, max_size=4),
                                         min_size=1, max_size=3),
       replace=st.booleans(), weighted=st.booleans(), seed=st.integers(0, 2**64 - 1), data=st.data())
@pytest.mark.interpreter
def test_device_typed_layers_are_the_cpu_paths(g, layers, replace, weighted, seed, data):
    sizes, rels = g
    stack = stack_relations([_relation(src, dst, sizes[s], sizes[d]) for s, d, src, dst in rels])
    fanouts = [f[:len(rels)] for f in layers]
    seeds = [torch.tensor(data.draw(st.lists(st.integers(0, n - 1), max_size=6)), dtype=torch.int64) for n in sizes]
    exclude = [torch.tensor(data.draw(st.lists(st.integers(0, max(src.numel() - 1, 0)), max_size=4))
                            if src.numel() and data.draw(st.booleans()) else [], dtype=torch.int64)
               for _, _, src, _ in rels]
    tables = None
    if weighted:
        gen = torch.Generator().manual_seed(seed % 1000)
        w = [torch.rand(src.numel(), generator=gen) * (torch.rand(src.numel(), generator=gen) > 0.3)
             for _, _, src, _ in rels]
        tables = weight_tables(stack.csr.indptr, stack.csr.eids, stacked_weights(stack, w))
    kw = dict(seed=seed, replace=replace, tables=tables, exclude=exclude)
    native, device = native_and_triton(lambda: sample_typed_layers(stack, [(s, d) for s, d, _, _ in rels], sizes, seeds,
                                                       fanouts, **kw))
    assert_same_typed_output(device, native)
    assert len(device.layers) == len(fanouts)
    _check_edges(device, rels, [set(x.tolist()) for x in exclude])


@pytest.mark.interpreter
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
# the fanouts of 1,200: over 2 s each on 2 cores under the interpreter; the first case is the quick one
@pytest.mark.parametrize("fanout, replace", quick_first([(5, False), (1200, False), (1200, True), (-1, False)]))
def test_device_typed_layers_on_a_hub_above_1024_in_edges(idtype, fanout, replace):
    hub = torch.arange(1100)
    rels = [(0, 1, hub, torch.zeros(1100, dtype=torch.int64)),  # user -> item 0: 1,100 in-edges
            (1, 0, torch.tensor([0, 0, 1]), torch.tensor([5, 5, 6]))]  # a multi-edge back
    sizes = [1200, 3]
    stack = stack_relations([_relation(src, dst, sizes[s], sizes[d], idtype) for s, d, src, dst in rels])
    seeds = [torch.tensor([5, 7]), torch.tensor([0, 2, 0])]
    native, device = native_and_triton(lambda: sample_typed_layers(stack, [(0, 1), (1, 0)], sizes, seeds, [[fanout, 3]] * 2,
                                                       seed=2**63 + 1, replace=replace))
    assert_same_typed_output(device, native)
    _check_edges(device, rels, [set(), set()])
    assert device.layers[-1].relations[0].num_edges == 2 * (fanout if replace or 0 < fanout < 1100 else 1100)


@pytest.mark.interpreter
@pytest.mark.parametrize("weighted, excluded", [(False, False), (True, True)])
def test_device_typed_layers_read_the_host_at_most_their_bound(weighted, excluded):
    rels = [(0, 1, torch.arange(300) % 40, torch.arange(300) % 7), (1, 0, torch.arange(50) % 7, torch.arange(50) % 40),
            (0, 0, torch.arange(80) % 40, torch.arange(80) % 13)]
    sizes = [40, 7]
    stack = stack_relations([_relation(src, dst, sizes[s], sizes[d]) for s, d, src, dst in rels])
    tables = None
    if weighted:
        tables = weight_tables(stack.csr.indptr, stack.csr.eids,
                               stacked_weights(stack, [torch.rand(src.numel()) for _, _, src, _ in rels]))
    fanouts = [[3, 3, 2], [4, 4, 4]]  # two fanout groups in the second layer, one in the first
    exclude = [torch.tensor([1, 2]), None, torch.tensor([0])] if excluded else None
    with dgl_accel.use_backend("triton"):
        # the interpreter reads the kernel's arguments on the host and the CPU's Philox runs in numpy;
        # on a GPU both are device work without a read
        with HostReads(leave_out=[(neighbor_device, "neighbor_choice_triton"),
                                  (weighted_device, "philox_uniform")]) as reads:
            sample_typed_layers(stack, [(s, d) for s, d, _, _ in rels], sizes, [torch.arange(10), torch.arange(3)],
                                fanouts, seed=4, replace=False, tables=tables, exclude=exclude)
    choice = 1 + (neighbor_device.WEIGHTED_EXTRA_READS if weighted else 0) + 1 + excluded  # per fanout group
    bound = sum(len(set(f)) * choice + relations_device.RELABEL_READS for f in fanouts)
    assert 0 < len(reads.events) <= bound, reads.events
