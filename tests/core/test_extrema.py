"""The max/min aggregation of the core (``dgl_accel.core.extrema``) on plain tensors, without DGL:
values and args against the pure-torch loop (``extrema_reference``) on the native path and on
``kernels/extrema.py`` under the Triton interpreter, for copy_u, u_mul_e, u_add_e and copy_e; empty
rows, ties (the first in-CSR position wins, on both paths), rows longer than a kernel chunk,
int32/int64 ids, fp32/fp64/fp16/bf16; gradients against torch's own scatter_reduce autograd and
against the arg, fp64 gradcheck, and bad input."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dgl_accel
from dgl_accel.core import extrema as extrema_module
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.extrema import EXTREMA_OPS, aggregate_extrema, extrema_reference
from dgl_accel.core.jit import runtime as jit_runtime
from dgl_accel.testing import tensors as tst
from dgl_accel.testing.marks import PATHS, quick_first
from dgl_accel.testing.tolerances import assert_close

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
PATH_LABEL = {"native": "native-cpu", "triton": "triton-interpreter"}
SMALL = st.one_of(tst.edge_lists(max_nodes=20, max_edges=60), tst.block_edge_lists(max_dst=10, max_edges=60))


def cases(feats: list) -> dict:
    """The arguments of this file's hypothesis tests over every op, with ``feats`` feature shapes."""
    return dict(e=SMALL, op=st.sampled_from(EXTREMA_OPS), reduce=st.sampled_from(["max", "min"]),
                feat=st.sampled_from(feats), w_shape=st.sampled_from(["E", "E1", "EF"]),
                dtype=st.sampled_from(DTYPES), integer=st.booleans(), seed=tst.SEEDS)


def operands(g: TensorGraph, op: str, feat: tuple, w_shape: str, dtype, seed: int, integer: bool = False):
    """(ufeat, efeat) for ``op``; ``integer=True`` draws small integers (many exact ties)."""
    def draw(shape, s):
        if integer:
            gen = torch.Generator().manual_seed(s)
            return torch.randint(-2, 3, shape, generator=gen).to(dtype)
        return tst.randn(shape, dtype, s)
    if op == "copy_e":
        return None, draw((g.num_edges,) + feat, seed)
    ufeat = draw((g.num_src,) + feat, seed)
    if op == "copy_u":
        return ufeat, None
    e_shape = {"E": (g.num_edges,), "E1": (g.num_edges, 1), "EF": (g.num_edges,) + feat}[w_shape]
    return ufeat, draw(e_shape, seed + 1)


def torch_oracle(g: TensorGraph, op: str, reduce: str, ufeat, efeat):
    """The aggregation by torch's scatter_reduce (include_self=False: empty rows stay 0), with its own
    autograd (ties split the gradient evenly: compare gradients only on tie-free inputs)."""
    src, dst = (t.long() for t in g.edges_by_id())
    if op == "copy_e":
        m = efeat
    else:
        m = ufeat[src]
        if efeat is not None:
            w = efeat.reshape((g.num_edges,) + (1,) * (m.dim() - 1)) if math.prod(efeat.shape[1:]) == 1 else efeat
            m = m * w if op == "u_mul_e" else m + w
    out = torch.zeros((g.num_dst,) + m.shape[1:], dtype=m.dtype)
    index = dst.reshape((-1,) + (1,) * (m.dim() - 1)).expand_as(m)
    return out.scatter_reduce(0, index, m, "amax" if reduce == "max" else "amin", include_self=False)


def run(path, g, op, reduce, ufeat, efeat, **kw):
    with dgl_accel.use_backend(path):
        return aggregate_extrema(g, op, reduce, ufeat, efeat, **kw)


# ------------------------------------------------------------------------------------------ forward
@settings(max_examples=15)
@given(e=SMALL, op=st.sampled_from(EXTREMA_OPS), reduce=st.sampled_from(["max", "min"]),
       feat=st.sampled_from([(1,), (5,), (3, 2), (40,)]), w_shape=st.sampled_from(["E", "E1", "EF"]),
       dtype=st.sampled_from(DTYPES), integer=st.booleans(), seed=tst.SEEDS)
