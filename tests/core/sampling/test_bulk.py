"""Bulk sampling's ITS specification on plain arrays (``core/sampling/bulk/its.py``): the numpy
twin, the compiled loops (where numba is installed) and the kernels of ``kernels/bulk_sampling.py``
under the Triton interpreter give identical picks, which keep the spec's rules and follow the
weights.  (tests/sampling/test_bulk.py runs the DGL samplers built on it.)"""
import numpy as np
import pytest
from scipy import stats

from dgl_accel.core.jit import bulk_sampling as bulk_jit
from dgl_accel.core.jit import runtime
from dgl_accel.core.sampling.bulk import its as bulk_its
from dgl_accel.core.sampling.bulk.its import its_sample_triton

ALPHA = 1e-3


def _row_set(rng, R=24, weighted=False, hub=5000):
    deg = rng.integers(0, 40, R)
    deg[:3] = [hub, 17, 0]
    start = np.concatenate([[0], np.cumsum(deg)[:-1]])
    prefix = None
    if weighted:
        v = rng.random(int(deg.sum()))
        v[rng.random(v.size) < 0.2] = 0
        prefix = np.cumsum(bulk_its.quantise(np.concatenate([[0], np.cumsum(deg)]), v))
    return bulk_its.RowSet(start, deg, bulk_its.row_label(1, 1000, rng.integers(0, 1000, R)),
                           [5, 2**63 + 7, 99], np.array([0, 10, 20, R]), prefix)


# ------------------------------------------------------------------------------ ITS spec
@pytest.mark.interpreter
@pytest.mark.parametrize("weighted", [False, True])
def test_its_numpy_jit_and_triton_interpreter_identical(weighted):
    rng = np.random.default_rng(1 + weighted)
    rs = _row_set(rng, weighted=weighted)
    for s, rep in [(5, False), (12, False), (3, True)]:
        ref = bulk_its.its_sample_np(rs, s, rep)
        tri = its_sample_triton(rs, s, rep, "cpu")
        assert np.array_equal(ref[0], tri[0]) and np.array_equal(ref[1], tri[1])
        if runtime.enabled():
            jit = bulk_jit.its_sample(rs, s, rep, bulk_its.MAX_DRAWS)
            assert np.array_equal(ref[0], jit[0]) and np.array_equal(ref[1], jit[1])
        # spec rules: counts, picks inside the row, positive weight, distinct & ascending w/o replacement
        offs = np.concatenate([[0], np.cumsum(ref[1])])
        w = np.diff(rs.prefix, prepend=0.0) if weighted else None
        for i in range(rs.num_rows):
            p = ref[0][offs[i]:offs[i + 1]]
            assert ((p >= rs.start[i]) & (p < rs.start[i] + rs.deg[i])).all()
            if weighted:
                assert (w[p] > 0).all()
            if not rep:
                assert (np.diff(p) > 0).all()


def test_its_weighted_draws_follow_weights():
    # one row, weights 1:2:3:4 (exact after quantisation: max-normalised to 2^24 * k/4), with
    # replacement: 20000 draws over 500 keys must follow p = w / 10
    v = np.array([1.0, 2.0, 3.0, 4.0])
    prefix = np.cumsum(bulk_its.quantise(np.array([0, 4]), v))
    counts = np.zeros(4)
    for key in range(500):
        rs = bulk_its.RowSet(np.array([0]), np.array([4]), np.array([0]), [key], np.array([0, 1]), prefix)
        counts += np.bincount(bulk_its.its_sample_np(rs, 40, True)[0], minlength=4)
    assert stats.chisquare(counts, counts.sum() * v / v.sum()).pvalue > ALPHA
