"""The CPU loops of ``dgl_accel.core.jit``: compiled by numba where it is installed, plain Python
(the same source) where it is not, as in this lane.  Either way they compute what numpy and torch
compute: block relabelling, the aggregation's ``rows_spmm`` (parallel == serial) and the gradient
guard's row scan; with numba, neighbour choice is bit-identical to the numpy path.  (The DGL
samplers with and without the compiled loops: tests/sampling/test_compiled_loops.py.)"""
import math
import os
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.core.jit import aggregation, runtime
from dgl_accel.core.jit import neighbor as jit_neighbor
from dgl_accel.core.sampling.neighbor import choice
from dgl_accel.testing.cpu_loops import forced_jit


@st.composite
def csr_and_transits(draw):
    n = draw(st.integers(1, 60))
    # light rows (deg <= fanout: copied) and heavy rows (Floyd / modulo draws), hubs above 2^8
    degrees = draw(st.lists(st.one_of(st.integers(0, 6), st.integers(20, 70), st.integers(300, 400)),
                            min_size=n, max_size=n))
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(degrees)
    v = np.asarray(draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=40, unique=True)), dtype=np.int64)
    return indptr, v, n


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed: both sides would be the numpy path")
@settings(max_examples=40, deadline=None)
@given(case=csr_and_transits(), fanout=st.sampled_from([-1, 0, 1, 3, 4, 5, 10, 15, 33]), replace=st.booleans(),
       seed=st.integers(0, 2**64 - 1), step=st.integers(0, 5))
def test_choice_matches_numpy(case, fanout, replace, seed, step):
    indptr, v, n = case
    with forced_jit(True):
        pos, counts = choice.uniform_choice_flat(indptr, v, fanout, seed, step, n, replace)
    with forced_jit(False):
        ref_pos, ref_counts = choice.uniform_choice_flat(indptr, v, fanout, seed, step, n, replace)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(pos, ref_pos)
    if not replace:  # a k-subset per transit: no position twice
        offs = np.concatenate([[0], np.cumsum(counts)])
        for i in range(v.size):
            row = pos[offs[i]:offs[i + 1]]
            assert np.unique(row).size == row.size


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 500), data=st.data())
def test_relabel_matches_numpy(n, data):
    dst = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=50, unique=True)), dtype=np.int64)
    src = np.asarray(data.draw(st.lists(st.integers(0, n - 1), max_size=300)), dtype=np.int64)
    new, local = jit_neighbor.relabel(src, dst, n)
    expect_new = np.setdiff1d(np.unique(src), dst)
    np.testing.assert_array_equal(new, expect_new)
    ids = np.concatenate([dst, new])
    np.testing.assert_array_equal(ids[local], src)  # local ids point back at the sources


