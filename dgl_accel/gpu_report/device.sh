#!/usr/bin/env bash
# Run the GPU report on a lent GPU machine from the carried working tree (see cli.py's docstring):
#   run(command="bash dgl_accel/gpu_report/device.sh && cp bench/results/gpu_*.jsonl docs/gpu_report* $OUT/",
#       carry=["data/gpu"])
# Extra arguments go to the report (e.g. --quick).  pyproject maps dgl_accel.kernels to kernels/; the
# image has no install of this package, so a symlink stands in for one (the tree there is a copy).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
if ! "$py" -c "import dgl_accel.kernels.registry" 2>/dev/null; then
  ln -sfn ../kernels dgl_accel/kernels
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv || true
PYTHONUNBUFFERED=1 exec "$py" -m dgl_accel.gpu_report "$@"
