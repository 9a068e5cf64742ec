#!/usr/bin/env bash
# Whole test suite: bootstrap the environment if needed, then pytest (extra arguments go to pytest).
# Kernels run under the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET=1) and are
# compiled ahead of time for sm_80/sm_90 in a subprocess (tests/test_kernel_check.py).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$(bash "$root/scripts/bootstrap.sh" | tail -n 1)"
cd "$root"
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
exec "$py" -m pytest -q "$@"