@pytest.mark.interpreter
def test_both_paths_equal_the_reference_exactly(e, op, reduce, feat, w_shape, dtype, integer, seed):
    # The result is one of the messages, computed in fp32 (fp64) on every path: values and args are
    # bit-identical, ties included (integer features make many), for every dtype.
    g = tst.tensor_graph(e)
    ufeat, efeat = operands(g, op, feat, w_shape, dtype, seed % 2**31, integer)
    ref_out, ref_arg = extrema_reference(g.csr("in"), op, reduce, ufeat, efeat)
    for path in ("native", "triton"):
        dgl_accel.reset_stats()
        out, arg = run(path, g, op, reduce, ufeat, efeat, return_arg=True)
        assert out.dtype == dtype and out.shape == (g.num_dst,) + feat and arg.dtype == torch.int64
        assert torch.equal(out, ref_out), path
        assert torch.equal(arg, ref_arg), path
        assert dgl_accel.stats() == {f"{op}_{reduce}": {PATH_LABEL[path]: 1}}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("idtype", tst.IDTYPES)
def test_empty_rows_fill_and_arg_minus_one(path, idtype):
    # node 0 and node 3 receive nothing; fill is 0 by default (update_all's), any value on request
    g = TensorGraph(torch.tensor([0, 1, 2, 0], dtype=idtype), torch.tensor([1, 1, 2, 2], dtype=idtype), num_nodes=4)
    x = torch.tensor([[1.0, -4.0], [3.0, -5.0], [2.0, 8.0], [9.0, 9.0]])
    out, arg = run(path, g, "copy_u", "max", x, None, return_arg=True)
    assert out.tolist() == [[0.0, 0.0], [3.0, -4.0], [2.0, 8.0], [0.0, 0.0]]
    assert arg.tolist() == [[-1, -1], [1, 0], [2, 2], [-1, -1]]  # in-CSR positions: row 1 holds 0, 1; row 2 holds 2, 3
    out = run(path, g, "copy_u", "min", x, None, fill=float("inf"))
    assert out.tolist() == [[float("inf")] * 2, [1.0, -5.0], [1.0, -4.0], [float("inf")] * 2]
    # a graph without edges, and rows whose every message is -inf (a real arg, not -1)
    assert run(path, TensorGraph(torch.tensor([], dtype=idtype), torch.tensor([], dtype=idtype), num_nodes=3),
               "copy_u", "max", torch.ones(3, 2), None).tolist() == [[0.0, 0.0]] * 3
    out, arg = run(path, g, "copy_u", "max", torch.full((4, 1), float("-inf")), None, return_arg=True)
    assert out.flatten().tolist() == [0.0, float("-inf"), float("-inf"), 0.0] and arg.flatten().tolist() == [-1, 0, 2, -1]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_ties_go_to_the_first_csr_position_across_chunks(path, reduce):
    # 100 in-edges into node 0 (several kernel chunks), all carrying the same value but for one
    # planted extremum near the end: the arg is the first position of the extremum.
    g = TensorGraph(torch.arange(100), torch.zeros(100, dtype=torch.int64), num_src=100, num_dst=1)
    x = torch.ones(100, 3)
    x[[70, 90], 1] = 5.0 if reduce == "max" else -5.0
    out, arg = run(path, g, "copy_u", reduce, x, None, return_arg=True)
    assert out.tolist() == [[1.0, 5.0 if reduce == "max" else -5.0, 1.0]]
    assert arg.tolist() == [[0, 70, 0]]
    x.requires_grad_(True)
    run(path, g, "copy_u", reduce, x, None).backward(torch.tensor([[1.0, 2.0, 3.0]]))
    expected = torch.zeros(100, 3)
    expected[0, 0], expected[70, 1], expected[0, 2] = 1.0, 2.0, 3.0
    assert torch.equal(x.grad, expected)
    # the backward is torch code (or its compiled twin) on both paths
    assert dgl_accel.stats() == {f"copy_u_{reduce}": {PATH_LABEL[path]: 2}, f"copy_u_{reduce}_backward": {"native-cpu": 1}}


