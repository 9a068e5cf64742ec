#!/usr/bin/env bash
# Main job: bootstrap the environment if needed, then train a 2-layer GCN with dgl-accel's backend
# on the embedded synthetic graph (extra arguments go to python -m dgl_accel.train_gcn).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$(bash "$root/scripts/bootstrap.sh" | tail -n 1)"
cd "$root"
exec "$py" -m dgl_accel.train_gcn "$@"
