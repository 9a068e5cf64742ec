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

from dgl_accel.testing.marks import quick_first

pytestmark = pytest.mark.aot


def _env():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.pop("DGL_ACCEL_BACKEND", None)
    return env


# every registered kernel (over 1,500 specialisations, 3,000 compiles): minutes on 2 cores, the slow case; the
# quick case checks one kernel's specialisation (``--kernel``) the same way
@pytest.mark.parametrize("kernel", quick_first(["_relabel_kernel", None]), ids=["one-kernel", "every-kernel"])
def test_every_registered_kernel_compiles_for_sm80_and_sm90_without_spills(tmp_path, kernel):
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, "-m", "dgl_accel.kernels.check", "--json", str(out)]
                          + (["--kernel", kernel] if kernel else []),
                          capture_output=True, text=True, env=_env(), timeout=1800)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())
    from dgl_accel.kernels.registry import specialisations

    assert len(rows) == 2 * len([s for s in specialisations() if not kernel or kernel in s.kernel]) > 0
    assert {r["target"] for r in rows} == {"sm_80", "sm_90"}
    for r in rows:
        assert r["error"] is None and r["spill_bytes"] == 0 and r["registers"] > 0, r
        assert r["shared_bytes"] is not None and r["local_bytes"] == 0, r
    assert "kernel" in proc.stdout.splitlines()[0] and "registers" in proc.stdout.splitlines()[0]


# a 64 x 64 tile with three such tiles live spills (2 to 3 s of ptxas); a 128 x 128 tile proved
# nothing more at a minute of CI time, so it is not run
@pytest.mark.parametrize("tile", [64])
def test_check_reports_spills_and_compile_errors(tmp_path, tile):
    # A kernel that keeps a tile x tile fp32 tile live in one warp (128 x 128: 512 values per thread; 64 x 64:
    # 128, three such tiles live) must spill, and a kernel with a type error must be reported as an error
    # row, not crash the table.
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
                              {"B": TILE}, num_warps=1)
        r = compile_one(spec, 80, fn=_hog)
        print("HOG", r.error, r.spill_bytes, r.ok)
        bad = Specialisation("x", "_broken", {"x_ptr": "*fp32", "B": "constexpr"}, {"B": 16})
        r = compile_one(bad, 90, fn=_broken)
        print("BROKEN", r.error is not None, r.ok)
    ''')
    script = tmp_path / "spill_probe.py"  # @triton.jit needs its source in a real file
    script.write_text(f"TILE = {tile}\n" + code)
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


PER_CALL_SCALARS = {  # kernel -> its scalars that change from call to call (keys, steps, sizes of a minibatch)
    "_neighbor_choice_kernel": ("num_transits", "fanout", "seed", "step", "num_nodes"),
    "_neighbor_choice_grid_kernel": ("fanout", "seed", "step", "num_nodes"),
    "_gspmm_grouped_fwd_kernel": ("num_groups",),
    "_sddmm_grad_efeat_kernel": ("num_edges",),
    "_its_rows_kernel": ("n_rows", "s", "max_draws", "search_iters"),
    "_compact_kernel": ("n_rows",),
    "_relabel_kernel": ("n_edges", "num_dst"),
    "_ppr_spread_kernel": ("n_keys",),
    "_sddmm_kernel": ("num_edges",),
    "_sddmm_dot_kernel": ("num_edges",),
    "_random_walk_kernel": ("num_walks", "seed"),
    "_node2vec_step_kernel": ("num_walks", "s", "seed"),
    "_mdrw_kernel": ("m", "seed"),
    "_frontier_kernel": ("m", "seed"),
}


def test_per_call_scalars_bind_one_registered_variant_whatever_their_values():
    """Scalars that change from call to call are typed as registered and not specialised: every
    launch binds the registered signature, never a new compile for a key >= 2^63, a step of 1 or a
    size divisible by 16 (Triton's launch binder, built for sm_90, in a subprocess)."""
    code = textwrap.dedent("""
        import json, os, sys
        os.environ["TRITON_INTERPRET"] = "0"
        import importlib, torch
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
        from triton.runtime.jit import create_function_from_signature
        from dgl_accel.kernels.registry import specialisations
        backend = make_backend(GPUTarget("cuda", 90, 32))
        dtypes = {"i32": torch.int32, "i64": torch.int64, "fp16": torch.float16, "bf16": torch.bfloat16,
                  "fp32": torch.float32, "fp64": torch.float64, "i8": torch.int8}
        per_call = json.loads(sys.argv[1])
        done = set()
        for spec in specialisations():
            if spec.kernel not in per_call or spec.kernel in done:
                continue
            done.add(spec.kernel)
            k = getattr(importlib.import_module(f"dgl_accel.kernels.{spec.module}"), spec.kernel)
            binder = create_function_from_signature(k.signature, k.params, backend)
            base = {n: (torch.zeros(4, dtype=dtypes[t[1:]]) if t.startswith("*") else 1000)
                    for n, t in spec.signature.items() if t != "constexpr"}
            seen = set()
            for name in per_call[spec.kernel]:
                for value in (0, 1, 16, 17, 2**40, -(2**63) + 5):
                    args = dict(base, **{name: value})
                    bound = binder(**args, **spec.constexprs)[1]
                    seen.add(tuple(str(x) for n, x in zip(k.arg_names, bound) if n in per_call[spec.kernel]))
            want = {tuple(str((spec.signature[n], None)) for n in k.arg_names if n in per_call[spec.kernel])}
            assert seen == want, (spec.kernel, seen, want)
        assert done == set(per_call), set(per_call) - done
        print(len(done), "kernels")
    """)
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(PER_CALL_SCALARS)], capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
