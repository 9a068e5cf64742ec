"""GraphSAINT frontier sampling on CSR views without DGL (``core/sampling/saint_frontier*.py``): the
dashboard pop follows the degree law; the scalar and the vectorised CPU loops and the kernel of
``kernels/saint_frontier.py`` under the Triton interpreter give identical, valid samples.
(tests/sampling/test_frontier.py tests the distribution through the DGL sampler.)"""
import numpy as np
import pytest
import torch
from scipy import stats

import dgl_accel
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.sampling.saint.frontier import frontier_sample
from dgl_accel.core.sampling.saint.frontier_cpu import probe_dashboard
from dgl_accel.testing.cpu_loops import both_frontier_loops

ALPHA = 1e-3


def random_graph(n=30, e=70, seed=0):
    """(out-CSR, src, dst) of a connected undirected random graph (a ring plus random edges)."""
    gen = torch.Generator().manual_seed(seed)
    s, d = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    ring = torch.arange(n)
    s, d = torch.cat([s, ring]), torch.cat([d, (ring + 1) % n])
    src, dst = torch.cat([s, d]), torch.cat([d, s])
    return TensorGraph(src, dst, num_nodes=n).csr("out"), src, dst


def assert_valid(samples, src, dst, num_nodes, m, n):
    """Sorted unique ids, n of them (the graph is connected), and at most m (the roots) not reached
    over an edge from inside the sample."""
    for x in samples:
        assert x.dtype == torch.int64 and torch.equal(x, torch.unique(x)) and x.numel() == n
        inside = torch.zeros(num_nodes, dtype=torch.bool)
        inside[x] = True
        reached = torch.zeros(num_nodes, dtype=torch.bool)
        reached[dst[inside[src]]] = True
        assert int((inside & ~reached).sum()) <= m


@pytest.mark.interpreter
@pytest.mark.parametrize("kw", [dict(), dict(eta=1.05, degree_clip=3), dict(eta=1.3, max_steps=9)])
def test_triton_kernel_matches_cpu_loops(monkeypatch, kw):
    # The kernel probes the same positions in the same order and takes the same Philox words as
    # both CPU loops: identical samples.  eta 1.05 forces frequent cleanups and capacity doubling.
    csr, src, dst = random_graph(24, 40, seed=4)
    cpu = both_frontier_loops(frontier_sample, monkeypatch, csr, 3, 10, num_instances=3, seed=7, **kw)
    with dgl_accel.use_backend("triton"):
        tri = frontier_sample(csr, 3, 10, num_instances=3, seed=7, **kw)
    assert dgl_accel.stats()["frontier_sample"] == {"native-cpu": 2, "triton-interpreter": 1}
    assert all(torch.equal(x, y) for x, y in zip(cpu, tri))
    if "max_steps" not in kw:
        assert_valid(cpu, src, dst, 24, 3, 10)


def test_same_seed_same_output_and_instance_independence():
    csr, src, dst = random_graph()
    a = frontier_sample(csr, 3, 12, num_instances=6, seed=21)
    assert all(torch.equal(x, y) for x, y in zip(a, frontier_sample(csr, 3, 12, num_instances=6, seed=21)))
    assert all(torch.equal(x, y) for x, y in zip(a[:2], frontier_sample(csr, 3, 12, num_instances=2, seed=21)))
    assert any(not torch.equal(x, y) for x, y in zip(a, frontier_sample(csr, 3, 12, num_instances=6, seed=22)))
    assert_valid(a, src, dst, 30, 3, 12)


def test_dashboard_pop_proportional_to_pins():
    # Slot s owns deg[s] live pins, interleaved with stale pins (old tags); 20000 independent
    # pops (one per row of identical dashboards) follow deg / sum(deg): chi-square GOF.
    deg = np.array([1, 2, 3, 5, 9, 0, 4])
    m = deg.size
    ftag = np.full(m, 7, dtype=np.int64)
    live = np.repeat(np.arange(m), deg) | (7 << 20)
    stale = np.arange(40) % m | (3 << 20)  # popped-before pins of every slot
    row = np.concatenate([stale[:20], live, stale[20:]])
    R = 20000
    db = np.tile(row, (R, 1))
    hit = probe_dashboard(db, np.full(R, row.size), np.tile(ftag, (R, 1)), np.arange(R), np.arange(R),
                          step=0, seed=3)
    assert (hit >> 20 == 7).all()  # only live pins are ever returned
    counts = np.bincount(hit & 0xFFFFF, minlength=m)
    assert counts[5] == 0
    nz = deg > 0
    assert stats.chisquare(counts[nz], R * deg[nz] / deg.sum())[1] > ALPHA


def test_dashboard_pop_rejects_wrong_law():
    # Power: the same pops are far from uniform over slots.
    deg = np.array([1, 9])
    R = 4000
    row = np.repeat(np.arange(2), deg)
    hit = probe_dashboard(np.tile(row, (R, 1)), np.full(R, row.size), np.zeros((R, 2), np.int64), np.arange(R),
                          np.arange(R), step=0, seed=4)
    counts = np.bincount(hit & 0xFFFFF, minlength=2)
    assert stats.chisquare(counts, [R / 2, R / 2])[1] < ALPHA
