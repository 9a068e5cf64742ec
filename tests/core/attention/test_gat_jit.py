"""The compiled CPU loops of the fused GAT aggregation (``dgl_accel.core.jit.gat`` behind
``dgl_accel.core.attention.gat_paths``) against its vectorised torch path and the pure-torch
reference: the forward (online softmax, lse) and backward (one pass on one thread, two passes on several;
with and without the gradient of the returned attention), on graphs with empty rows, multi-edges, self-loops, a hub row and int32
ids, fp32 and fp64 (half types through fp32); fp64 gradcheck through the public op with the work
threshold lowered so the loops run on small graphs; the parallel and serial twins agree.  Without
numba (this lane's second interpreter) only the test that the torch path is then taken runs."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention import gat_paths as paths
from dgl_accel.core.attention.gat import gat_attention
from dgl_accel.core.attention.reference import ref_gat
from dgl_accel.core.jit import gat as loops
from dgl_accel.core.jit import runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit, loop_threads
from dgl_accel.testing.tolerances import assert_close

from .test_edge_softmax_jit import FLOATS, count_calls, edges, messy_graph, needs_numba, torch_path


def gat_inputs(g, heads, dim, dtype, seed, scale=1.0):
    """feat, el, er; ``scale`` spreads the scores so the online max moves and rescales often."""
    feat = tst.randn((g.num_src, heads, dim), dtype, seed)
    el = (tst.randn((g.num_src, heads), torch.float32, seed + 1) * scale).to(dtype)
    er = (tst.randn((g.num_dst, heads), torch.float32, seed + 2) * scale).to(dtype)
    return feat, el, er


# ------------------------------------------------------------------------------------------ fused GAT
@needs_numba
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("heads,dim", [(1, 1), (3, 5), (4, 32)])
@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("one_pass", [True, False], ids=["one-thread", "threads"])
def test_gat_loops_equal_native_and_reference(dtype, heads, dim, block, one_pass):
    g = messy_graph(heads + dim, num_src=60 if block else None, idtype=torch.int32 if block else torch.int64)
    src, dst = edges(g)
    feat, el, er = gat_inputs(g, heads, dim, dtype, seed=dim, scale=8.0)
    out, lse, a = paths.forward_compiled(g.csr("in"), feat, el, er, (0.2, None), True)
    n_out, n_lse, n_a = torch_path(paths.forward_native, src, dst, g.num_dst, feat, el, er, (0.2, None))
    assert out.dtype == dtype and lse.dtype == dtype and a.dtype == dtype
    assert_close(out, n_out, msg="out vs native")
    assert_close(a, n_a, msg="attention vs native")
    has = g.in_degrees() > 0
    assert_close(lse[has], n_lse[has], msg="lse vs native")
    assert torch.all(lse[~has] == float("-inf")) and torch.all(out[~has] == 0)  # as native: never read back
    assert_close(out, ref_gat(g.csr("in"), feat.double(), el.double(), er.double(), 0.2), dtype=dtype,
                 msg="out vs reference")
    assert paths.forward_compiled(g.csr("in"), feat, el, er, (0.2, None), False)[2] is None
    grad_out = tst.randn(tuple(out.shape), dtype, 11)
    grad_attn = tst.randn((g.num_edges, heads), dtype, 12)
    for ga in (None, grad_attn):
        with loop_threads(one_pass):  # the backward's one pass (scatters) or its two passes (one per CSR)
            got = paths.backward_compiled(g.csr("in"), g.csr("out"), feat, el, er, (0.2, None), lse, grad_out, ga)
        want = torch_path(paths.backward_native, src, dst, feat, el, er, (0.2, None), lse, grad_out, ga)
        for name, x, y in zip(("grad_feat", "grad_el", "grad_er"), got, want):
            assert x.dtype == y.dtype
            assert_close(x, y, msg=f"{name} vs native (grad_attn: {ga is not None})")


@needs_numba
@settings(max_examples=25, deadline=None)
@given(e=st.one_of(tst.edge_lists(max_nodes=24, max_edges=80), tst.block_edge_lists(max_dst=12, max_edges=80)),
       heads=st.integers(1, 4), dim=st.integers(1, 6), seed=tst.SEEDS, slope=st.sampled_from([0.0, 0.2, 1.0]),
       attn=st.booleans())
def test_gat_loops_equal_native_on_random_graphs(e, heads, dim, seed, slope, attn):
    g = (TensorGraph(e.src, e.dst, num_src=e.num_src, num_dst=e.num_dst) if e.bipartite
         else TensorGraph(e.src, e.dst, num_nodes=e.num_src))
    src, dst = edges(g)
    feat, el, er = gat_inputs(g, heads, dim, torch.float64, seed % 2**31, scale=5.0)
    out, lse, a = paths.forward_compiled(g.csr("in"), feat, el, er, (slope, None), True)
    n_out, n_lse, n_a = torch_path(paths.forward_native, src, dst, g.num_dst, feat, el, er, (slope, None))
    assert_close(out, n_out)
    assert_close(a, n_a)
    ga = tst.randn((g.num_edges, heads), torch.float64, 3) if attn else None
    grad_out = tst.randn(tuple(out.shape), torch.float64, 4)
    got = paths.backward_compiled(g.csr("in"), g.csr("out"), feat, el, er, (slope, None), lse, grad_out, ga)
    want = torch_path(paths.backward_native, src, dst, feat, el, er, (slope, None), n_lse, grad_out, ga)
    for x, y in zip(got, want):
        assert_close(x, y)


@needs_numba
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gat_loops_half_types_through_fp32(dtype):
    g = messy_graph(5)
    src, dst = edges(g)
    feat, el, er = gat_inputs(g, 2, 8, dtype, 13)
    out, lse, _ = paths.forward_compiled(g.csr("in"), feat, el, er, (0.2, None), False)
    assert out.dtype == dtype and lse.dtype == torch.float32
    n_out, n_lse, _ = torch_path(paths.forward_native, src, dst, g.num_dst, feat, el, er, (0.2, None))
    assert_close(out, n_out, msg="out vs native")
    grad_out = tst.randn(tuple(out.shape), dtype, 14)
    got = paths.backward_compiled(g.csr("in"), g.csr("out"), feat, el, er, (0.2, None), lse, grad_out, None)
    want = torch_path(paths.backward_native, src, dst, feat, el, er, (0.2, None), lse, grad_out, None)
    for x, y in zip(got, want):
        assert x.dtype == dtype
        assert_close(x, y)


@needs_numba
@pytest.mark.threads(2)  # the parallel twin splits rows over numba's threads only with several
def test_parallel_and_serial_twins_agree(monkeypatch):
    g = messy_graph(17, num_nodes=300, num_edges=4000)
    feat, el, er = gat_inputs(g, 2, 6, torch.float64, 15, scale=4.0)
    grad_out = tst.randn((g.num_dst, 2, 6), torch.float64, 16)

    def run():
        out, lse, a = paths.forward_compiled(g.csr("in"), feat, el, er, (0.2, None), True)
        grads = paths.backward_compiled(g.csr("in"), g.csr("out"), feat, el, er, (0.2, None), lse, grad_out, a)
        return (out, lse, a, *grads)

    with loop_threads(False):  # the two-pass backward (the one-pass form runs on one thread only)
        parallel = run()
        monkeypatch.setenv("DGL_ACCEL_NUMBA_PARALLEL", "0")
        assert not runtime.parallel_allowed()
        serial = run()
    for x, y in zip(parallel, serial):  # each row is computed by one task in one order: bit-identical
        assert torch.equal(x, y)


# ------------------------------------------------------------------------------------------ the public op
@needs_numba
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_public_op_gradcheck_fp64_on_the_loops(monkeypatch, idtype):
    calls = count_calls(monkeypatch, loops, ["gat_forward", "gat_attention", "gat_backward"])
    g = messy_graph(21, num_nodes=12, num_edges=30, idtype=idtype, hub=12)
    feat, el, er = (t.requires_grad_() for t in gat_inputs(g, 2, 3, torch.float64, 22, scale=2.0))
    with forced_jit(True), dgl_accel.use_backend("native"):
        assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3), (feat, el, er))
        assert torch.autograd.gradcheck(lambda *t: gat_attention(g, *t, 0.3, return_attention=True)[1],
                                        (feat, el, er))
        assert torch.autograd.gradcheck(lambda *t: sum(x.sum() for x in gat_attention(g, *t, 0.3,
                                                                                      return_attention=True)),
                                        (feat, el, er))
        out = gat_attention(g, feat, el, er, 0.3)
    assert all(calls.values()), calls
    assert_close(out, ref_gat(g.csr("in"), feat, el, er, 0.3))


@needs_numba
def test_public_op_on_empty_graphs_and_rows(monkeypatch):
    calls = count_calls(monkeypatch, loops, ["gat_forward", "gat_backward"])
    empty = TensorGraph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), num_nodes=4)
    feat, el, er = (t.requires_grad_() for t in gat_inputs(empty, 2, 3, torch.float32, 24))
    with forced_jit(True), dgl_accel.use_backend("native"):
        out = gat_attention(empty, feat, el, er)
        out.sum().backward()
    assert all(calls.values()), calls
    assert torch.all(out == 0)
    assert torch.all(feat.grad == 0) and torch.all(el.grad == 0) and torch.all(er.grad == 0)


@pytest.mark.parametrize("how", ["numba absent", "below the threshold"])
def test_torch_path_without_numba_or_below_the_threshold(monkeypatch, how):
    """Without numba (or below ``runtime.MIN_WORK`` edges) no loop runs: the vectorised torch path."""
    calls = count_calls(monkeypatch, loops, ["gat_forward", "gat_backward"])
    if how == "numba absent":
        monkeypatch.setattr(runtime, "AVAILABLE", False)
        monkeypatch.setattr(runtime, "MIN_WORK", 0)
    else:
        monkeypatch.setattr(runtime, "MIN_WORK", 2**62)
    g = messy_graph(25)
    feat, el, er = (t.requires_grad_() for t in gat_inputs(g, 2, 3, torch.float64, 26))
    with dgl_accel.use_backend("native"):
        out = gat_attention(g, feat, el, er)
        out.sum().backward()
    assert not any(calls.values()), calls
    assert_close(out, ref_gat(g.csr("in"), feat, el, er))
