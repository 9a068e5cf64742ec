#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv with the CPU stack that
# works together on Python 3.11 without a GPU. Idempotent: a complete venv is reused.
# Usage: bash scripts/bootstrap.sh        (prints the venv's python path on its last line)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DGL_ACCEL_VENV:-$root/.venv}"
stamp="$venv/.dgl_accel_bootstrap_v5"  # v5: installed with its declared dependencies and extras
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3

if [ -f "$stamp" ] && "$venv/bin/python" -c "import dgl_accel" >/dev/null 2>&1; then
  echo "$venv/bin/python"; exit 0
fi

ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$ver" != "3.11" ]; then
  echo "bootstrap: expected Python 3.11 (got $ver from '$py'); DGL 2.1.0 wheels for this stack exist for 3.11 only." >&2
  echo "  fix: install Python 3.11 and run PYTHON=/path/to/python3.11 bash scripts/bootstrap.sh" >&2
  exit 2
fi

start=$(date +%s)
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade "pip<25" >&2
# Pins, one reason each (see also README "Why these versions"):
#  torch==2.2.1      DGL 2.1.0's compiled graphbolt/sparse libraries load only with torch <= 2.2.1
#                    (the PyPI wheel is a CUDA build, ~2.5 GB of nvidia-* libs; it runs on CPU).
#  dgl==2.1.0        newest DGL on PyPI for Python 3.11.
#  numpy<2           torch 2.2.1 and dgl 2.1.0 were built against the NumPy 1 ABI.
#  torchdata==0.7.1  dgl.graphbolt imports torchdata.datapipes, removed in later torchdata.
#  setuptools<70     dgl 2.1.0 imports setuptools.extern, dropped in setuptools 70.
#  pandas pydantic pyyaml   imported by dgl.graphbolt at `import dgl`.
#  scipy pytest hypothesis matplotlib   CPU paths, tests, bench plots.
#  numba==0.60.0     the compiled CPU loops (dgl_accel/core/jit/), a declared dependency; the last
#                    release supporting numpy 1.26 + Python 3.11 with llvmlite wheels (DGL_ACCEL_NUMBA=0
#                    runs the bit-identical numpy loops instead).
#  wheel             lets pip build our editable install without build isolation (offline-safe).
#  ruff==0.17.6      the lint step of scripts/test.sh; pinned because each release adds rules and
#                    changes fixes, so the same tree passes or fails the same way everywhere.
#  import-linter==2.17   the architecture contracts in pyproject.toml; the newest release, whose
#                    layers contract has `exhaustive` and the `a | b` sibling syntax the config uses.
#  grimp==3.20       import-linter's import graph, also read by tests/test_architecture.py (cycles);
#                    pinned with it so both see the same graph.
#  torch-geometric==2.8.0   the PyG adapter (dgl_accel.pyg) and its peer tests; pure Python (plus
#                    xxhash, aiohttp): it leaves torch and numpy as pinned above.
"${pip[@]}" install -q \
  "torch==2.2.1" "dgl==2.1.0" wheel "numpy<2" "torchdata==0.7.1" "setuptools<70" \
  pandas pydantic pyyaml scipy pytest hypothesis matplotlib "numba==0.60.0" \
  "ruff==0.17.6" "import-linter==2.17" "grimp==3.20" "torch-geometric==2.8.0" >&2
# dgl-accel itself as a DGL user installs it (`pip install .[dgl]`), with the pyg and test extras
# (pytest-xdist), its dependencies resolved by pip; that brings torch 2.2.1's own pin, triton 2.2.0.
"${pip[@]}" install -q --no-build-isolation -e "$root[dgl,pyg,test]" >&2
#  triton==3.5.1 --no-deps   last: triton 2.2.0's interpreter (TRITON_INTERPRET=1) is broken; 3.5.1 runs
#                    the interpreter on CPU and compiles for sm_80/sm_90 (its wheel ships ptxas and
#                    cuobjdump). --no-deps keeps pip from putting torch's pin back.
"${pip[@]}" install -q --no-deps "triton==3.5.1" >&2
touch "$stamp"
echo "bootstrap: environment ready in $(( $(date +%s) - start ))s at $venv" >&2
echo "$venv/bin/python"
