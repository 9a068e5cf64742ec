"""Relations stacked as segments of one CSR (``core/sampling/neighbor/relations.py``), the heterograph
sampler's engine: every relation's choice is a real in-edge of its transit with the right count,
the draws follow the spec on the stacked rows (so relations into one node type draw
independently), both paths agree, relations that share a fanout share one choice call, and
stacked weights line up with their relations."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.neighbor import relations
from dgl_accel.core.sampling.neighbor import sample as neighbor
from dgl_accel.core.sampling.neighbor.choice import weight_tables
from dgl_accel.core.sampling.neighbor.relations import choose_relations, stack_relations, stacked_weights
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit
from dgl_accel.testing.reference import ref_neighbor_choice


def _csr(e):
    return TensorGraph(e.src, e.dst, num_nodes=e.num_src).csr("in")


@settings(max_examples=15, deadline=None)
@given(es=st.lists(tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=200, idtypes=[torch.int64]), min_size=1,
                   max_size=3),
       fanouts=st.lists(st.sampled_from([-1, 0, 1, 3, 8]), min_size=3, max_size=3), replace=st.booleans(),
       seed=st.integers(0, 2**64 - 1), step=st.integers(0, 2), data=st.data())
@pytest.mark.interpreter
def test_each_relation_gets_real_in_edges_drawn_by_the_spec_on_stacked_rows(es, fanouts, replace, seed, step, data):
    csrs = [_csr(e) for e in es]
    stack = stack_relations(csrs)
    transits = [np.array(data.draw(st.lists(st.integers(0, e.num_src - 1), max_size=8, unique=True)), dtype=np.int64)
                for e in es]
    out = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out[name] = choose_relations(stack, transits, fanouts[:len(es)], seed=seed, step=step, replace=replace)
    for a, b in zip(out["native"], out["triton"]):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    for r, (e, (counts, src, eid)) in enumerate(zip(es, out["native"])):
        fanout, v = fanouts[r], transits[r]
        deg = torch.bincount(e.dst, minlength=e.num_src).numpy()[v]
        if fanout < 0:
            want = deg
        elif fanout == 0:
            want = np.zeros_like(deg)
        else:
            want = np.where(deg > 0, fanout, 0) if replace else np.minimum(deg, fanout)
        assert counts.tolist() == want.tolist()
        # real in-edges of their transit, in the relation's own edge ids
        assert np.array_equal(e.src.numpy()[eid], src)
        assert np.array_equal(e.dst.numpy()[eid], np.repeat(v, counts))
        if fanout > 0 and v.size:  # the spec's positions for stacked node row_offsets[r] + v
            pos = ref_neighbor_choice(stack.csr.indptr, torch.from_numpy(v + stack.row_offsets[r]), fanout, seed,
                                      step, stack.csr.num_rows, replace)
            want_eid = stack.csr.eids[pos[pos >= 0]] - int(stack.edge_offsets[r])
            assert want_eid.tolist() == eid.tolist()


def test_two_copies_of_one_relation_draw_independently():
    e = tst.EdgeList(*[torch.tensor(x) for x in ([i for i in range(1, 41)], [0] * 40)], 41, 41)
    stack = stack_relations([_csr(e), _csr(e)])
    (_, a, _), (_, b, _) = choose_relations(stack, [np.array([0]), np.array([0])], [5, 5], seed=3, step=0,
                                            replace=False)
    assert len(a) == len(b) == 5 and set(a.tolist()) != set(b.tolist())


def test_relations_sharing_a_fanout_share_one_choice_call(monkeypatch):
    calls = []
    real = relations.choose_positions
    monkeypatch.setattr(relations, "choose_positions", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    e = tst.EdgeList(torch.tensor([1, 2, 0]), torch.tensor([0, 0, 1]), 3, 3)
    stack = stack_relations([_csr(e)] * 3)
    v = np.array([0, 1])
    choose_relations(stack, [v, v, v], [2, 2, 2], seed=0, step=0, replace=False)
    assert calls == [2]
    calls.clear()
    choose_relations(stack, [v, v, None], [2, 1, 2], seed=0, step=0, replace=False)
    assert sorted(calls) == [1, 2]


def test_stacked_weights_steer_each_relation():
    # relation 0: node 0 has in-edges from 1, 2, 3; relation 1: the same edges, other weights
    e = tst.EdgeList(torch.tensor([1, 2, 3]), torch.tensor([0, 0, 0]), 4, 4)
    stack = stack_relations([_csr(e), _csr(e)])
    w = stacked_weights(stack, [torch.tensor([0.0, 1.0, 0.0]), torch.tensor([1.0, 0.0, 1.0])])
    tab = weight_tables(stack.csr.indptr, stack.csr.eids, w, stack.host_indptr, stack.csr.eids.numpy())
    for seed in range(5):
        (c0, s0, _), (c1, s1, _) = choose_relations(stack, [np.array([0]), np.array([0])], [2, 2], seed=seed,
                                                    step=0, replace=False, tables=tab)
        assert s0.tolist() == [2] and sorted(s1.tolist()) == [1, 3]
    with pytest.raises(ValueError, match="expected 3 weights for relation 1"):
        stacked_weights(stack, [torch.ones(3), torch.ones(2)])


def test_drop_excluded_keeps_grouping():
    counts, src, eid = neighbor.drop_excluded(np.array([2, 0, 2]), np.array([5, 6, 7, 8]), np.array([0, 1, 2, 3]),
                                              np.array([1, 2]))
    assert counts.tolist() == [1, 0, 1] and src.tolist() == [5, 8] and eid.tolist() == [0, 3]


def test_stacking_nothing_is_refused():
    with pytest.raises(ValueError, match="at least one relation"):
        stack_relations([])


def test_gather_pairs_compiled_loop_equals_the_gather_and_unpack():
    rng = np.random.default_rng(0)
    pairs = neighbor.pack_pairs(rng.integers(0, 2**31 - 1, 500), rng.integers(0, 2**31 - 1, 500))
    flat = rng.integers(0, 500, 3000)
    with forced_jit(True):
        a = neighbor.gather_pairs(pairs, flat)
    with forced_jit(False):
        b = neighbor.gather_pairs(pairs, flat)
    want = neighbor.unpack_pairs(pairs[flat])
    assert all(np.array_equal(x, y) and np.array_equal(x, z) for x, y, z in zip(a, b, want))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), num_nodes=st.lists(st.integers(1, 40), min_size=1, max_size=3))
def test_typed_relabelling_keeps_dst_first_then_sorted_sources_on_both_paths(data, num_nodes):
    K = len(num_nodes)
    dsts = [np.array(data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n)), dtype=np.int64)
            for n in num_nodes]
    src_types = data.draw(st.lists(st.integers(0, K - 1), max_size=4))
    srcs = [np.array(data.draw(st.lists(st.integers(0, num_nodes[t] - 1), max_size=60)), dtype=np.int64)
            for t in src_types]
    results = []
    for on in (True, False):
        with forced_jit(on):
            results.append(relations.relabel_types(srcs, src_types, dsts, num_nodes))
    (new, local), (new_np, local_np) = results
    for t in range(K):
        np.testing.assert_array_equal(new[t], new_np[t])
        mine = np.concatenate([s for s, st_ in zip(srcs, src_types) if st_ == t] + [np.empty(0, np.int64)])
        # the new sources of type t: its sources that are no destination, sorted, each once
        np.testing.assert_array_equal(new[t], np.setdiff1d(mine, dsts[t]))
    for i, s in enumerate(srcs):
        np.testing.assert_array_equal(local[i], local_np[i])
        ids = np.concatenate([dsts[src_types[i]], new[src_types[i]]])
        np.testing.assert_array_equal(ids[local[i]], s)  # local ids point back at the same node
