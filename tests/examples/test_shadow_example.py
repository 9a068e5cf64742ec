"""examples/shadow_gnn.py (issue 19) runs end to end for two epochs on the synthetic graph (no shared
datasets needed): progress lines, a line per split and a ``summary:`` line with finite accuracies,
for the k-hop and PPR shaDow models (every layer read out, a PPR-weighted pool, each classifier head)
and the full-batch baseline; a shared dataset it cannot find is refused with the fix; a PPR-weighted pool
without a PPR scope is refused."""
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.scripts import run_script_here

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "shadow_gnn.py"
# The example in a fresh process (torch and DGL imported: over 2 s on 2 cores) is the slow case of a test that
# takes ``entry``; its quick case runs the same script as __main__ in this process (``_run_here``).
ENTRIES = quick_first(["runpy", "python"])


def _run(*args, env=None):
    return subprocess.run([sys.executable, str(EXAMPLE), "--epochs", "2", "--synthetic-nodes", "400", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=env)




def _run_here(monkeypatch, capsys, *args, env=None):
    """``_run`` in this process (runpy, as __main__): the same arguments, exit status, stdout and stderr."""
    return run_script_here(monkeypatch, capsys, EXAMPLE, "--epochs", "2", "--synthetic-nodes", "400", *args, env=env)


# every model in a fresh process (over 2 s on 2 cores each: the slow cases); the full-batch baseline in this
# process is the quick case
@pytest.mark.parametrize("entry, args", quick_first([
    ("runpy", ("--dataset", "synthetic", "--model", "sage-fullbatch")),
    ("python", ("--dataset", "synthetic")),
    ("python", ("--dataset", "synthetic", "--model", "shadow-gcn", "--scope", "ppr", "--topk", "16", "--layers", "3",
                "--readout", "center", "--no-residual", "--norm", "layer", "--head", "none")),
    ("python", ("--dataset", "synthetic", "--scope", "ppr", "--topk", "16", "--norm", "layer", "--jk", "cat",
                "--head", "linear", "--readout", "center")),
    ("python", ("--dataset", "synthetic", "--scope", "ppr", "--topk", "16", "--norm", "layer", "--jk", "cat",
                "--pool-weights", "ppr", "--rezero")),
    ("python", ("--dataset", "synthetic", "--model", "sage-fullbatch")),
]), ids=["sage-fullbatch-in-process", "shadow-sage-khop", "shadow-gcn-ppr-head-none", "shadow-sage-ppr-jk-linear-head",
         "shadow-sage-ppr-jk-weighted", "sage-fullbatch"])
def test_example_trains_and_prints_the_summary(entry, args, monkeypatch, capsys):
    proc = _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any("[split 0.0] epoch   1" in line for line in lines), proc.stdout
    summary = [line for line in lines if line.startswith("summary:")]
    assert len(summary) == 1 and lines[-1] == summary[0], proc.stdout
    test = re.search(r"test=([\d.na]+) \+- ", summary[0])
    val = re.search(r"val=([\d.na]+) \+- ", summary[0])
    assert test and val, summary[0]
    for acc in (float(test.group(1)), float(val.group(1))):
        assert math.isfinite(acc) and 0 <= acc <= 100, summary[0]
    assert "time_per_run=" in summary[0]


# shaDow-SAGE (PPR scope) in fresh processes: over 2 s on 2 cores, the slow case; the quick case runs the
# full-batch baseline (the same split and repeat loop) in this process
@pytest.mark.parametrize("entry, model", quick_first([("runpy", ("--model", "sage-fullbatch")),
                                                      ("python", ("--scope", "ppr", "--topk", "16"))]),
                         ids=["sage-fullbatch-in-process", "shadow-sage-ppr"])
def test_repeats_average_per_split_and_repeat_zero_is_the_single_run(monkeypatch, capsys, entry, model):
    """--repeats 2: a split's figure is the mean of its two runs, and run 0 uses the split's own seed
    (the same figures as a run without repeats)."""
    common = ("--dataset", "synthetic", *model, "--splits", "2")
    if entry == "runpy":
        single, repeated = _run_here(monkeypatch, capsys, *common), _run_here(monkeypatch, capsys, *common, "--repeats", "2")
    else:
        single, repeated = _run(*common), _run(*common, "--repeats", "2")
    assert single.returncode == 0 and repeated.returncode == 0, (single.stderr + repeated.stderr)[-3000:]

    def run_lines(proc):  # {(split, repeat): (val, test)} from the "split s.r: val v test t" lines
        return {(int(m[1]), int(m[2])): (float(m[3]), float(m[4]))
                for m in re.finditer(r"^split (\d+)\.(\d+): val ([\d.]+) test ([\d.]+)", proc.stdout, re.M)}

    one, two = run_lines(single), run_lines(repeated)
    assert set(one) == {(0, 0), (1, 0)} and set(two) == {(0, 0), (0, 1), (1, 0), (1, 1)}, repeated.stdout
    assert one[(0, 0)] == two[(0, 0)] and one[(1, 0)] == two[(1, 0)]
    per_split = re.search(r"per_split_test=\[([\d., ]+)\]", repeated.stdout)
    expected = [round((two[(s, 0)][1] + two[(s, 1)][1]) / 2 * 100, 2) for s in (0, 1)]
    assert [float(v) for v in per_split.group(1).split(",")] == pytest.approx(expected, abs=0.006), repeated.stdout
    assert "repeats=2" in repeated.stdout and "per_run_test_std=" in repeated.stdout


@pytest.mark.parametrize("entry", ENTRIES)
def test_select_acc_loss_keeps_training_through_accuracy_ties(monkeypatch, capsys, entry):
    """--select acc+loss counts an equal validation accuracy at a lower loss as better: on the same
    seeded trajectory it stops no earlier and keeps a state at least as accurate on validation, and on
    this run (full batch, synthetic: validation accuracy ties are common) it moves some split's choice."""
    common = ("--dataset", "synthetic", "--model", "sage-fullbatch", "--epochs", "40", "--patience", "5",
              "--splits", "3")
    def run(*args):
        return _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)

    runs = {sel: run(*common, "--select", sel) for sel in ("acc", "acc+loss")}
    parsed = {}
    for sel, proc in runs.items():
        assert proc.returncode == 0, proc.stderr[-3000:]
        parsed[sel] = [(float(m[1]), int(m[2])) for m in
                       re.finditer(r"^split \d+\.0: val ([\d.]+) test [\d.]+ best epoch (\d+)", proc.stdout, re.M)]
    assert len(parsed["acc"]) == len(parsed["acc+loss"]) == 3
    for (val_a, epoch_a), (val_b, epoch_b) in zip(parsed["acc"], parsed["acc+loss"]):
        assert val_b >= val_a and epoch_b >= epoch_a
    assert parsed["acc"] != parsed["acc+loss"]


