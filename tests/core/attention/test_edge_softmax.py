"""The edge softmax of the core (``dgl_accel.core.attention.edge_softmax``) on plain tensors, without
DGL: over the rows of CSR views in both directions, against the pure-torch reference
(``core/attention/reference.py``), forward and backward, on the native CPU path and on the kernels of
``kernels/edge_softmax.py`` under the Triton interpreter; multi-head, empty rows, rows longer than a
kernel chunk, int32/int64 ids, fp32/fp64/fp16/bf16 (the flash-attention rule), fp64 gradcheck and
gradgradcheck, and bad input.  ``star`` and the path constants serve ``test_gat.py`` too."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention.edge_softmax import edge_softmax
from dgl_accel.core.attention.reference import ref_edge_softmax
from dgl_accel.core.csr import Structure
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
PATHS = ("native", "triton")
# For a test looping over the paths: the native path alone quick, both (the interpreter too) slow.
QUICK_NATIVE_PATHS = quick_first([pytest.param(["native"], id="native"),
                                         pytest.param(list(PATHS), marks=pytest.mark.interpreter, id="native+triton")])
PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
SMALL = st.one_of(tst.edge_lists(max_nodes=24, max_edges=80), tst.block_edge_lists(max_dst=12, max_edges=80))


def star(degree: int, idtype=torch.int64, extra: int = 3) -> TensorGraph:
    """Node 0 receives ``degree`` edges (rows longer than any kernel chunk); node ``extra`` + 1 receives none."""
    gen = torch.Generator().manual_seed(degree)
    src = torch.randint(0, degree, (degree,), generator=gen)
    dst = torch.cat([torch.zeros(degree - extra, dtype=torch.int64), torch.arange(1, extra + 1)])
    perm = torch.randperm(degree, generator=gen)
    return TensorGraph(src[perm].to(idtype), dst[perm].to(idtype), num_nodes=degree + 2)


# ------------------------------------------------------------------------------------------ edge softmax
@given(e=SMALL, heads=st.integers(1, 10), shape=st.sampled_from(["E", "EH", "EH1"]), dtype=st.sampled_from(DTYPES),
       direction=st.sampled_from(["in", "out"]), seed=tst.SEEDS, scale=st.sampled_from([1.0, 30.0]))
@pytest.mark.interpreter
def test_edge_softmax_matches_reference(e, heads, shape, dtype, direction, seed, scale):
    rows = tst.tensor_graph(e).csr(direction)  # "in": DGL's norm_by='dst', "out": norm_by='src'
    heads = 1 if shape == "E" else heads
    dims = {"E": (), "EH": (heads,), "EH1": (heads, 1)}[shape]
    score = (tst.randn((e.src.numel(),) + dims, torch.float32, seed) * scale).to(dtype)
    for name in PATHS:
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            out = edge_softmax(rows, score)
        assert dgl_accel.stats()["edge_softmax"] == {PATH_LABEL[name]: 1}
        assert out.shape == score.shape and out.dtype == score.dtype and not out.isnan().any()
        assert_matches_reference(out, ref_edge_softmax, rows, score, msg=f"{name} {dtype} {direction}")
        if e.src.numel():  # every row with entries sums to one
            sums = torch.zeros(rows.num_rows, heads, dtype=torch.float64).index_add_(
                0, torch.tensor(_rows_by_eid(rows)), out.double().reshape(-1, heads))
            has = (rows.indptr[1:] > rows.indptr[:-1])
            assert_close(sums[has], torch.ones_like(sums[has]), dtype=dtype)
            assert torch.all(sums[~has] == 0)


def _rows_by_eid(rows: Structure) -> list:
    out = [0] * rows.num_edges
    for r in range(rows.num_rows):
        for k in range(int(rows.indptr[r]), int(rows.indptr[r + 1])):
            out[int(rows.eids[k])] = r
    return out


@pytest.mark.interpreter
@given(e=SMALL, heads=st.integers(1, 4), dtype=st.sampled_from((torch.float32, torch.float64)), seed=tst.SEEDS)
def test_edge_softmax_backward_matches_reference(e, heads, dtype, seed):
    rows = tst.tensor_graph(e).csr("in")
    score = tst.randn((e.src.numel(), heads), dtype, seed)
    grad = tst.randn((e.src.numel(), heads), dtype, seed + 1)
    leaf = score.clone().requires_grad_()
    (expected,) = torch.autograd.grad(ref_edge_softmax(rows, leaf), leaf, grad)
    for name in PATHS:
        leaf = score.clone().requires_grad_()
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            (got,) = torch.autograd.grad(edge_softmax(rows, leaf), leaf, grad)
        assert dgl_accel.stats()["edge_softmax_backward"] == {PATH_LABEL[name]: 1}
        assert_close(got, expected, msg=f"{name} grad {dtype}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_edge_softmax_half_gradients_follow_the_reference_rule(path, dtype):
    rows = star(150).csr("in")
    score = (tst.randn((150, 3), torch.float32, 1) * 4).to(dtype)
    grad = tst.randn((150, 3), dtype, 2)

    def grads(s, g):
        leaf = s.clone().requires_grad_()
        out = edge_softmax(rows, leaf) if s.dtype == dtype else ref_edge_softmax(rows, leaf)
        return torch.autograd.grad(out, leaf, g)[0]

    def reference(s, g):
        leaf = s.clone().requires_grad_()
        return torch.autograd.grad(ref_edge_softmax(rows, leaf), leaf, g)[0]

    assert_matches_reference(grads(score, grad), reference, score, grad, msg=f"{path} {dtype}")


def test_edge_softmax_long_rows_online_max(path):
    # Row 0 has 147 entries (several chunks) with scores rising along the row: the running max
    # changes in every chunk, so the rescaling of the running sum is exercised.
    g = star(150)
    rows = g.csr("in")
    score = torch.zeros(150, 2, dtype=torch.float64)
    score[rows.eids.long()] = torch.linspace(-60, 60, 150, dtype=torch.float64)[:, None] * torch.tensor([1.0, -1.0],
                                                                                                       dtype=torch.float64)
    assert_close(edge_softmax(rows, score), ref_edge_softmax(rows, score))
    assert_close(edge_softmax(rows, score.float()), ref_edge_softmax(rows, score), dtype=torch.float32)


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_edge_softmax_gradcheck_fp64_and_idtypes(path, idtype):
    g = TensorGraph(torch.tensor([0, 0, 1, 2, 3, 3, 4, 4, 1], dtype=idtype),
                    torch.tensor([1, 2, 2, 0, 0, 3, 2, 2, 3], dtype=idtype), num_nodes=6)  # node 5: no edges
    assert g.csr("in").eids.dtype == idtype
    score = torch.randn(9, 2, dtype=torch.float64, requires_grad=True)
    fast = path == "triton"  # the interpreter: one random direction instead of every input
    assert torch.autograd.gradcheck(lambda s: edge_softmax(g.csr("in"), s), (score,), fast_mode=fast)
    assert torch.autograd.gradcheck(lambda s: edge_softmax(g.csr("out"), s), (score,), fast_mode=fast)
    assert torch.autograd.gradgradcheck(lambda s: edge_softmax(g.csr("in"), s), (score,), fast_mode=True)
    assert dgl_accel.stats()["edge_softmax"].get(PATH_LABEL[path], 0) > 0


def test_edge_softmax_empty_graph_and_rows(path):
    g = TensorGraph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), num_nodes=4)
    out = edge_softmax(g.csr("in"), torch.zeros(0, 3, requires_grad=True))
    assert out.shape == (0, 3)
    out.sum().backward()


# ------------------------------------------------------------------------------------------ bad input
def _g():
    return TensorGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 1]), num_nodes=3)


@pytest.mark.parametrize("call, message", [
    (lambda: edge_softmax("csr", torch.ones(3)), "expected rows to be a dgl_accel.core.csr.Structure"),
    (lambda: edge_softmax(_g().csr("in"), torch.ones(4, 2)), r"expected score of shape \[E, ...\] with E = 3"),
    (lambda: edge_softmax(_g().csr("in"), torch.ones(3, dtype=torch.int64)), "expected score to be a float32"),
    (lambda: edge_softmax(_g().csr("in"), torch.ones(3, device="meta")), "expected score on the graph's device"),
])
def test_bad_input_is_rejected_before_any_kernel(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "Fix:" in str(info.value)
    assert dgl_accel.stats() == {}
