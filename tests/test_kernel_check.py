"""Ahead-of-time compilation for sm_80 / sm_90 (no GPU needed): every registered specialisation
compiles without spills, and the check really detects spills and compile errors.

The compiler and the interpreter cannot share a process (kernels/loader.py), and this test
process runs the interpreter, so every compile here happens in a subprocess."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.aot


def _env():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.pop("DGL_ACCEL_BACKEND", None)
    return env


@pytest.mark.slow  # over 2 s on 2 cores: the quick lane (scripts/test.sh --quick) leaves it out
def test_every_registered_kernel_compiles_for_sm80_and_sm90_without_spills(tmp_path):
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, "-m", "dgl_accel.kernels.check", "--json", str(out)],
                          capture_output=True, text=True, env=_env(), timeout=900)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())
    from dgl_accel.kernels.registry import specialisations

    assert len(rows) == 2 * len(specialisations()) > 0
    assert {r["target"] for r in rows} == {"sm_80", "sm_90"}
    for r in rows:
        assert r["error"] is None and r["spill_bytes"] == 0 and r["registers"] > 0, r
        assert r["shared_bytes"] is not None and r["local_bytes"] == 0, r
    assert "kernel" in proc.stdout.splitlines()[0] and "registers" in proc.stdout.splitlines()[0]


@pytest.mark.slow  # over 2 s on 2 cores: the quick lane (scripts/test.sh --quick) leaves it out
def test_check_reports_spills_and_compile_errors(tmp_path):
    # A kernel that keeps a 128x128 fp32 tile live in one warp (512 values per thread) must spill,
    # and a kernel with a type error must be reported as an error row, not crash the table.
    code = textwrap.dedent('''
        import triton, triton.language as tl
        from dgl_accel.kernels.check import compile_one, _require_compiled_mode
        from dgl_accel.kernels.registry import Specialisation
        _require_compiled_mode()

        @triton.jit
        def _hog(x_ptr, out_ptr, B: tl.constexpr):
            r = tl.arange(0, B)
            x = tl.load(x_ptr + r[:, None] * B + r[None, :])
            y = tl.load(x_ptr + B * B + r[:, None] * B + r[None, :])
            acc = tl.zeros((B, B), dtype=tl.float32)
            for k in range(8):
                acc = acc * x + tl.exp(y * k)
                y = tl.sqrt(tl.abs(acc + y))
            tl.store(out_ptr + r[:, None] * B + r[None, :], acc + x * y)

        @triton.jit
        def _broken(x_ptr, B: tl.constexpr):
            tl.store(x_ptr, tl.arange(0, B) + undefined_name)

        spec = Specialisation("x", "_hog", {"x_ptr": "*fp32", "out_ptr": "*fp32", "B": "constexpr"},
                              {"B": 128}, num_warps=1)
        r = compile_one(spec, 80, fn=_hog)
        print("HOG", r.error, r.spill_bytes, r.ok)
        bad = Specialisation("x", "_broken", {"x_ptr": "*fp32", "B": "constexpr"}, {"B": 16})
        r = compile_one(bad, 90, fn=_broken)
        print("BROKEN", r.error is not None, r.ok)
    ''')
    script = tmp_path / "spill_probe.py"  # @triton.jit needs its source in a real file
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    hog = next(line for line in proc.stdout.splitlines() if line.startswith("HOG")).split()
    assert hog[1] == "None" and int(hog[2]) > 0 and hog[3] == "False", proc.stdout
    assert "BROKEN True False" in proc.stdout


def test_check_refuses_an_interpreted_process():
    code = ("import os; os.environ['TRITON_INTERPRET'] = '1'\n"
            "import triton\n"
            "from dgl_accel.kernels.check import run\n"
            "try:\n    run()\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert "ERR expected a process with Triton in compiled mode" in proc.stdout, proc.stdout + proc.stderr


def test_the_neighbour_choice_runs_one_variant_whatever_the_key_and_sizes():
    """The per-call scalars (key, step, transit count) are typed int64 and not specialised: every
    call binds the registered signature, never a new compile for a key >= 2^63, a step of 1 or a
    count divisible by 16 (the binder Triton runs at each launch, built for sm_90 in a subprocess)."""
    code = textwrap.dedent("""
        import os
        os.environ["TRITON_INTERPRET"] = "0"
        import torch
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
        from triton.runtime.jit import create_function_from_signature
        from dgl_accel.kernels import sampling
        from dgl_accel.kernels.registry import specialisations
        backend = make_backend(GPUTarget("cuda", 90, 32))
        t = torch.zeros(4, dtype=torch.int64)
        for k, args in ((sampling._neighbor_choice_kernel, (t, t, t, t, "nt", 15)),
                        (sampling._neighbor_choice_grid_kernel, (t, t, t, t, 2000))):
            binder = create_function_from_signature(k.signature, k.params, backend)
            seen = set()
            for seed in (0, 1, 16, 2**40, 2**63 - 16, -(2**63) + 5):
                for nt in (1, 16, 17):
                    for step in (0, 1, 2):
                        a = tuple(nt if x == "nt" else x for x in args) + (seed, step, 1000)
                        seen.add(tuple(map(str, binder(*a, REPLACE=False, CHUNK=256, HAS_CIDS=False)[1]))
                                 if k is sampling._neighbor_choice_grid_kernel else
                                 tuple(map(str, binder(*a, REPLACE=False, BLOCK_T=4, K_PAD=16, HAS_CIDS=False)[1])))
            registered = {s.signature["seed"] for s in specialisations() if s.kernel == k.__name__}
            print(k.__name__, len(seen), registered)
            assert len(seen) == 1 and registered == {"i64"}, seen
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