# both models in fresh processes, the plot script too: over 2 s on 2 cores, the slow case; the quick case runs
# the full-batch baseline and the plot script in this process
@pytest.mark.parametrize("entry, models", quick_first([("runpy", ("sage-fullbatch",)),
                                                       ("python", ("shadow-sage", "sage-fullbatch"))]),
                         ids=["sage-fullbatch-in-process", "both-models"])
def test_results_rows_match_the_printed_runs_and_plot(tmp_path, monkeypatch, capsys, entry, models):
    """--results appends one JSON row per run (the printed figures, the flags); the plot script draws
    them and refuses a selection rule with no rows, naming the fix."""
    import json

    plot = REPO / "bench" / "plot_shadow_accuracy.py"

    def run(*args):
        return _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)

    def draw(*args):
        if entry == "runpy":
            return run_script_here(monkeypatch, capsys, plot, *args)
        return subprocess.run([sys.executable, str(plot), *args], capture_output=True, text=True, timeout=120, cwd=REPO)

    results = tmp_path / "acc.jsonl"
    for model in models:
        proc = run("--dataset", "synthetic", "--model", model, "--scope", "ppr", "--topk", "16", "--splits", "2",
                   "--repeats", "2", "--results", str(results))
        assert proc.returncode == 0, proc.stderr[-3000:]
        printed = {(int(m[1]), int(m[2])): (float(m[3]), float(m[4])) for m in
                   re.finditer(r"^split (\d+)\.(\d+): val ([\d.]+) test ([\d.]+)", proc.stdout, re.M)}
        rows = [json.loads(line) for line in results.read_text().splitlines()]
        mine = [r for r in rows if r["flags"]["model"] == model]
        assert len(mine) == 4 and {(r["split"], r["repeat"]) for r in mine} == set(printed)
        for r in mine:
            assert (round(r["val"], 4), round(r["test"], 4)) == printed[(r["split"], r["repeat"])]
            assert r["flags"]["select"] == "acc" and r["dataset"] == "synthetic" and r["timestamp"]
    out = tmp_path / "acc.png"
    proc = draw(str(results), "-o", str(out))
    assert proc.returncode == 0 and out.stat().st_size > 10_000, proc.stderr[-2000:]
    proc = draw(str(results), "--select", "acc+loss")
    assert proc.returncode != 0 and "expected rows run with --select acc+loss" in proc.stderr


@pytest.mark.parametrize("entry", ENTRIES)
def test_missing_shared_dataset_is_refused_with_the_fix(tmp_path, monkeypatch, capsys, entry):
    if entry == "runpy":
        proc = _run_here(monkeypatch, capsys, "--dataset", "graphdata_coauthor_cs",
                         env={"DGL_ACCEL_DATASETS": str(tmp_path)})  # an empty folder: no npz there
    else:
        env = {k: v for k, v in __import__("os").environ.items()}
        env["DGL_ACCEL_DATASETS"] = str(tmp_path)  # an empty folder: no npz there
        proc = _run("--dataset", "graphdata_coauthor_cs", env=env)
    assert proc.returncode != 0
    assert "expected one shared dataset matching" in proc.stderr and "--dataset synthetic" in proc.stderr


@pytest.mark.parametrize("entry", ENTRIES)
def test_ppr_weighted_pool_needs_the_ppr_scope(monkeypatch, capsys, entry):
    args = ("--dataset", "synthetic", "--scope", "khop", "--pool-weights", "ppr")
    proc = _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)
    assert proc.returncode == 2 and "--pool-weights ppr needs --scope ppr" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("entry", ENTRIES)
def test_head_none_needs_the_center_readout(monkeypatch, capsys, entry):
    args = ("--dataset", "synthetic", "--head", "none", "--jk", "cat", "--readout", "center")
    proc = _run_here(monkeypatch, capsys, *args) if entry == "runpy" else _run(*args)
    assert proc.returncode == 2 and "--head none needs --readout center and no --jk" in proc.stderr, proc.stderr[-2000:]
