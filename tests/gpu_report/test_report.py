"""``python -m dgl_accel.gpu_report --interpret --tiny``: every code path of the GPU report on CPU
(the Triton interpreter, tiny graphs), run once in a subprocess as CI runs it; plus the parts that
need no run: the R-MAT generator, the rate formulas and the launch recorder.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dgl_accel
from dgl_accel.core import launch
from dgl_accel.core.vector_scale import scale
from dgl_accel.gpu_report import aggregation, coverage, graphs, rmat, table, timing
from dgl_accel.gpu_report.correctness import Checks
from dgl_accel.gpu_report.env import Results
from dgl_accel.kernels.registry import specialisations

ROOT = Path(__file__).resolve().parents[2]
ENV_FIELDS = ("device", "driver", "torch", "triton", "cuda", "mode", "timestamp")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_report")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "DGL_ACCEL_BACKEND")}
    proc = subprocess.run([sys.executable, "-m", "dgl_accel.gpu_report", "--interpret", "--tiny", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    rows = {}
    for path in (out / "bench" / "results").glob("gpu_*.jsonl"):
        rows[path.stem[4:]] = [json.loads(line) for line in path.read_text().splitlines()]
    return proc, out, rows


def test_tiny_run_writes_every_file_with_the_environment(report):
    proc, out, rows = report
    assert "summary" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert set(rows) >= {"environment", "correctness", "coverage", "aggregation", "sampling", "attention",
                         "training", "training_accuracy", "training_repeat_calls", "exec_paths"}, rows.keys()
    for section, section_rows in rows.items():
        assert section_rows, section
        for row in section_rows:
            assert all(row.get(k) for k in ENV_FIELDS), (section, row)
            assert row["mode"] == "interpret" and row["size"] == "tiny"
    png = out / "docs" / "gpu_report_roofline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_tiny_run_finds_no_mismatch_and_launches_every_specialisation(report):
    proc, _, rows = report
    bad = [r for r in rows["correctness"] if not r["ok"]]
    assert not bad, bad[:5]
    cov = rows["coverage"][0]
    assert cov["mismatches"] == 0 and cov["checks"] == len(rows["correctness"]) >= 150
    # the frontier kernel's compiled variant (128 lanes) is listed apart, not as missing
    assert cov["other_mode"] == ["_frontier_kernel " + next(
        s.tag for s in specialisations() if s.kernel == "_frontier_kernel" and s.constexprs["BLOCK"] == 128)]
    assert cov["registered"] == len(specialisations()) - 1
    # every registered variant is the one a launcher selects (this found 84 that were not: the
    # deterministic forward without the destination scale, the reduce at 1 warp)
    assert not cov["missing"], cov["missing"][:10]
    assert cov["launched"] == cov["registered"]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_tiny_run_times_every_provider_and_sampler(report):
    _, _, rows = report
    agg = rows["aggregation"]
    assert {r["op"] for r in agg} == set(aggregation.OPS) and {r["dtype"] for r in agg} == {"float32", "bfloat16"}
    ours = [r for r in agg if r["provider"].startswith("dgl_accel")]
    assert ours and all(r["ok"] and r["fwd_ms"] > 0 and r["fwd_bwd_ms"] > 0 and r["bw_fraction_fwd"] > 0 for r in ours)
    assert any("linear gs=" in r["provider"] for r in ours) and any("cost model gs=" in r["provider"] for r in ours)
    assert all(r["fetch_line_ms"] > r["once_line_ms"] > 0 for r in ours)
    # every case also ran split (the interpreter's L2: a sixteenth of the rows), and says what "auto" chose
    cases = {(r["graph"], r["op"], r["width"], r["dtype"]) for r in ours}
    split = [(r["graph"], r["op"], r["width"], r["dtype"]) for r in ours if "locality split" in r["provider"]]
    assert sorted(split) == sorted(cases), (len(split), len(cases))
    assert all("locality split (in view" in r["locality"] for r in ours if "locality split" not in r["provider"])
    plans = rows["aggregation_plan"]  # one per graph, each a split built on a new graph and timed
    assert plans and all(r["split"] and r["hot_rows"] >= 1 and r["plan_ms"] > 0 and r["fwd_ms"] > 0 for r in plans)
    # torch.sparse.mm on CPU CSR has no bf16 kernel (MKL); on CUDA (cuSPARSE) both dtypes run
    assert all(r["ok"] for r in agg if r["provider"].startswith("torch.sparse") and r["dtype"] == "float32")
    samplers = rows["sampling"]
    assert len({r["sampler"].split(" ")[0] for r in samplers}) == 10  # with PPR, k-hop, shaDow, one layer, bound
    for mode in ("shaDow k-hop", "shaDow per-target"):  # merged and per-target: the same subgraphs on both paths
        shadow = [r for r in samplers if r["sampler"].startswith(mode)]
        assert {r["where"] for r in shadow} == {"device", "cpu"} and \
            len({(r["nodes"], r["edges"]) for r in shadow}) == 1, shadow
    blocks = [r for r in samplers if r["sampler"].startswith("neighbor blocks")]
    assert {r["where"] for r in blocks} == {"device", "cpu"} and all(r["host_reads"] >= 1 for r in blocks), blocks
    for kind in ("blocks [", "blocks weighted"):  # uniform and weighted: the same samples on both paths
        same = [r for r in blocks if kind in r["sampler"]]
        assert {r["where"] for r in same} == {"device", "cpu"} and len({r["count"] for r in same}) == 1, same
    bound = [r for r in samplers if r["sampler"].startswith("trivial")]
    assert len(bound) == 6 and all(r["count"] > 0 for r in bound), bound  # 3 seed counts x (device, cpu)
    assert all(r["ok"] and r["rate"] > 0 for r in samplers), [r for r in samplers if not r["ok"]]
    assert {r["where"] for r in samplers} == {"device", "cpu"}
    ppr = [r for r in samplers if r["sampler"].startswith("PPR")]
    assert {r["where"] for r in ppr} == {"device", "cpu"} and all(r["mean_size"] >= 1 for r in ppr), ppr
    layers = rows["attention"]  # our fused and unfused GAT layers ran in both dtypes; peers may be absent
    ours = {(r["provider"], r["dtype"]) for r in layers if r["provider"].startswith("dgl_accel") and r["ok"]
            and r["fwd_ms"] > 0 and r["fwd_bwd_ms"] > 0}
    assert ours == {(p, d) for p in ("dgl_accel fused", "dgl_accel unfused") for d in ("float32", "bfloat16")}, layers
    assert all(r["ok"] or r["error"] for r in layers)
    # tiny: one configuration (2 heads x 8: the all-heads kernels) on every graph; the full run adds 8 x 8
    assert {(r["heads"], r["dim"]) for r in layers} == {(2, 8)}
    assert "rmat5" in {r["graph"] for r in layers}, layers  # the hub-tail rows of an earlier lease are gone
    directed = {(r["op"], r["dtype"]) for r in agg if r["graph"] == "rmat5d32s1" and r["provider"].startswith("dgl")}
    assert directed == {(op, d) for op in ("copy_u", "gcn") for d in ("float32", "bfloat16")}, directed
    acts = rows["graphact"]  # GraphACT: two walk subgraphs, plain and through the plan, both timed
    assert {r["subgraph"] for r in acts} == {0, 1} and all(
        r["ok"] and r["edges"] > 0 and r["plain_ms"] > 0 and r["plan_ms"] > 0 and r["gamma_read"] >= 1 for r in acts)
    paths = rows["exec_paths"]
    assert {(r["train_fraction"], r["depth"]) for r in paths} == {(0.01, 0), (0.01, 1), (0.1, 0), (0.1, 1)}
    assert all(r["ok"] for r in paths), paths


def test_tiny_run_trains_every_model_with_every_provider_to_the_same_losses(report):
    _, _, rows = report
    train = rows["training"]
    cases = {(r["graph"], r["model"], r["dtype"]) for r in train}
    assert cases == {("rmat6", m, d) for m, d in (("gcn", "float32"), ("gat", "float32"), ("sage", "float32"),
                                                   ("gcn", "bfloat16"), ("gcn", "autocast-bfloat16"))}, cases
    for graph, model, dtype in cases:
        case = [r for r in train if (r["graph"], r["model"], r["dtype"]) == (graph, model, dtype)]
        ours = next(r for r in case if r["provider"] == "dgl_accel")
        assert ours["ok"] and ours["swapped"] == (3 if model == "sage" else 2) and ours["step_s"] > 0, ours
        assert ours["reference"] == "pyg" and ours["max_relative_loss_gap"] <= (1e-3 if dtype == "float32" else 5e-2)
        assert {r["provider"] for r in case} >= {"pyg", "dgl_accel"} and all(r["losses"] for r in case if r["ok"])
        if model == "sage":
            assert all(ours[f"{k}_s"] > 0 for k in ("sample", "gather", "forward", "backward")), ours
    # PyG's torch.sparse adjacency: fp32 runs; bf16 has no CPU kernel (MKL), which its row says
    sparse = {r["dtype"]: r for r in train if r["provider"] == "pyg torch.sparse"}
    assert sparse["float32"]["ok"] and sparse["float32"]["max_relative_loss_gap"] <= 1e-3
    assert not sparse["bfloat16"]["ok"] and "BFloat16" in sparse["bfloat16"]["error"]
    # after the first call, a swapped layer on the same edge_index does no graph work and reads nothing
    calls = rows["training_repeat_calls"][0]
    assert calls["cache_builds"][0] >= 1 and calls["cache_builds"][1:] == [0, 0], calls
    assert calls["host_reads"][1:] == [0, 0], calls
    acc = rows["training_accuracy"]
    assert [(r["model"], r["seed"]) for r in acc] == [("gcn", 0)] and 0 < acc[0]["dgl_accel"] == acc[0]["pyg"], acc


def test_sampler_only_correctness_says_coverage_was_not_judged():
    cov = {"registered": 10, "launched": 2, "missing": [], "extra": [], "launches": 5, "per_kernel": {},
           "part": "sampling"}
    text = "\n".join(table.correctness([{"family": "sampling", "case": "c", "ok": True, "error": ""}], cov))
    assert "launch coverage not judged" in text and "1 checks, 0 mismatches **pass**" in text
    from dgl_accel.gpu_report import correctness
    with pytest.raises(ValueError, match="expected correctness part 'all' or 'sampling'"):
        correctness.run(None, torch.device("cpu"), small=None, hub_degree=0, sampling_graph=None, tiny=True,
                        progress=print, part="kernels")


def test_table_lists_every_section(report):
    _, out, _ = report
    md = (out / "docs" / "gpu_report.md").read_text()
    for section in table.SECTIONS:
        assert f"## {section}" in md
    assert "gpu_report_roofline.png" in md and "| copy_u | 32 | float32 |" in md


# ------------------------------------------------------------------------------ no run needed
def test_rmat_edge_count_symmetry_and_skew():
    src, dst = rmat.rmat_edges(12, seed=3)
    assert src.numel() == 16 * 2**12 and int(torch.maximum(src, dst).max()) < 2**12
    s, d, n = rmat.rmat_graph(12, seed=3)
    assert n == 2**12 and 0 < s.numel() <= 2 * src.numel()
    assert not bool((s == d).any())
    key = set((s * n + d).tolist())
    assert len(key) == s.numel() and key == set((d * n + s).tolist())  # no duplicates; symmetric
    deg = torch.bincount(d, minlength=n).double()
    assert deg.max() > 20 * deg.mean()  # a power-law-like skew: hubs far above the mean
    assert float((deg == 0).double().mean()) > 0.05  # and many vertices R-MAT never hits
    same = rmat.rmat_graph(12, seed=3)
    assert torch.equal(same[0], s) and torch.equal(same[1], d)


def test_directed_rmat_keeps_one_direction_of_each_drawn_edge():
    src, dst = rmat.rmat_edges(10, 32, seed=1)
    s, d, n = rmat.rmat_graph(10, 32, seed=1, directed=True)
    drawn = set((src[src != dst] * n + dst[src != dst]).tolist())
    key = (s * n + d).tolist()
    assert set(key) == drawn and len(key) == len(drawn) and key == sorted(key)  # every drawn edge once, sorted
    assert not bool((s == d).any()) and set(key) != set((d * n + s).tolist())  # not symmetrised
    g = graphs.rmat_directed(10, 32, 1, torch.device("cpu"))
    assert g.name == "rmat10d32s1" and g.num_edges == len(key)
    assert not torch.equal(torch.bincount(g.src, minlength=n), torch.bincount(g.dst, minlength=n))


def test_rmat_rejects_bad_parameters():
    with pytest.raises(ValueError, match="a \\+ b \\+ c < 1"):
        rmat.rmat_edges(4, abc=(0.6, 0.3, 0.2))


@pytest.mark.interpreter
def test_the_bulk_case_samples_as_many_edges_on_the_device_pipeline_as_on_the_cpu_path():
    from dgl_accel.core.sampling.bulk.matrix import canonical_adjacency
    from dgl_accel.gpu_report import sampling
    from dgl_accel.gpu_report.correctness_sampling import structure
    g = graphs.rmat(9, torch.device("cpu"))
    s = structure(g, "cpu")
    canon = canonical_adjacency(s.indptr.numpy(), s.indices.numpy(), s.eids.numpy(), g.num_nodes)
    assert canon.unit  # the report's R-MAT graphs have no parallel edges: the device pipeline applies
    seeds = torch.randint(g.num_nodes, (96,), generator=torch.Generator().manual_seed(1)).numpy()
    native = sampling.bulk_sampling(canon, seeds, 4, "native", torch.device("cpu"))
    with dgl_accel.use_backend("triton"):
        device = sampling.bulk_sampling(canon, seeds, 4, "triton", torch.device("cpu"))
    assert native == device > 96


def test_rate_formulas():
    # 1,000 rows, 10,000 edges, F=128, fp32 features, int32 ids
    nbytes = aggregation.compulsory_bytes(1000, 10_000, 128, 4, 4)
    assert nbytes == 1001 * 8 + 10_000 * 4 + 10_000 * 128 * 4 + 1000 * 128 * 4
    assert aggregation.flop("copy_u", 10_000, 128) == 1_280_000
    assert aggregation.flop("gcn", 10_000, 128) == aggregation.flop("u_mul_e", 10_000, 128) == 2_560_000
    assert timing.gbps(nbytes, 1e-3) == pytest.approx(nbytes / 1e6)
    assert timing.gflops(2_560_000, 1e-3) == pytest.approx(2.56)
    assert table.geomean([1.0, 4.0]) == pytest.approx(2.0)


@pytest.mark.interpreter
def test_launch_recording_is_off_by_default_and_keys_like_the_registry():
    assert launch.record_launches(None) is None  # nothing recording: kernels come back unwrapped
    kernel = launch.triton_kernel("vector_scale", "_scale_kernel", torch.device("cpu"))
    assert not isinstance(kernel, launch.RecordedKernel)
    log = coverage.LaunchLog(specialisations())
    with log.active(), dgl_accel.use_backend("triton"):
        assert isinstance(launch.triton_kernel("vector_scale", "_scale_kernel", torch.device("cpu")),
                          launch.RecordedKernel)
        scale(torch.ones(10, dtype=torch.bfloat16), 2.0)
    assert launch.record_launches(None) is None  # restored on exit
    spec = next(s for s in specialisations() if s.kernel == "_scale_kernel" and s.tag.startswith("bf16"))
    assert set(log.counts) == {coverage.spec_key(spec)}
    assert log.report(compiled=False)["per_kernel"]["_scale_kernel"] == "1/4"


def test_shards_run_every_check_exactly_once():
    # the warm-up workers split the correctness checks by shard: together they must cover each once
    ran = []
    for k in range(3):
        checks = Checks(Results({}), lambda msg: None, shard=(k, 3))
        for i in range(10):
            checks.run("family", str(i), lambda i=i: ran.append(i))
        assert len(checks.results.section("correctness")) == len(range(k, 10, 3))
    assert sorted(ran) == list(range(10))


def test_results_are_appended_once_per_row(tmp_path):
    results = Results({"device": "cpu"})
    results.add("aggregation", case=1)
    results.write(tmp_path)
    results.add("aggregation", case=2)
    results.write(tmp_path)  # a second write (after the next section) appends only the new row
    path = tmp_path / "bench" / "results" / "gpu_aggregation.jsonl"
    assert [json.loads(line)["case"] for line in path.read_text().splitlines()] == [1, 2]


def test_streamed_rows_are_on_disk_as_soon_as_they_are_added(tmp_path):
    results = Results({"device": "cpu"}, stream_to=tmp_path)
    results.add("sampling", case=1)  # no write() call: a lease cut here keeps the row
    path = tmp_path / "bench" / "results" / "gpu_sampling.jsonl"
    assert [json.loads(line)["case"] for line in path.read_text().splitlines()] == [1]
    results.add("sampling", case=2)
    results.write(tmp_path)  # the section's closing write adds nothing twice
    assert [json.loads(line)["case"] for line in path.read_text().splitlines()] == [1, 2]


def test_a_spent_budget_skips_cases_and_says_so():
    results, said = Results({}), []
    g = graphs.rmat(4, "cpu")
    plan = [(g.name, ("copy_u", "gcn"), (16,), (torch.float32,))]
    aggregation.run(results, {g.name: g}, plan, torch.device("cpu"), 1e9, dict(warmup=0, repeats=1), said.append,
                    timing.Deadline(-1))
    assert not results.section("aggregation")
    assert results.section("skipped")[0]["cases"] == 2 and "skipped" in said[-1]
    assert not timing.Deadline(None).passed() and timing.Deadline(-1).passed()


def test_warm_up_worker_runs_its_shard():
    # one shard of 100 (a handful of checks) through the worker's own command line, as warm() starts it
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "DGL_ACCEL_BACKEND")}
    proc = subprocess.run([sys.executable, "-m", "dgl_accel.gpu_report.warm", "0", "100", "4", "1030"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ran = int(proc.stdout.split("shard 0/100: ")[1].split()[0])
    assert 3 <= ran <= 9 and "slowest" in proc.stdout  # about 740 checks in the tiny run: every 100th from the first


def test_render_rebuilds_the_report_from_the_committed_gpu_rows(tmp_path):
    # the committed rows hold two H200 runs: the first found 3 mismatches, the second none; the rebuilt
    # document takes correctness from the newest run and says where every section came from
    from dgl_accel.gpu_report import render

    md = render.rebuild(ROOT / "bench" / "results", tmp_path)
    text = md.read_text()
    assert text.startswith("# GPU report: NVIDIA") and "0 mismatches **pass**" in text
    assert "- correctness: " in text and "- sampling: " in text and "## Attention" in text
    assert (tmp_path / "gpu_report_roofline.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit, match="expected GPU rows"):
        render.rebuild(tmp_path, tmp_path)  # no rows there


def test_profile_tables_every_case_with_its_host_reads(tmp_path):
    out = tmp_path / "profile.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "DGL_ACCEL_BACKEND")}
    proc = subprocess.run([sys.executable, "-m", "dgl_accel.gpu_report.profile", "--interpret", "--tiny", "--out",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    heads = [line for line in out.read_text().splitlines() if line.startswith("=== ")]
    assert [h.split(":")[0] for h in heads] == [
        "=== one layer, fanout 15, 1,024 seeds", "=== blocks [15, 10, 5], batch 1,024",
        "=== PyG NodeLoader batch (our NeighborSampler, features gathered)",
        "=== swapped GraphSAGE forward + backward on one batch",
        "=== swapped GraphSAGE forward + backward on a new batch each call"], heads
    # the stated bounds: one layer 2; blocks from distinct seeds 2 + 2 per layer
    assert "2 host reads a call" in heads[0] and "8 host reads a call" in heads[1]
    assert "0 host reads a call" in heads[3]  # the same batch again: its structure is cached
    assert "0 host reads a call" not in heads[4]  # a new batch builds its structure


def test_a_case_pyg_cannot_fit_runs_again_one_rmat_scale_down(monkeypatch):
    """PyG's full-graph models run out of device memory on the report's R-MAT graph (the messages are
    E x F); the case runs again one scale down, so that PyG has a figure to compare with."""
    from dgl_accel.gpu_report import training

    seen = []

    def fake_train(model, data, classes, providers, **kw):
        seen.append((model, data.num_nodes))
        oom = data.num_nodes == 64 and model == "gat"
        return [{"provider": p.name, "ok": not (oom and p.name == "pyg"),
                 "error": "out of memory at epoch 0: CUDA out of memory" if oom and p.name == "pyg" else None}
                for p in providers]
    monkeypatch.setattr(training, "train", fake_train)
    results = Results({"device": "cpu"})
    training.run(results, torch.device("cpu"), "tiny", None, lambda msg: None, which="rmat",
                 only="gcn-float32,gat-float32")
    assert seen == [("gcn", 64), ("gat", 64), ("gat", 32)], seen  # R-MAT 6, then GAT alone on R-MAT 5
    assert {r["graph"] for r in results.section("training")} == {"rmat6", "rmat5"}


def test_callers_that_compare_every_provider_get_a_clear_error_when_one_stopped():
    from dgl_accel.gpu_report.training import require_ok

    ok = [{"model": "gcn", "provider": "pyg", "ok": True, "error": None},
          {"model": "gcn", "provider": "dgl_accel", "ok": True, "error": None}]
    assert require_ok(ok) is ok
    stopped = [ok[0] | {"ok": False, "error": "out of memory at epoch 0: CUDA out of memory"}, ok[1]]
    with pytest.raises(RuntimeError, match=r"gcn: a provider stopped \(pyg: out of memory at epoch 0.*\)\. Fix:"):
        require_ok(stopped)


def test_the_training_cases_cover_cuda_autocast_in_both_half_dtypes():
    """On a GPU the section trains every model under bf16 and fp16 autocast (fp32 weights, as users do);
    on the CPU run one autocast case keeps the code path under test."""
    from dgl_accel.gpu_report import training
    gpu = {(model, training.label(dtype)) for model, dtype, _ in training.cases(torch.device("cuda"))}
    assert {(m, f"autocast-{d}") for m in ("gcn", "gat", "sage") for d in ("bfloat16", "float16")} <= gpu
    cpu = {training.label(dtype) for _, dtype, _ in training.cases(torch.device("cpu"))}
    assert "autocast-bfloat16" in cpu and "autocast-float16" not in cpu
    assert training.precision("autocast-bfloat16") == (torch.float32, torch.bfloat16)
    with pytest.raises(ValueError, match="autocast-<dtype>"):
        training.precision("half")

