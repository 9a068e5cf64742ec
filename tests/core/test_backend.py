"""The one switch (DGL_ACCEL_BACKEND / set_backend / use_backend) and path dispatch."""
import os
import subprocess
import sys

import pytest
import torch

import dgl_accel
from dgl_accel.core import backend
from dgl_accel.core.vector_scale import scale


def test_default_is_auto_and_cpu_runs_native(monkeypatch):
    monkeypatch.delenv("DGL_ACCEL_BACKEND", raising=False)
    assert dgl_accel.get_backend() == "auto"
    assert dgl_accel.choose_path(torch.ones(2)) == "native"


@pytest.mark.parametrize("name", ["auto", "triton", "native", " Native "])
def test_env_var_selects_backend(monkeypatch, name):
    monkeypatch.setenv("DGL_ACCEL_BACKEND", name)
    assert dgl_accel.get_backend() == name.strip().lower()


def test_bad_env_value_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("DGL_ACCEL_BACKEND", "cuda")
    with pytest.raises(ValueError, match=r"expected DGL_ACCEL_BACKEND to be one of auto, triton, native \(got 'cuda'\)"):
        scale(torch.ones(3), 2.0)


def test_set_backend_overrides_env_and_none_restores(monkeypatch):
    monkeypatch.setenv("DGL_ACCEL_BACKEND", "native")
    dgl_accel.set_backend("triton")
    assert dgl_accel.choose_path(torch.ones(1)) == "triton"
    dgl_accel.set_backend(None)
    assert dgl_accel.get_backend() == "native"
    with pytest.raises(ValueError, match="expected the backend"):
        dgl_accel.set_backend("gpu")


def test_use_backend_restores_previous_even_on_error():
    dgl_accel.set_backend("native")
    with pytest.raises(RuntimeError):
        with dgl_accel.use_backend("triton"):
            assert dgl_accel.get_backend() == "triton"
            raise RuntimeError("boom")
    assert dgl_accel.get_backend() == "native"


@pytest.mark.interpreter
def test_stats_count_each_path():
    dgl_accel.reset_stats()
    x = torch.arange(6, dtype=torch.float32)
    with dgl_accel.use_backend("native"):
        scale(x, 2.0)
        scale(x, 2.0)
    with dgl_accel.use_backend("triton"):
        scale(x, 2.0)
    assert dgl_accel.stats() == {"scale": {"native-cpu": 2, "triton-interpreter": 1}}
    dgl_accel.reset_stats()
    assert dgl_accel.stats() == {}


def test_mixed_devices_rejected():
    meta = torch.empty(2, device="meta")
    with pytest.raises(ValueError, match=r"expected all tensors on one device \(got cpu, meta\)"):
        backend.common_device(torch.ones(2), meta)


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "DGL_ACCEL_BACKEND")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)


def test_env_triton_on_cpu_machine_runs_kernels_in_a_fresh_process():
    # The README promise: DGL_ACCEL_BACKEND=triton alone (no TRITON_INTERPRET) runs the kernels on CPU.
    code = ("import torch, dgl_accel; from dgl_accel.core.vector_scale import scale; "
            "y = scale(torch.arange(5.), 3.0); assert torch.equal(y, torch.arange(5.) * 3); "
            "print(dgl_accel.stats())")
    proc = _run(code, DGL_ACCEL_BACKEND="triton")
    assert proc.returncode == 0, proc.stderr
    assert "triton-interpreter" in proc.stdout


def test_compiled_process_refuses_cpu_kernels_clearly():
    # triton imported in compiled mode first: CPU tensors then cannot run kernels; say how to fix.
    code = ("import triton, triton.language, torch, dgl_accel; from dgl_accel.core.vector_scale import scale\n"
            "dgl_accel.set_backend('triton')\n"
            "try:\n    scale(torch.ones(3), 2.0)\nexcept ValueError as e:\n    print('ERR', e)\n")
    proc = _run(code, TRITON_INTERPRET="0")
    assert proc.returncode == 0, proc.stderr
    assert "ERR expected the Triton interpreter" in proc.stdout and "Fix:" in proc.stdout
