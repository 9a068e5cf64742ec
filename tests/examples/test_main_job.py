"""The README's main job: a 2-layer GCN with dgl-accel's backend on the embedded synthetic graph."""
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import dgl_accel
from dgl_accel import data
from dgl_accel.testing.marks import quick_first
from dgl_accel.train_gcn import main, train

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_train_learns_and_reports_the_path(capsys):
    g = data.synthetic_graph(num_nodes=1200, seed=3)
    edges_before = g.num_edges()
    r = train(g, epochs=60, hidden=16, dropout=0.5, lr=0.01, weight_decay=5e-4, seed=0, log=None)
    assert g.num_edges() == edges_before  # self-loops were added to a copy
    assert r["final_test"] > 0.7  # the synthetic labels are learnable; chance is 0.2
    assert r["paths"] == {"copy_u_sum": {"native-cpu": 60 * 2 * 2},  # 2 layers x (train + eval) per epoch
                          "copy_u_sum_backward": {"native-cpu": 60 * 2}}  # 2 layers x train per epoch


@pytest.mark.interpreter
# 300 nodes: over 2 s on 2 cores under the interpreter (the slow case); 30 run the same code quickly
@pytest.mark.parametrize("num_nodes", quick_first([30, 300]))
def test_triton_path_gives_the_same_model_as_native(num_nodes):
    g = data.synthetic_graph(num_nodes=num_nodes, seed=1)
    results = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            results[name] = train(g, epochs=3, hidden=8, dropout=0.0, lr=0.01, weight_decay=5e-4, seed=0, log=None)
    assert "triton-interpreter" in results["triton"]["paths"]["copy_u_sum"]
    assert abs(results["triton"]["final_test"] - results["native"]["final_test"]) < 1e-6


def test_cli_prints_progress_and_summary(capsys):
    assert main(["--epochs", "12", "--backend", "native"]) == 0
    out = capsys.readouterr().out
    assert "epoch    1" in out and "epoch   10" in out and "epoch   12" in out
    summary = [line for line in out.splitlines() if line.startswith("summary:")]
    assert summary and "test accuracy" in summary[0] and "backend native" in summary[0]
    assert "copy_u_sum: native-cpu x" in summary[0]


# ``python -m`` in a fresh process (torch and DGL imported: over 2 s on 2 cores) is the slow case; the quick
# case calls the same main() in this process
@pytest.mark.parametrize("entry", quick_first(["main()", "python -m"]))
def test_cli_rejects_unlabelled_dataset(tmp_path, capsys, entry):
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n1 2\n")
    args = ["--dataset", str(edges), "--epochs", "1"]
    if entry == "main()":
        returncode, stderr = main(args), capsys.readouterr().err
    else:
        proc = subprocess.run([sys.executable, "-m", "dgl_accel.train_gcn", *args], capture_output=True, text=True,
                              timeout=300)
        returncode, stderr = proc.returncode, proc.stderr
    assert returncode != 0 and "expected the graph to carry ndata['feat']" in stderr


# the script in a fresh process (torch and DGL imported: over 2 s on 2 cores) is the slow case; the quick case
# runs it as __main__ in this process (runpy)
@pytest.mark.parametrize("entry", quick_first(["runpy", "python"]))
def test_one_line_switch_example_runs(tmp_path, capsys, monkeypatch, entry):
    args = ["--dataset", "synthetic", "--epochs", "3"]
    if entry == "runpy":
        monkeypatch.syspath_prepend(str(EXAMPLES))  # its ``progress`` module, next to it
        monkeypatch.setattr(sys, "argv", [str(EXAMPLES / "gcn_one_line_switch.py"), *args])
        try:
            runpy.run_path(str(EXAMPLES / "gcn_one_line_switch.py"), run_name="__main__")
        finally:
            sys.modules.pop("progress", None)  # leave no examples/ module behind for later tests
        stdout = capsys.readouterr().out
    else:
        proc = subprocess.run([sys.executable, "examples/gcn_one_line_switch.py", *args], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        stdout = proc.stdout
    out = stdout.splitlines()
    assert "== summary: GCN on synthetic, one import switched" in out  # after the progress lines
    lines = [line.strip() for line in out[out.index("== summary: GCN on synthetic, one import switched"):]
             if line.strip().startswith(("dgl.nn.GraphConv", "dgl_accel.nn.GraphConv"))]
    assert lines[0].startswith("dgl.nn.GraphConv") and lines[1].startswith("dgl_accel.nn.GraphConv")
    # Same seed, same model: the two runs reach the same accuracy.
    assert lines[0].split("accuracy")[1].split()[0] == lines[1].split("accuracy")[1].split()[0]
