#!/usr/bin/env bash
# Whole test suite: bootstrap the environment if needed, then four checks (extra arguments go to pytest):
#   1. lint-imports  the architecture contracts in pyproject.toml ([tool.importlinter]: layers, DGL-free core)
#   2. ruff check    the lint rules in pyproject.toml ([tool.ruff]; no `ruff format`, see the reason there)
#   3. pytest        tests/ and the >>> examples in dgl_accel's docstrings (conftest.py at the root sets the
#                    environment for both); tests/test_architecture.py holds the rules import-linter cannot say
#   4. core-lane     the second lane: tests/core, tests/pyg and the doctests of dgl_accel/core and dgl_accel/pyg on the GPU image's stack
#                    (Python 3.12, torch 2.11, triton 3.6) without DGL or numba, in .venv-core
#                    (scripts/bootstrap_core.sh creates it once, ~90 s, and reuses it after)
# --quick (first argument): the iteration lane (target 4 minutes on 2 cores, 7 on 2026-11-28): lint-imports, ruff and the
# main lane's pytest without the tests marked slow (tests/core and tests/pyg collected once, here);
# no core lane.  The full run (no --quick) is what CI runs.
# Every step runs even if an earlier one failed, so one run shows every problem; the exit status is
# non-zero if any step failed.  Kernels run under the Triton interpreter (conftest.py sets
# TRITON_INTERPRET=1) and are compiled ahead of time for sm_80/sm_90 in a subprocess
# (tests/test_kernel_check.py).
set -euo pipefail
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$(bash "$root/scripts/bootstrap.sh" | tail -n 1)"
bin="$(dirname "$py")"
cd "$root"
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
failed=()

step() {  # step NAME WHAT COMMAND...: one line saying what it checks, then the command and its time
  local name="$1" what="$2" start=$SECONDS; shift 2
  echo "== $name: $what"
  if "$@"; then
    echo "== $name: passed in $(( SECONDS - start ))s"
  else
    echo "== $name: FAILED in $(( SECONDS - start ))s"
    failed+=("$name")
  fi
}

lint_imports() {
  # grimp reads files: it sees kernels/ as dgl_accel.kernels only in the installed layout (symlinks).
  local view
  view="$("$py" scripts/installed_layout.py "$root/build/installed-layout")" || return 1
  (cd "$view" && "$bin/lint-imports" --no-logo --no-cache "$root/pyproject.toml")
}

step lint-imports "layers (kernels < core < graph < policies < functional < DGL adapter) and a DGL-free core" \
  lint_imports
step ruff "lint rules (pyflakes, import order, bugbear basics, pyupgrade, 120 columns) over every Python file" \
  "$bin/ruff" check --output-format concise "$root"
# tests/core/test_gpu_report.py runs `python -m dgl_accel.gpu_report --interpret --tiny` (about 80 s):
# once is enough, in the core lane, on the GPU image's versions.
if [ "$quick" = 1 ]; then
  step pytest "tests/ and the doctests of dgl_accel, the tests marked slow left out (the quick lane)" \
    "$py" -m pytest -q -m "not slow" --ignore=tests/core/test_gpu_report.py "$@"
  [ ${#failed[@]} -eq 0 ] || { echo "test.sh --quick: failed: ${failed[*]}"; exit 1; }
  echo "test.sh --quick: passed (the full run, bash scripts/test.sh, adds the slow tests and the core lane)"
  exit 0
fi
step pytest "tests/ and the doctests of dgl_accel (architecture rules in tests/test_architecture.py)" \
  "$py" -m pytest -q --ignore=tests/core/test_gpu_report.py "$@"

core_py=""
core_env() {  # .venv-core, created once; its python goes to $core_py
  core_py="$(bash "$root/scripts/bootstrap_core.sh" 2> >(grep -v "^WARNING: Location" >&2) | tail -n 1)" &&
    [ -x "$core_py" ]
}
core_lane() {
  [ -n "$core_py" ] || { echo "core-lane: no .venv-core (see core-env above)"; return 1; }
  "$core_py" -m pytest -q tests/core tests/pyg dgl_accel/core dgl_accel/pyg
}
step core-env "create or reuse .venv-core (scripts/bootstrap_core.sh)" core_env
versions="$([ -n "$core_py" ] && "$core_py" -c 'import sys, torch, triton
print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}")' 2>/dev/null ||
  echo "no environment")"
step core-lane "tests/core, tests/pyg (with the GPU report's --interpret --tiny run) and the doctests of dgl_accel/core and dgl_accel/pyg on $versions, without DGL and numba" core_lane

if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}"
  exit 1
fi
