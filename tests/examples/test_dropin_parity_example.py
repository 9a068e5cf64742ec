"""examples/dropin_parity.py (issue 31) end to end on the synthetic graph (no shared datasets needed):
DGL's model and its swapped copy train from one seed to the same accuracy, dropout included (GAT's
feature and attention dropout 0.6), one JSON row per run and provider, a refused model name."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.scripts import run_script_here

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "dropin_parity.py"


def _run(*args):
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, cwd=REPO / "examples")


def _run_here(monkeypatch, capsys, *args):
    """``_run`` in this process (runpy, as __main__): its exit status, stdout and stderr."""
    return run_script_here(monkeypatch, capsys, EXAMPLE, *args)


# the example in a fresh process (torch and DGL imported: over 2 s on 2 cores) is the slow case; the quick
# case runs the same script, the same arguments, as __main__ in this process
@pytest.mark.parametrize("entry", quick_first(["runpy", "python"]))
def test_swapped_models_reach_dgls_accuracy_seed_by_seed(tmp_path, monkeypatch, capsys, entry):
    rows_file = tmp_path / "rows.jsonl"
    args = ("--datasets", "synthetic", "--models", "gat,gcn,sage", "--seeds", "2", "--epochs", "6",
            "--results", str(rows_file))
    done = _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)
    assert done.returncode == 0, done.stderr
    assert "summary: 3 dataset x model pairs, worst mean paired difference +0.00 points (within" in done.stdout
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(rows) == 3 * 2 * 2
    for model in ("gat", "gcn", "sage"):
        for seed in (0, 1):
            pair = {r["provider"]: r for r in rows if r["model"] == model and r["seed"] == seed}
            assert pair["dgl"]["test_acc"] == pair["dgl_accel"]["test_acc"], (model, seed)
            assert pair["dgl"]["best_epoch"] == pair["dgl_accel"]["best_epoch"], (model, seed)
    assert {r["attn_drop"] for r in rows if r["model"] == "gat"} == {0.6}


def test_unknown_model_is_refused_with_the_fix():
    done = _run("--datasets", "synthetic", "--models", "gin")
    assert done.returncode != 0
    assert "expected models among ['gat', 'gcn', 'sage'] (got 'gin'). Fix: --models gat,gcn,sage" in done.stderr
