"""examples/pyg_ddp.py under torchrun with two ranks on the CPU (gloo): each rank its own
``dgl_accel.pyg.NeighborLoader`` over its shard of the seeds, ``DistributedDataParallel`` over a
swapped GraphSAGE; the loss decreases and the ranks hold equal weights after every step (the
script compares them after each step and fails if they differ)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow  # two torch processes: over 2 s on 2 cores (conftest.FULL_RUN_ONLY says why no quick case)
def test_two_ranks_train_a_swapped_model_in_step():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                           str(REPO / "examples" / "pyg_ddp.py"), "--graph", "tiny", "--epochs", "3"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "2 rank(s), gloo" in done.stdout and "swapped: 2 layer(s)" in done.stdout
    found = re.search(r"summary: 2 rank\(s\), 3 epoch\(s\), (\d+) step\(s\) a rank, loss ([\d.]+) -> ([\d.]+), "
                      r"weights equal on every rank after every step", done.stdout)
    assert found, done.stdout
    steps, first, last = int(found[1]), float(found[2]), float(found[3])
    assert steps >= 6 and last < 0.8 * first
