#!/usr/bin/env bash
# Whole test suite: bootstrap the environments if needed, then the checks (extra arguments go to pytest).
# The two lanes are a version matrix, not a repeat: each test runs in the lane whose stack it proves.
#   1. lint-imports  the architecture contracts in pyproject.toml ([tool.importlinter]: layers, DGL-free core)
#   2. ruff check    the lint rules in pyproject.toml ([tool.ruff]; no `ruff format`, see the reason there)
#   3. main-lane     .venv (Python 3.11, torch 2.2.1, DGL 2.1.0, triton 3.5.1, numba 0.60): tests/ without
#                    tests/core, tests/pyg, tests/gpu_report (the DGL adapter, its drop-ins and samplers against DGL, the AOT
#                    compile for sm_80/sm_90, the architecture and docs rules) and the doctests of dgl_accel
#                    outside core/, pyg/ and gpu_report/; and tests/pyg/test_compile.py's aot_eager cases (a
#                    swapped model compiles on torch 2.2.1, each drop-in a boundary)
#   4. core-lane     .venv-core (Python 3.12, torch 2.11, triton 3.6, torch-geometric 2.8, numba 0.68, no DGL:
#                    the GPU image's stack, dgl-accel installed as `pip install .[pyg]`): tests/core, tests/pyg, tests/gpu_report
#                    and the doctests of dgl_accel/core, dgl_accel/pyg and dgl_accel/gpu_report (the GPU
#                    report's --interpret --tiny run among them); scripts/bootstrap_core.sh makes it once
#   5. numba-off     the core's numpy fallbacks with numba switched off (DGL_ACCEL_NUMBA=0, core lane): the
#                    compiled-loop and sampler tests, where the fallback is what runs at every size
# Both pytest lanes run on every core (pytest-xdist, -n auto).  Conftest.py at the root sets the environment.
# --quick (first argument): the iteration lane (target: under 4 minutes on 2 cores): lint-imports, ruff and
# pytest -m "not slow" over every test folder in .venv (one lane; at least one case of each test function:
# conftest.py refuses a selection that would leave a function out).  The full run (no --quick) is what CI runs.
# Every step runs even if an earlier one failed, so one run shows every problem; the exit status is
# non-zero if any step failed.  Kernels run under the Triton interpreter (conftest.py sets
# TRITON_INTERPRET=1) and are compiled ahead of time in a subprocess (tests/kernels/test_check.py).
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
jobs=(-n "${DGL_ACCEL_TEST_WORKERS:-auto}")  # pytest-xdist: one worker per core
workers=("${jobs[@]}" --dist loadscope)  # a module on one worker (its module-scoped fixtures built once)
if [ "$quick" = 1 ]; then
  step quick-cover "the quick lane runs at least one case of every test function (conftest.py, one process)" \
    "$py" -m pytest -q --collect-only -p no:xdist -m "not slow" --ignore=tests/gpu_report/test_report.py
  # tests/gpu_report/test_report.py's --interpret --tiny run takes minutes: the full run has it.
  step pytest "every test folder and the doctests of dgl_accel in .venv, the tests marked slow left out (the quick lane)" \
    "$py" -m pytest -q "${jobs[@]}" --dist load -m "not slow" \
    --ignore=tests/gpu_report/test_report.py "$@"  # test by test: no module-scoped fixture here is worth a core's idle time
  [ ${#failed[@]} -eq 0 ] || { echo "test.sh --quick: failed: ${failed[*]}"; exit 1; }
  echo "test.sh --quick: passed (the full run, bash scripts/test.sh, adds the slow tests and the core lane)"
  exit 0
fi
# conftest.py's LONG_FIRST puts the longest modules first: xdist hands modules out in collection order.
step main-lane "tests/ (not core/, pyg/, gpu_report/) and the doctests of dgl_accel outside core/, pyg/, gpu_report/ on torch 2.2.1 + DGL 2.1.0" \
  "$py" -m pytest -q "${workers[@]}" tests dgl_accel \
  --ignore=tests/core --ignore=tests/pyg --ignore=tests/gpu_report \
  --ignore=dgl_accel/core --ignore=dgl_accel/pyg --ignore=dgl_accel/gpu_report "$@"
# torch 2.2.1 has no torch.library.custom_op: there every PyG drop-in is a compile boundary, and a model
# with them still compiles and gives the eager numbers (the PyG adapter's one check on the main stack)
step main-lane-compile "a model with swapped PyG convs under torch.compile on torch 2.2.1 (each drop-in a boundary)" \
  "$py" -m pytest -q "${jobs[@]}" tests/pyg/test_compile.py -k "aot_eager" "$@"

core_py=""
core_env() {  # .venv-core, created once; its python goes to $core_py
  core_py="$(bash "$root/scripts/bootstrap_core.sh" 2> >(grep -v "^WARNING: Location" >&2) | tail -n 1)" &&
    [ -x "$core_py" ]
}
in_core() {
  [ -n "$core_py" ] || { echo "no .venv-core (see core-env above)"; return 1; }
  "$core_py" -m pytest -q "${workers[@]}" "$@"
}
step core-env "create or reuse .venv-core (scripts/bootstrap_core.sh)" core_env
versions="$([ -n "$core_py" ] && "$core_py" -c 'import sys, torch, triton
print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}")' 2>/dev/null ||
  echo "no environment")"
step core-lane "tests/core, tests/pyg, tests/gpu_report and the doctests of dgl_accel/core, dgl_accel/pyg, dgl_accel/gpu_report on $versions, without DGL" \
  in_core tests/core tests/pyg tests/gpu_report dgl_accel/core dgl_accel/pyg dgl_accel/gpu_report "$@"
# The numpy loops the compiled ones fall back to: with numba off they run at every size, under the same tests.
numba_off() { DGL_ACCEL_NUMBA=0 in_core "$@"; }
step numba-off "the compiled-loop and sampler tests of the core with numba switched off (DGL_ACCEL_NUMBA=0)" \
  numba_off -m "not interpreter" tests/core/jit/test_cpu_jit.py tests/core/sampling/test_neighbor.py \
  tests/core/sampling/test_walks.py tests/core/test_extrema.py tests/core/attention/test_edge_softmax_jit.py \
  tests/core/attention/test_gat_jit.py "$@"

if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}"
  exit 1
fi