def test_disabled_by_environment(tmp_path):
    out = subprocess.run([sys.executable, "-c", "from dgl_accel.core.jit import runtime; print(runtime.enabled())"],
                         env={**os.environ, "DGL_ACCEL_NUMBA": "0"}, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.threads(2)  # the parallel twin splits work over numba's threads only with several
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 700), m=st.integers(0, 3000), feats=st.integers(1, 20), scaled=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31))
def test_rows_spmm_matches_dense_reference(n, m, feats, scaled, dtype, seed):
    """Every output row written (empty rows exactly 0), parallel == serial bit for bit, and equal
    to the dense product in float64 within rounding."""
    rng = np.random.default_rng(seed)
    row, col = rng.integers(0, n, m), rng.integers(0, n, m)
    order = np.argsort(row, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(row, minlength=n))
    indices = col[order].astype(np.int64)
    x = rng.standard_normal((n, feats)).astype(dtype)
    cs, rs = (rng.random(n).astype(dtype) + 0.5 for _ in range(2)) if scaled else (None, None)
    outs = []
    for parallel in (True, False):
        out = np.full((n, feats), np.nan, dtype=dtype)  # garbage: every row must be overwritten
        with mock.patch.object(runtime, "parallel_allowed", lambda p=parallel: p):
            aggregation.rows_spmm(indptr, indices, x, cs, rs, out)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])
    a = np.zeros((n, n))
    np.add.at(a, (row, col), 1.0)
    xs = x.astype(np.float64) * (1.0 if cs is None else cs[:, None])
    ref = (a @ xs) * (1.0 if rs is None else rs[:, None])
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(outs[0], ref, rtol=tol, atol=tol)
    assert np.all(outs[0][np.diff(indptr) == 0] == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_count_nonzero_rows_matches_torch(dtype):
    """The guard's compiled scan says what torch says, with -0.0 as zero and NaN, denormals and
    tiny values as nonzero, on the given rows only."""
    from dgl_accel.core.jit.aggregation import count_nonzero_rows

    rng = np.random.default_rng(0)
    x = np.zeros((500, 7), dtype=dtype)
    picks = rng.integers(0, 500, 60)
    specials = np.array([-0.0, np.nan, np.finfo(dtype).smallest_subnormal, -1e-30, 2.5], dtype=dtype)
    x[picks, rng.integers(0, 7, 60)] = specials[rng.integers(0, len(specials), 60)]
    rows = rng.permutation(500)[:300].astype(np.int64)
    t = torch.from_numpy(x)
    want = int((t[torch.from_numpy(rows)] != 0).any(1).sum())  # NaN != 0 is True; -0.0 != 0 is False
    assert count_nonzero_rows(x, rows) == want


@pytest.mark.threads(2)
@pytest.mark.parametrize("in_place", [False, True])
def test_bf16_row_scaling_rounds_as_torch(in_place):
    """``scale_rows_bf16`` on bf16 bits gives torch's widen, multiply, round-to-nearest-even bit for
    bit: on ties to both sides (every third row: powers of two times scales whose low 16 bits are
    0x8000, so each product lies halfway between two bf16 values), signed zeros, subnormals, inf
    and NaN; parallel == serial."""
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((300, 37)).astype(np.float32)).bfloat16()
    x[::3] = torch.from_numpy(np.ldexp(rng.choice([-1.0, 1.0], (100, 37)), rng.integers(-20, 20, (100, 37)))
                              .astype(np.float32)).bfloat16()
    specials = torch.tensor([0.0, -0.0, 1e-40, -1e-39, float("inf"), float("-inf"), float("nan"), 3.0e38])
    x[1:9, :8] = specials.bfloat16()[torch.randint(0, 8, (8, 8), generator=torch.Generator().manual_seed(0))]
    scale = torch.from_numpy(rng.random(300).astype(np.float32) * 4)
    scale[::3] = torch.from_numpy((scale[::3].numpy().view(np.uint32) & 0xFFFF0000 | 0x8000).view(np.float32))
    want = (x.float() * scale[:, None]).bfloat16()
    for parallel in (True, False):
        src = x.clone()
        out = src if in_place else torch.empty_like(x)
        with mock.patch.object(runtime, "parallel_allowed", lambda p=parallel: p):
            aggregation.scale_rows_bf16(runtime.bf16_bits(src), scale.numpy(), runtime.bf16_bits(out))
        nan = want.isnan()
        assert torch.equal(out.isnan(), nan)
        assert torch.equal(out.view(torch.int16)[~nan], want.view(torch.int16)[~nan])


@pytest.mark.threads(2)
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 400), m=st.integers(0, 3000), feats=st.integers(1, 20), wide=st.booleans(),
       dtype=st.sampled_from(["float32", "float64", "bfloat16"]), seed=st.integers(0, 2**31))
