"""The derived views of :class:`dgl_accel.core.aggregation.views.GraphViews` on plain tensors."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.aggregation.views import TensorGraph


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 9), m=st.integers(0, 40), seed=st.integers(0, 2**16), idtype=st.sampled_from([torch.int32,
                                                                                                       torch.int64]))
def test_out_by_in_position_names_the_same_edge(n, m, seed, idtype):
    gen = torch.Generator().manual_seed(seed)
    src, dst = (torch.randint(0, n, (m,), generator=gen).to(idtype) for _ in "sd")
    g = TensorGraph(src, dst, num_nodes=n)
    rows_in, rows_out, by_pos = g.csr("in"), g.csr("out"), g.out_by_in_position()
    assert torch.equal(by_pos.indptr, rows_out.indptr) and torch.equal(by_pos.indices, rows_out.indices)
    # out-CSR entry o is the edge rows_out.eids[o]; the in-CSR holds that edge at by_pos.eids[o]
    assert torch.equal(rows_in.eids.long()[by_pos.eids], rows_out.eids.long())
    assert sorted(by_pos.eids.tolist()) == list(range(m))
    assert g.out_by_in_position() is by_pos  # cached per graph

