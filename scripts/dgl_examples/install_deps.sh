#!/usr/bin/env bash
# Install what DGL's examples need beyond the project's venv, pinned to DGL 2.1.0's time (early 2024):
# scikit-learn (node2vec's evaluation) and torchmetrics (graphsage's accuracy), into a separate
# folder that run.py puts on PYTHONPATH, so the project's .venv stays as bootstrap.sh made it.
# --no-deps: numpy, scipy and torch come from .venv (a resolver would try to move them).
# Usage: bash scripts/dgl_examples/install_deps.sh [TARGET]   (default ~/.cache/dgl_accel/dgl_examples_deps)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
target="${1:-${DGL_EXAMPLES_DEPS:-$HOME/.cache/dgl_accel/dgl_examples_deps}}"
"$root/.venv/bin/python" -m pip install --disable-pip-version-check -q --no-deps --target "$target" \
  "scikit-learn==1.4.2" "joblib==1.3.2" "threadpoolctl==3.4.0" "torchmetrics==1.3.2" "lightning-utilities==0.11.2"
echo "$target"