def test_weighted_rows_spmm_matches_dense_reference(n, m, feats, wide, dtype, seed):
    """GCN's weighted sum in one pass: every row written (empty rows 0), parallel == serial bit for
    bit, equal to the dense product in float64 within the accumulation's rounding; bf16 features
    are read as bits and summed in fp32 (the fp32 sum of the widened values)."""
    rng = np.random.default_rng(seed)
    row, col = rng.integers(0, n, m), rng.integers(0, n, m)
    order = np.argsort(row, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(row, minlength=n))
    indices, eids = col[order].astype(np.int64), order.astype(np.int64)
    x = torch.from_numpy(rng.standard_normal((n, feats))).to(getattr(torch, dtype))
    acc = torch.float64 if dtype == "float64" else torch.float32
    w = torch.from_numpy(rng.random((m, feats if wide else 1))).to(acc)
    xs = runtime.bf16_bits(x) if dtype == "bfloat16" else x.numpy()
    outs = []
    for parallel in (True, False):
        out = np.full((n, feats), np.nan, dtype=np.float64 if dtype == "float64" else np.float32)
        with mock.patch.object(runtime, "parallel_allowed", lambda p=parallel: p):
            aggregation.weighted_rows_spmm(indptr, indices, eids, xs, w.numpy(), out)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])
    a = np.zeros((n, n, feats))
    np.add.at(a, (row, col), w.double().numpy())
    ref = np.einsum("rcf,cf->rf", a, x.double().numpy())
    tol = 1e-4 if acc == torch.float32 else 1e-10
    np.testing.assert_allclose(outs[0], ref, rtol=tol, atol=tol * max(1, m // max(n, 1)))
    assert np.all(outs[0][np.diff(indptr) == 0] == 0)


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
def test_claim_parallel_in_a_child_of_a_serial_process():
    # A fresh process under DGL_ACCEL_NUMBA_PARALLEL=0 (serial twins only) forks a child: serial there
    # too until it claims the parallel twins, which then run; the child's own forked children are
    # serial again (the bench's provider processes: bench.harness.Isolated).
    code = """
import multiprocessing as mp, numpy as np
from dgl_accel.core.jit import aggregation, runtime
def grandchild(q):
    q.put(runtime.parallel_allowed())
def child(q):
    q.put(runtime.parallel_allowed())
    runtime.claim_parallel()
    q.put(runtime.parallel_allowed())
    out = np.empty((50, 4), np.float32)
    aggregation.rows_spmm(np.arange(51, dtype=np.int64), np.arange(50, dtype=np.int64),
                          np.ones((50, 4), np.float32), None, None, out)
    q.put(bool(out.sum() == 200))
    p = mp.get_context("fork").Process(target=grandchild, args=(q,)); p.start(); p.join()
if __name__ == "__main__":
    print(runtime.parallel_allowed())
    q = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=child, args=(q,)); p.start(); p.join()
    print(*(q.get() for _ in range(4)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "DGL_ACCEL_NUMBA_PARALLEL": "0"}).stdout.split("\n")
    assert out[0] == "False"
    assert out[1] == "False True True False", out


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
def test_slp_twins_pack_short_constant_loops_and_leave_numbas_setting(tmp_path):
    # Two twins of one loop (8 heads of 8 features, heads-minor: dgl_accel.core.jit.dot_heads' shape), one
    # compiled with the superword vectoriser: its code has packed multiply-adds, the other's none,
    # both compute the same, and numba's own setting is off again after the compile.
    code = """
import re, numpy as np, numba
from dgl_accel.core.jit import runtime
def make():
    H, D = 8, 8
    def dots(q, k, idx, s):
        for j in range(idx.shape[0]):
            u = idx[j]
            for h in range(H):
                s[j, h] = 0
            for d in range(D):
                for h in range(H):
                    s[j, h] += q[0, d, h] * k[u, d, h]
    return dots
rng = np.random.default_rng(0)
q, k = rng.standard_normal((1, 8, 8), dtype=np.float32), rng.standard_normal((50, 8, 8), dtype=np.float32)
idx = rng.integers(0, 50, 100)
packed, outs = [], []
for slp in (True, False):
    f = runtime.twins(make(), fastmath={"reassoc", "contract"}, noalias=True, slp=slp)[1]
    s = np.empty((100, 8), np.float32)
    f(q, k, idx, s)
    outs.append(s)
    asm = "\\n".join(f.inspect_asm().values())
    packed.append(len(re.findall(r"v?(fmadd\\w*ps|mulps|addps)", asm)))
print(numba.core.config.SLP_VECTORIZE, packed[0] > 0, packed[1] == 0, np.array_equal(outs[0], outs[1]))
"""
    script = tmp_path / "slp_twins.py"  # a file: numba caches nothing compiled from ``-c``
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "True", "True", "True"], run.stdout


@pytest.mark.skipif(not runtime.enabled(), reason="numba not installed")
def test_exp32_within_two_ulp_of_exp_and_its_limits():
    # exp32 (the vectorisable float32 exp of the attention loops): within 2 ulp of exp over the normal
    # range, 0 below it, inf above, NaN kept; float64 is math.exp itself.
    @runtime.njit
    def run(x, out):
        for i in range(x.shape[0]):
            out[i] = runtime.exp32(x[i])

    x = np.concatenate([np.linspace(-87.3, 88.7, 300_001, dtype=np.float32),
                        np.array([-88.0, -1e30, 88.8, 1e30, np.nan, -np.inf, np.inf, 0.0], dtype=np.float32)])
    out = np.empty_like(x)
    run(x, out)
    ref = np.exp(x[:-8].astype(np.float64))
    ulp = np.abs(out[:-8] - ref) / np.spacing(ref.astype(np.float32)).astype(np.float64)
    assert ulp.max() <= 2, (ulp.max(), x[ulp.argmax()])
    tail = out[-8:]
    assert list(tail[:4]) == [0, 0, np.inf, np.inf] and np.isnan(tail[4]) and list(tail[5:]) == [0, np.inf, 1]
    x64, out64 = x.astype(np.float64), np.empty(x.shape, np.float64)
    run(x64, out64)
    np.testing.assert_array_equal(out64, [math.exp(v) if v < 710 or v != v else math.inf for v in x64])  # libm's
