"""The core runs where DGL (and numba) cannot be imported: torch 2.11 GPU machines have no DGL.

A subprocess blocks ``dgl`` and ``numba`` with a ``sys.meta_path`` finder before anything imports
them, then imports the package, runs one aggregation (forward and backward, native path), one
neighbour sampling, and one kernel under the Triton interpreter, each against a plain torch
reference; and checks that neither blocked package was loaded.
"""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("dgl", "numba"):
                raise ImportError(f"{name} is blocked for this test")
            return None

    sys.meta_path.insert(0, Blocker())
    import torch
    import dgl_accel
    from dgl_accel.core.jit import runtime as jit_runtime
    from dgl_accel.core.aggregation.function import aggregate
    from dgl_accel.core.aggregation.views import TensorGraph

    assert not jit_runtime.enabled(), "numba is blocked: the compiled loops must be off"
    gen = torch.Generator().manual_seed(0)
    n, e = 50, 300
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    x = torch.randn(n, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    adj = torch.zeros(n, n, dtype=torch.float64).index_put_((dst, src), torch.ones(e, dtype=torch.float64),
                                                            accumulate=True)
    g = TensorGraph(src, dst, num_nodes=n)
    out = aggregate(g, "copy_u", "sum", x, norm="both")
    deg_in, deg_out = adj.sum(1).clamp(min=1), adj.sum(0).clamp(min=1)
    want = (adj * deg_in.rsqrt()[:, None] * deg_out.rsqrt()[None, :]) @ x
    torch.testing.assert_close(out, want)
    grad, = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, (adj * deg_in.rsqrt()[:, None] * deg_out.rsqrt()[None, :]).sum(0)[:, None]
                               .expand(n, 8))
    print("aggregation ok")

    SAMPLING

    with dgl_accel.use_backend("triton"):  # the grouped kernel under the interpreter
        out32 = aggregate(g, "copy_u", "sum", x.detach().float())
    torch.testing.assert_close(out32, (adj @ x.detach()).float())
    assert dgl_accel.stats()["copy_u_sum"].get("triton-interpreter") == 1, dgl_accel.stats()
    print("interpreter ok")

    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("dgl", "numba"))
    assert not loaded, loaded
    print("blocked packages never loaded")
''')

SAMPLING = textwrap.dedent('''
    from dgl_accel.core.sampling.neighbor.sample import sample_neighbors
    seeds = torch.tensor([3, 7, 11])
    s_src, s_dst, s_eid = sample_neighbors(g.csr("in"), seeds, 4, seed=5)
    assert torch.equal(src[s_eid.long()], s_src.to(src.dtype)) and torch.equal(dst[s_eid.long()], s_dst.to(dst.dtype))
    assert set(s_dst.tolist()) <= set(seeds.tolist())
    for v in seeds.tolist():
        picked = int((s_dst == v).sum())
        assert picked == min(4, int((dst == v).sum())), (v, picked)
    print("sampling ok")
''')


def test_core_runs_without_dgl_and_numba():
    code = SCRIPT.replace("SAMPLING", SAMPLING)
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("DGL_ACCEL_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for line in ("aggregation ok", "sampling ok", "interpreter ok", "blocked packages never loaded"):
        assert line in out.stdout, out.stdout + out.stderr


# The core lane's test of each kernel family (kernels/registry.py KERNEL_MODULES), run under the
# Triton interpreter against a pure-torch reference or the CPU twin: a new family needs one here.
FAMILY_TESTS = {
    "vector_scale": "test_vector_scale.py",
    "gspmm_grouped": "aggregation/test_aggregation.py",
    "sampling": "sampling/test_engine.py",
    "saint_frontier": "sampling/test_saint_frontier.py",
    "bulk_sampling": "sampling/test_bulk.py",
    "walks": "sampling/test_walks.py",
    "edge_softmax": "attention/test_edge_softmax.py",
    "gat": "attention/test_gat.py",
    "extrema": "test_extrema.py",
    "sddmm": "test_sddmm.py",
    "dot": "attention/test_dot.py",
    "gatv2": "attention/test_gatv2.py",
    "headwise": "test_headwise.py",
    "ppr": "sampling/test_ppr.py",
    "gat_heads": "attention/test_gat_heads.py",
    "dot_heads": "attention/test_dot_heads.py",
    "gatv2_heads": "attention/test_gatv2_heads.py",
}


def test_every_kernel_family_has_a_core_test_on_the_triton_path():
    from pathlib import Path

    from dgl_accel.kernels.registry import KERNEL_MODULES

    assert set(FAMILY_TESTS) == set(KERNEL_MODULES), "add the new kernel family's tests/core test to FAMILY_TESTS"
    here = Path(__file__).parent
    for family, name in FAMILY_TESTS.items():
        text = (here / name).read_text(encoding="utf-8")
        assert "triton" in text, f"{name} never runs {family}'s kernels on the Triton path"
