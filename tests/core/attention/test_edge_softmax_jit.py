"""The compiled CPU loops of the edge softmax (``dgl_accel.core.jit.edge_softmax`` behind
``dgl_accel.core.attention.edge_softmax_paths``) against its vectorised torch path and the pure-torch
reference: forward and backward in both directions, on graphs with empty rows, multi-edges,
self-loops, a hub row and int32 ids, fp32 and fp64 (half types through fp32); fp64 gradcheck through
the public op with the work threshold lowered so the loops run on small graphs; the parallel and
serial twins agree.  Without numba (this lane's second interpreter) only the test that the torch path
is then taken runs.  The graphs and helpers serve ``test_gat_jit.py`` too."""
import pytest
import torch

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention import edge_softmax_paths as paths
from dgl_accel.core.attention.edge_softmax import edge_softmax
from dgl_accel.core.attention.reference import ref_edge_softmax
from dgl_accel.core.jit import edge_softmax as loops
from dgl_accel.core.jit import runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.cpu_loops import forced_jit
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

needs_numba = pytest.mark.skipif(not runtime.enabled(), reason="numba not installed: the torch path runs instead")
FLOATS = (torch.float32, torch.float64)


def messy_graph(seed: int, num_nodes: int = 40, num_edges: int = 500, idtype=torch.int64,
                num_src: int | None = None, hub: int = 150) -> TensorGraph:
    """Random edges into the lower half of the destinations (the upper half have no in-edges), a hub
    (destination 1 gets ``hub`` more), 10 repeated edges and 5 self-loops, shuffled edge ids; a block
    with ``num_src`` sources when given."""
    gen = torch.Generator().manual_seed(seed)
    ns = num_src or num_nodes
    src = torch.randint(0, ns, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes // 2, (num_edges,), generator=gen)
    src = torch.cat([src, torch.randint(0, ns, (hub,), generator=gen), src[:10], torch.arange(5)])
    dst = torch.cat([dst, torch.ones(hub, dtype=torch.int64), dst[:10], torch.arange(5)])
    perm = torch.randperm(src.numel(), generator=gen)
    src, dst = src[perm].to(idtype), dst[perm].to(idtype)
    if num_src is not None:
        return TensorGraph(src, dst, num_src=num_src, num_dst=num_nodes)
    return TensorGraph(src, dst, num_nodes=num_nodes)


def edges(g: TensorGraph):
    return tuple(t.long() for t in g.edges_by_id())


def torch_path(fn, *args):
    """``fn(*args)`` with the compiled loops off: the vectorised torch code of a native path."""
    with forced_jit(False):
        return fn(*args)

def count_calls(monkeypatch, loops, names):
    """Count the calls of ``loops.<name>`` (the compiled entry points of a ``core/jit`` module) from here on."""
    calls = dict.fromkeys(names, 0)

    def spy_on(name, fn):
        def spy(*args):
            calls[name] += 1
            return fn(*args)
        return spy

    for name in names:
        monkeypatch.setattr(loops, name, spy_on(name, getattr(loops, name)))
    return calls


# ------------------------------------------------------------------------------------------ edge softmax
@needs_numba
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("direction", ["in", "out"])
@pytest.mark.parametrize("heads", [1, 4])
def test_edge_softmax_loops_equal_native_and_reference(dtype, direction, heads):
    g = messy_graph(heads, idtype=torch.int32 if heads == 1 else torch.int64)
    rows = g.csr(direction)
    score = (tst.randn((g.num_edges, heads), torch.float32, 7) * 20).to(dtype)
    got = paths.forward_compiled(rows, score)
    assert got.dtype == dtype and got.shape == score.shape
    assert_close(got, torch_path(paths.forward_native, rows, score), msg="forward vs native")
    assert_close(got, ref_edge_softmax(rows, score.double()), dtype=dtype, msg="forward vs reference")
    grad = tst.randn((g.num_edges, heads), dtype, 8)
    assert_close(paths.backward_compiled(rows, got, grad),
                 torch_path(paths.backward_native, rows, got, grad), msg="backward vs native")


@needs_numba
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_edge_softmax_loops_half_types_through_fp32(dtype):
    g = messy_graph(3)
    rows = g.csr("in")
    score = tst.randn((g.num_edges, 2), dtype, 9)
    got = paths.forward_compiled(rows, score)
    assert got.dtype == dtype
    assert_matches_reference(got, ref_edge_softmax, rows, score)
    assert_close(got, torch_path(paths.forward_native, rows, score), msg="vs native")


@needs_numba
@pytest.mark.threads(2)  # the parallel twin splits rows over numba's threads only with several
def test_parallel_and_serial_twins_agree(monkeypatch):
    g = messy_graph(17, num_nodes=300, num_edges=4000)
    score = tst.randn((g.num_edges, 2), torch.float64, 17)

    def run():
        sm = paths.forward_compiled(g.csr("in"), score)
        return sm, paths.backward_compiled(g.csr("in"), sm, score)

    parallel = run()
    monkeypatch.setenv("DGL_ACCEL_NUMBA_PARALLEL", "0")
    assert not runtime.parallel_allowed()
    for x, y in zip(parallel, run()):  # each row is computed by one task in one order: bit-identical
        assert torch.equal(x, y)


# ------------------------------------------------------------------------------------------ the public op
@needs_numba
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_public_op_gradcheck_fp64_on_the_loops(monkeypatch, idtype):
    calls = count_calls(monkeypatch, loops, ["edge_softmax_forward", "edge_softmax_backward"])
    g = messy_graph(21, num_nodes=12, num_edges=30, idtype=idtype, hub=12)
    score = tst.randn((g.num_edges, 2), torch.float64, 23).requires_grad_()
    with forced_jit(True), dgl_accel.use_backend("native"):
        assert torch.autograd.gradcheck(lambda s: edge_softmax(g.csr("in"), s), (score,))
        assert torch.autograd.gradcheck(lambda s: edge_softmax(g.csr("out"), s), (score,))
    assert all(calls.values()), calls


@needs_numba
def test_public_op_on_empty_graphs_and_rows(monkeypatch):
    calls = count_calls(monkeypatch, loops, ["edge_softmax_forward"])
    empty = TensorGraph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), num_nodes=4)
    with forced_jit(True), dgl_accel.use_backend("native"):
        sm = edge_softmax(empty.csr("in"), torch.zeros(0, 2))
    assert all(calls.values()), calls
    assert sm.shape == (0, 2)


@pytest.mark.parametrize("how", ["numba absent", "below the threshold"])
def test_torch_path_without_numba_or_below_the_threshold(monkeypatch, how):
    """Without numba (or below ``runtime.MIN_WORK`` edges) no loop runs: the vectorised torch path."""
    calls = count_calls(monkeypatch, loops, ["edge_softmax_forward", "edge_softmax_backward"])
    if how == "numba absent":
        monkeypatch.setattr(runtime, "AVAILABLE", False)
        monkeypatch.setattr(runtime, "MIN_WORK", 0)
    else:
        monkeypatch.setattr(runtime, "MIN_WORK", 2**62)
    g = messy_graph(25)
    score = tst.randn((g.num_edges, 2), torch.float64, 27).requires_grad_()
    with dgl_accel.use_backend("native"):
        sm = edge_softmax(g.csr("in"), score)
        sm.pow(2).sum().backward()
    assert not any(calls.values()), calls
    assert_close(sm, ref_edge_softmax(g.csr("in"), score))