# ------------------------------------------------------------------------------------------ backward
def arg_oracle(g: TensorGraph, op: str, ufeat, efeat, arg):
    """Each result's message re-read at the given arg, differentiably (torch autograd of a gather):
    the gradient DGL's arg-based backward gives, whatever the ties."""
    rows = g.csr("in")
    src = efeat if op == "copy_e" else ufeat
    x = src.reshape(src.shape[0], math.prod(src.shape[1:]))
    k = arg.reshape(arg.shape[0], math.prod(arg.shape[1:]))
    if not rows.num_edges or not k.numel():
        return torch.zeros(arg.shape, dtype=src.dtype) + 0 * src.sum()
    valid, k = k >= 0, k.clamp(min=0)
    m = x.gather(0, (rows.eids if op == "copy_e" else rows.indices).long()[k])
    if op in ("u_mul_e", "u_add_e"):
        w = efeat.reshape(efeat.shape[0], math.prod(efeat.shape[1:]))
        eid = rows.eids.long()[k]
        wk = w[:, 0][eid] if w.shape[1] == 1 else w.gather(0, eid)
        m = m * wk if op == "u_mul_e" else m + wk
    return torch.where(valid, m, 0).reshape(arg.shape)


@settings(max_examples=12)
@given(e=SMALL, op=st.sampled_from(EXTREMA_OPS), reduce=st.sampled_from(["max", "min"]),
       feat=st.sampled_from([(1,), (4,), (2, 3)]), w_shape=st.sampled_from(["E", "E1", "EF"]),
       dtype=st.sampled_from(DTYPES), integer=st.booleans(), path=st.sampled_from(["native", "triton"]),
       seed=tst.SEEDS)
@pytest.mark.interpreter
def test_gradients_follow_the_arg(e, op, reduce, feat, w_shape, dtype, integer, path, seed):
    g = tst.tensor_graph(e)
    ufeat, efeat = operands(g, op, feat, w_shape, dtype, seed % 2**31, integer)
    inputs = [t.requires_grad_(True) for t in (ufeat, efeat) if t is not None]
    out, arg = run(path, g, op, reduce, ufeat, efeat, return_arg=True)
    grad_out = tst.randn(out.shape, dtype, seed % 2**31 + 7)
    grads = torch.autograd.grad(out, inputs, grad_out, allow_unused=True)
    # the oracle in fp64 on the same (exactly representable) values; values also against torch's
    # scatter_reduce, which picks no arg at all
    leaves = [t.detach().double().requires_grad_(True) for t in inputs]
    u64 = None if op == "copy_e" else leaves[0]
    e64 = leaves[-1] if efeat is not None else None
    assert_close(out, torch_oracle(g, op, reduce, u64, e64), dtype, msg="out")
    expected = torch.autograd.grad(arg_oracle(g, op, u64, e64, arg), leaves, grad_out.double(), allow_unused=True)
    for name, got, want, t in zip(("first", "second"), grads, expected, inputs):
        want = torch.zeros_like(t, dtype=torch.float64) if want is None else want
        got = torch.zeros_like(t) if got is None else got
        assert got.dtype == t.dtype and got.shape == t.shape
        assert_close(got, want, dtype, msg=f"grad of the {name} operand")


# copy_u quick; the other ops (u_mul_e's gradgradcheck: 3 s on 2 cores) and the interpreter (4 s) slow
@pytest.mark.parametrize("path,op", quick_first([("native", op) for op in EXTREMA_OPS]
                                                       + [pytest.param("triton", "u_mul_e", marks=pytest.mark.interpreter)]))
