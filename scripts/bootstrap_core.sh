#!/usr/bin/env bash
# Create (or reuse) .venv-core: the second test lane's environment, the GPU image's stack without DGL
# (Python 3.12, torch 2.11, triton 3.6), in which the DGL-free core (dgl_accel/core, kernels/) and
# tests/core run.  Idempotent: a complete venv is reused (stamp file below).
# Usage: bash scripts/bootstrap_core.sh   (prints the venv's python path on its last line)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DGL_ACCEL_CORE_VENV:-$root/.venv-core}"
stamp="$venv/.dgl_accel_core_bootstrap_v2"  # v2: + torch-geometric 2.8.0

if [ -f "$stamp" ] && "$venv/bin/python" -c "import dgl_accel.core" >/dev/null 2>&1; then
  echo "$venv/bin/python"; exit 0
fi

py="${PYTHON_CORE:-}"
if [ -z "$py" ]; then
  for cand in python3.12 "$(pyenv root 2>/dev/null)/versions/3.12"*/bin/python3.12; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null
    then py="$cand"; break; fi
  done
fi
ver="$([ -n "$py" ] && "$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)"
if [ "$ver" != "3.12" ]; then
  echo "bootstrap_core: expected Python 3.12 (found ${py:-none on PATH or under pyenv}: $ver); the GPU image runs" >&2
  echo "  Python 3.12 + torch 2.11 + triton 3.6 and this lane reproduces exactly that." >&2
  echo "  fix: pyenv install 3.12 (or install python3.12 on PATH), or run" >&2
  echo "       PYTHON_CORE=/path/to/python3.12 bash scripts/bootstrap_core.sh" >&2
  exit 2
fi

start=$(date +%s)
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
# Pins, one reason each.  No dgl (the lane proves the core runs without it; DGL has no wheels for this
# torch) and no numba (none for this stack; core/jit/runtime.py falls back to the bit-identical numpy loops).
#  torch==2.11.0     the GPU image's torch (PyPI's CUDA build, ~4.7 GB with nvidia-* libs; runs on CPU).
#  triton==3.6.0     the GPU image's triton, the one torch 2.11.0 requires; interpreter on CPU here.
#  numpy==2.3.5      NumPy 2 (torch 2.11's ABI), the newest under which triton 3.6's interpreter runs: it calls
#                    int() on 1-element arrays (every scalar tensor used as a loop bound), an error from
#                    NumPy 2.4 on.  The GPU image's 2.5.2 is fine there: kernels compile, nothing interprets.
#  scipy             core/sampling/bulk_matrix.py's SpGEMM and the tests' distribution checks.
#  pytest hypothesis the tests.   matplotlib   the GPU report's roofline plot.
#  setuptools<70 wheel   build our editable install without build isolation (offline-safe), as in .venv.
#  torch-geometric==2.8.0   the GPU image's PyG: the PyG adapter (dgl_accel.pyg) and tests/pyg run here.
"${pip[@]}" install -q \
  "torch==2.11.0" "triton==3.6.0" "numpy==2.3.5" scipy pytest hypothesis matplotlib \
  "setuptools<70" wheel "torch-geometric==2.8.0" >&2
# --no-deps: pyproject.toml lists dgl and numba, which this lane must not have.
"${pip[@]}" install -q --no-deps --no-build-isolation -e "$root" >&2
if "$venv/bin/python" -c "import dgl" >/dev/null 2>&1 || "$venv/bin/python" -c "import numba" >/dev/null 2>&1; then
  echo "bootstrap_core: dgl or numba got into $venv; this lane must run without both" >&2; exit 3
fi
touch "$stamp"
echo "bootstrap_core: environment ready in $(( $(date +%s) - start ))s at $venv" >&2
echo "$venv/bin/python"
