"""examples/pyg_train.py (issue 30) on its tiny graph, on the CPU: PyG's models as written and
swapped train from the same weights to the same losses (GCN, GAT full graph; GraphSAGE on
minibatches from our NeighborSampler through PyG's NodeLoader), one JSON row per model and
provider, and a refused model name."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.scripts import run_script_here

pytest.importorskip("torch_geometric")

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "pyg_train.py"


def _run(*args):
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def _run_here(monkeypatch, capsys, *args):
    """``_run`` in this process (runpy, as __main__): its exit status, stdout and stderr."""
    return run_script_here(monkeypatch, capsys, EXAMPLE, *args)


# the example in a fresh process (torch and PyG imported: over 2 s on 2 cores) is the slow case; the quick
# case runs the same script, the same arguments, as __main__ in this process
@pytest.mark.parametrize("entry", quick_first(["runpy", "python"]))
def test_swapped_models_train_to_pygs_losses(tmp_path, monkeypatch, capsys, entry):
    rows_file = tmp_path / "rows.jsonl"
    args = ("--tiny", "--device", "cpu", "--results", str(rows_file))
    done = _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)
    assert done.returncode == 0, done.stderr
    assert "summary: 3 model(s), losses agree within 0.001" in done.stdout
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [(r["model"], r["provider"]) for r in rows] == [
        (m, p) for m in ("gcn", "gat", "sage") for p in ("pyg", "dgl_accel")]
    for theirs, ours in zip(rows[::2], rows[1::2]):
        assert ours["swapped"] == (3 if ours["model"] == "sage" else 2) and theirs["swapped"] == 0
        assert len(ours["losses"]) == 3 and ours["max_relative_loss_gap"] <= 1e-3
        assert ours["losses"][-1] < ours["losses"][0]  # it trains
    sage = rows[-1]
    assert all(sage[f"{part}_s"] > 0 for part in ("sample", "gather", "forward", "backward"))


def test_unknown_model_is_refused_with_the_fix():
    done = _run("--tiny", "--models", "gin")
    assert done.returncode != 0
    assert "expected models among ['gcn', 'gat', 'sage'] (got ['gin']). Fix: --models gcn,gat,sage" in done.stderr
