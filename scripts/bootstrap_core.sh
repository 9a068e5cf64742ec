#!/usr/bin/env bash
# Create (or reuse) .venv-core: the second test lane's environment, the GPU image's stack without DGL
# (Python 3.12, torch 2.11, triton 3.6), in which the DGL-free core (dgl_accel/core, kernels/), the PyG
# adapter and tests/core, tests/pyg run.  dgl-accel is installed as a PyG user installs it, with its declared
# dependencies (`pip install .[pyg]`: numba included, no DGL).  Idempotent: a complete venv is reused (stamp file below).
# Usage: bash scripts/bootstrap_core.sh   (prints the venv's python path on its last line)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DGL_ACCEL_CORE_VENV:-$root/.venv-core}"
stamp="$venv/.dgl_accel_core_bootstrap_v3"  # v3: installed with its declared dependencies (numba)

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
# Pins, one reason each.  No dgl: the lane proves the core and the PyG adapter run without it (DGL has no
# wheels for this torch).
#  torch==2.11.0     the GPU image's torch (PyPI's CUDA build, ~4.7 GB with nvidia-* libs; runs on CPU).
#  triton==3.6.0     the GPU image's triton, the one torch 2.11.0 requires; interpreter on CPU here.
#  numpy==2.3.5      NumPy 2 (torch 2.11's ABI), the newest under which triton 3.6's interpreter runs: it calls
#                    int() on 1-element arrays (every scalar tensor used as a loop bound), an error from
#                    NumPy 2.4 on.  The GPU image's 2.5.2 is fine there: kernels compile, nothing interprets.
#  matplotlib        the GPU report's roofline plot.
#  setuptools<70 wheel   build our editable install without build isolation (offline-safe), as in .venv.
#  torch-geometric==2.8.0   the GPU image's PyG.
# Then dgl-accel itself with its declared dependencies and the pyg and test extras: pip resolves numba
# (0.68.1, the newest for NumPy < 2.6), scipy, pytest, pytest-xdist and hypothesis as a user's install would.
"${pip[@]}" install -q \
  "torch==2.11.0" "triton==3.6.0" "numpy==2.3.5" matplotlib "setuptools<70" wheel "torch-geometric==2.8.0" >&2
"${pip[@]}" install -q --no-build-isolation -e "$root[pyg,test]" >&2
if "$venv/bin/python" -c "import dgl" >/dev/null 2>&1; then
  echo "bootstrap_core: dgl got into $venv; this lane must run without it" >&2; exit 3
fi
"$venv/bin/python" -c "import numba, torch_geometric" || {
  echo "bootstrap_core: numba or torch_geometric missing after installing dgl-accel[pyg] with its dependencies" >&2; exit 3; }
touch "$stamp"
echo "bootstrap_core: environment ready in $(( $(date +%s) - start ))s at $venv" >&2
echo "$venv/bin/python"
