#!/usr/bin/env bash
# Run the GPU report on a lent GPU machine from the carried working tree (see cli.py's docstring):
#   run(command="set -o pipefail; timeout 390 bash dgl_accel/gpu_report/device.sh --budget-s 300 --warm-jobs 16
#       2>&1 | tee $OUT/log.txt; tar czf $OUT/report.tgz bench/results/gpu_*.jsonl docs/gpu_report*",
#       carry=["data/gpu"], timeout_s=420)
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