def test_fp64_gradcheck_and_gradgradcheck(path, op):
    # the backward is one torch code on both paths (and the forwards agree bit for bit): the
    # interpreter runs one op, gradcheck only (each check runs the forward tens of times)
    gen = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, 5, (12,), generator=gen), torch.randint(0, 4, (12,), generator=gen)
    g = TensorGraph(src, dst, num_src=5, num_dst=6)  # nodes 4, 5 receive nothing
    ufeat = None if op == "copy_e" else torch.randn(5, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    efeat = None if op == "copy_u" else torch.randn(12, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    args = [t for t in (ufeat, efeat) if t is not None]

    def f(*ts):
        it = iter(ts)
        u = None if ufeat is None else next(it)
        w = None if efeat is None else next(it)
        return run(path, g, op, "max", u, w) + run(path, g, op, "min", u, w)

    assert torch.autograd.gradcheck(f, args)
    assert path == "triton" or torch.autograd.gradgradcheck(f, args)


@pytest.mark.parametrize("path", PATHS)
def test_backward_keeps_the_arg_and_no_edge_sized_tensor(path):
    g = TensorGraph(torch.randint(0, 50, (400,)), torch.randint(0, 50, (400,)), num_nodes=50)
    x, w = torch.randn(50, 8, requires_grad=True), torch.randn(400, 8, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        run(path, g, "u_mul_e", "max", x, w)
    # the arg [50, 8] and the inputs themselves (u_mul_e's gradient needs the other operand)
    new = [t for t in saved if t.data_ptr() not in (x.data_ptr(), w.data_ptr())]
    assert [tuple(t.shape) for t in new] == [(50, 8)] and new[0].dtype == torch.int64
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        run(path, g, "copy_u", "max", x, None)
    assert [tuple(t.shape) for t in saved] == [(50, 8)]


@pytest.mark.skipif(not jit_runtime.enabled(), reason="the compiled loops need numba (absent in the core lane)")
@settings(max_examples=12)
@given(**cases([(1,), (3,), (2, 2)]))
def test_compiled_loops_equal_the_torch_path(e, op, reduce, feat, w_shape, dtype, integer, seed):
    # the numba forward is bit-identical to the reference (values and args, ties included); its
    # serial backward equals the torch scatter within the tolerance (another summation order)
    g = tst.tensor_graph(e)
    ufeat, efeat = operands(g, op, feat, w_shape, dtype, seed % 2**31, integer)
    inputs = [t.requires_grad_(True) for t in (ufeat, efeat) if t is not None]
    results = {}
    for min_work in (0, 2**62):  # compiled, then the vectorised torch code
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(jit_runtime, "MIN_WORK", min_work)
            out, arg = run("native", g, op, reduce, ufeat, efeat, return_arg=True)
            grads = torch.autograd.grad(out, inputs, torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(dtype))
        results[min_work] = (out, arg, grads)
    ref_out, ref_arg = extrema_reference(g.csr("in"), op, reduce, ufeat.detach() if ufeat is not None else None,
                                         efeat.detach() if efeat is not None else None)
    (out, arg, grads), (_, _, torch_grads) = results[0], results[2**62]
    assert torch.equal(out, ref_out) and torch.equal(arg, ref_arg)
    for got, want in zip(grads, torch_grads):
        assert got.dtype == want.dtype
        assert_close(got, want.double(), dtype)


@settings(max_examples=12)
@given(**cases([(1,), (4,), (2, 3)]))
def test_without_gradients_the_values_alone_equal_the_reference(e, op, reduce, feat, w_shape, dtype, integer, seed):
    # no input needs a gradient and no arg is asked for: the native paths skip the positions (the
    # compiled values-only loop where numba is there, one scatter in torch), with the same values
    g = tst.tensor_graph(e)
    ufeat, efeat = operands(g, op, feat, w_shape, dtype, seed % 2**31, integer)
    ref_out, _ = extrema_reference(g.csr("in"), op, reduce, ufeat, efeat)
    for min_work in (0, 2**62):  # compiled (where numba is), then the vectorised torch code
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(jit_runtime, "MIN_WORK", min_work)
            mp.setattr(extrema_module.loops, "extrema_rows", positions_not_wanted)
            out = run("native", g, op, reduce, ufeat, efeat, fill=0.5)
            assert torch.equal(out, torch.where(ref_arg_is_empty(g, feat), torch.tensor(0.5, dtype=dtype), ref_out))
            assert not out.requires_grad


def positions_not_wanted(*args):
    raise AssertionError("the positions pass ran where no gradient or arg was wanted")


def ref_arg_is_empty(g, feat):
    """[num_dst, *feat] True on the rows without in-edges (where ``fill`` goes)."""
    indptr = g.csr("in").indptr
    return (indptr[1:] == indptr[:-1]).reshape((-1,) + (1,) * len(feat)).expand((g.num_dst,) + feat)


# ------------------------------------------------------------------------------------------ bad input
def test_bad_input_raises_before_any_kernel():
    g = TensorGraph(torch.tensor([0, 1]), torch.tensor([1, 2]), num_nodes=3)
    x, w = torch.ones(3, 2), torch.ones(2, 2)
    cases = [
        ((g, "copy_u", "sum", x, None), "expected reduce 'max' or 'min'"),
        ((g, "u_div_e", "max", x, w), "expected op to be one of"),
        ((g.csr("in"), "copy_u", "max", x, None), "expected views to be"),
        ((g, "copy_u", "max", torch.ones(3, 2, dtype=torch.int64), None), "float16, bfloat16 or float64 tensor"),
        ((g, "copy_u", "max", torch.ones(4, 2), None), "expected ufeat with 3 rows"),
        ((g, "copy_u", "max", x, w), "expected efeat=None for op='copy_u'"),
        ((g, "u_mul_e", "max", x, None), "expected efeat to be a float32"),
        ((g, "u_mul_e", "max", x, torch.ones(3, 2)), "expected efeat with 2 rows"),
        ((g, "u_mul_e", "max", x, torch.ones(2, 3)), r"expected efeat of shape \[E\], \[E, 1\] or \[E, 2\]"),
        ((g, "u_add_e", "max", x, w.double()), "expected efeat of ufeat's dtype"),
        ((g, "copy_e", "min", x, w), "expected ufeat=None for op='copy_e'"),
        ((g, "copy_e", "min", None, torch.ones(3)), "expected efeat with 2 rows"),
        ((g, "copy_u", "max", torch.ones(3, 2, device="meta"), None), "on the graph's device"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match) as err:
            aggregate_extrema(*args)
        assert "Fix:" in str(err.value), match
    with pytest.raises(ValueError, match="expected fill to be a real number"):
        aggregate_extrema(g, "copy_u", "max", x, fill=True)
    assert dgl_accel.stats() == {}  # nothing ran


@pytest.mark.skipif(not jit_runtime.enabled(), reason="numba not installed (the torch path runs)")
@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("degree", [1, 2, 3, 4, 5, 6, 7, 8, 100])
def test_compiled_loop_keeps_ties_at_the_first_position(monkeypatch, reduce, degree):
    # The loop merges entries three at a time with strict selects; integer features make ties common,
    # and every degree mod 3 reaches its one- and two-entry tails.  MIN_WORK 0: the compiled loop runs.
    monkeypatch.setattr(jit_runtime, "MIN_WORK", 0)
    g = TensorGraph(torch.arange(degree), torch.zeros(degree, dtype=torch.int64), num_src=degree, num_dst=1)
    gen = torch.Generator().manual_seed(degree)
    for _ in range(20):
        x = torch.randint(-1, 2, (degree, 33), generator=gen).float()
        with dgl_accel.use_backend("native"):
            out, arg = aggregate_extrema(g, "copy_u", reduce, x, return_arg=True)
        ref_out, ref_arg = extrema_reference(g.csr("in"), "copy_u", reduce, x)
        assert torch.equal(out, ref_out) and torch.equal(arg, ref_arg)
