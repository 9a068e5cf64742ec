"""One run of the report: the graphs of the mode, the sections in order, the files, the summary."""
from __future__ import annotations

import time
import traceback
from pathlib import Path

import torch

from . import (
    aggregation,
    attention,
    correctness,
    exec_paths,
    graphact,
    graphs,
    roofline,
    sampling,
    table,
    training,
    warm,
)
from .env import Results, environment
from .timing import Deadline, copy_bandwidth, matmul_rate

# Per mode: R-MAT scales with the full op x width x dtype grid, scales with one case (copy_u, F=128),
# how many shared graphs, widths, dtypes; the sampling and execution-path graphs.
PLANS = {
    "full": dict(grid_scales=(22,), line_scales=(18, 19, 20, 21, 23), shared=99, shared_ops=aggregation.OPS,
                 # the largest shared graph first: the first lease stopped inside sampling on R-MAT 22
                 widths=(32, 64, 128, 256), sampling=("largest", "rmat22"), exec_paths=("largest", "rmat22"),
                 graphact=("largest", "rmat22"),
                 attention=("rmat22", "largest"), small=5, hub=1100, linear_widths=(128,),
                 # (scale, edge factor, seed) of an unsymmetrised R-MAT graph timed at copy_u and GCN, F >= 64
                 directed=(22, 32, 1)),
    "quick": dict(grid_scales=(20,), line_scales=(), shared=1, shared_ops=aggregation.OPS, widths=(64, 128),
                  sampling=("rmat20", "largest"), exec_paths=("rmat20",), attention=("rmat20",), small=5, hub=1100,
                  graphact=("rmat20",)),
    "tiny": dict(grid_scales=(5,), line_scales=(6,), shared=1, shared_ops=("copy_u",), widths=(32,),
                 sampling=("largest",), exec_paths=("rmat6",), attention=("rmat5",), small=4, hub=1030,
                 graphact=("largest",),
                 directed=(5, 32, 1)),
}
DTYPES = (torch.float32, torch.bfloat16)


def _ceilings(device, size: str) -> dict:
    nbytes = {"full": 1 << 30, "quick": 1 << 30, "tiny": 1 << 22}[size]
    n = 8192 if device.type == "cuda" else 128
    return {"copy_bytes_per_s": copy_bandwidth(device, nbytes),
            "matmul": {"fp32": matmul_rate(device, n, torch.float32), "bf16": matmul_rate(device, n, torch.bfloat16)}}


def _graphs(plan: dict, size: str, device, data: Path | None, out: Path, progress, skip: set = frozenset()) -> dict:
    """The graphs the sections that run use (R-MAT scales of a skipped section are not generated)."""
    gs = {}
    named = {n for part in ("sampling", "exec_paths", "attention", "graphact") if part not in skip for n in plan[part]}
    scales = () if "aggregation" in skip else plan["grid_scales"] + plan["line_scales"]
    for scale in sorted(set(scales) | {int(n[4:]) for n in named if n.startswith("rmat")}):
        t0 = time.perf_counter()
        gs[f"rmat{scale}"] = graphs.rmat(scale, device)
        progress(f"R-MAT scale {scale}: {gs[f'rmat{scale}'].num_edges:,} edges ({time.perf_counter() - t0:.1f} s)")
    if "aggregation" not in skip and plan.get("directed"):
        g = graphs.rmat_directed(*plan["directed"], device)
        gs[g.name] = g
        progress(f"R-MAT {g.name} (directed): {g.num_edges:,} edges")
    paths = graphs.shared_paths(data)
    if size == "tiny":  # the loader's code path on a graph of our own (CI may have no shared data)
        tiny = out / "tiny_graph.npz"
        graphs.save_npz(tiny, graphs.rmat(5, "cpu", seed=9))
        paths = [tiny]
    for p in paths[:plan["shared"]]:
        gs[p.stem] = graphs.load_npz(p, device)
    if not paths:
        progress("no shared graphs found (stage them: python -m dgl_accel.gpu_report.graphs stage)")
    gs["largest"] = gs[paths[0].stem] if paths else graphs.rmat(plan["grid_scales"][0], device)
    return gs


def run(device, size: str, out: Path, data, timing: dict, skip: set, command: str, progress, started,
        budget: float | None = None, warm_jobs: int = 0, aggregation_graphs: str = "all",
        correctness_part: str = "all", training_graphs: str = "all", training_cases: str = "") -> int:
    """The report; ``budget`` seconds (from ``started``) bound it: a section or case that would start
    later is skipped and listed, and every row is written as it is added, so a lease that
    ends early still returns what was measured."""
    plan = PLANS[size]
    deadline = Deadline(None if budget is None else budget - (time.perf_counter() - started))
    mode = "interpret" if device.type != "cuda" else "gpu"
    results = Results({**environment(device, mode), "size": size}, stream_to=out)
    progress(f"gpu_report on {results.env['device']} (torch {results.env['torch']}, triton {results.env['triton']}, "
             f"{size})")
    out.mkdir(parents=True, exist_ok=True)
    ceilings = _ceilings(device, size)
    progress(f"copy bandwidth {ceilings['copy_bytes_per_s'] / 1e9:,.1f} GB/s, fp32 product "
             f"{ceilings['matmul']['fp32'] / 1e12:.3g} TFLOP/s")
    results.add("environment", copy_bytes_per_s=ceilings["copy_bytes_per_s"], matmul=ceilings["matmul"],
                command=command)
    gs = _graphs(plan, size, device, data, out, progress, skip)

    if warm_jobs > 1 and device.type == "cuda" and correctness_part == "all":
        warm.warm(warm_jobs, plan["small"], plan["hub"], max(30.0, min(240.0, deadline.left() / 3)), progress)
    progress("correctness: every registered kernel specialisation against the references")
    cov = correctness.run(results, device, small=graphs.rmat(plan["small"], device), hub_degree=plan["hub"],
                          sampling_graph=graphs.rmat(plan["small"] + 2, "cpu"), tiny=size == "tiny",
                          progress=progress, part=correctness_part)
    progress(f"correctness: {cov['checks']} checks, {cov['mismatches']} mismatches; launched "
             f"{cov['launched']}/{cov['registered']} registered specialisations")

    def agg():
        agg_plan = [(f"rmat{s}", aggregation.OPS, plan["widths"], DTYPES) for s in plan["grid_scales"]]
        agg_plan += [(f"rmat{s}", ("copy_u",), (128,), DTYPES) for s in plan["line_scales"]]
        if plan.get("directed"):
            scale, factor, seed = plan["directed"]
            widths = [w for w in plan["widths"] if w >= 64] or list(plan["widths"])
            agg_plan += [(f"rmat{scale}d{factor}s{seed}", ("copy_u", "gcn"), tuple(widths), DTYPES)]
        shared = [k for k, g in gs.items() if g.kind == "shared" and k != "largest"]
        agg_plan += [(k, plan["shared_ops"], plan["widths"], DTYPES) for k in shared]
        agg_plan = [p for p in agg_plan if aggregation_graphs in ("all", gs[p[0]].kind)]
        aggregation.run(results, gs, agg_plan, device, ceilings["copy_bytes_per_s"], timing, progress, deadline,
                        plan.get("linear_widths"))

    # aggregation last: it is the one section cut case by case, so it takes whatever budget is left
    sections = [
        ("attention", lambda: attention.run(results, _unique(gs, plan["attention"]), device, timing,
                                            size == "tiny", progress, deadline)),
        ("sampling", lambda: sampling.run(results, _unique(gs, plan["sampling"]), device, timing, size == "tiny",
                                          progress, deadline)),
        ("training", lambda: training.run(results, device, size, _labelled(size, data, out), progress, deadline,
                                          training_graphs, training_cases)),
        ("exec_paths", lambda: exec_paths.run(results, _unique(gs, plan["exec_paths"]), device, timing,
                                              128 if size != "tiny" else 16, progress, deadline)),
        ("graphact", lambda: graphact.run(results, _unique(gs, plan["graphact"]), device, timing, size == "tiny",
                                          progress, deadline)),
        ("aggregation", agg),
    ]
    for name, section in sections:
        if name in skip:
            continue
        if deadline.passed():
            progress(f"{name}: skipped (the --budget-s budget is spent)")
            results.add("skipped", part=name, reason="budget spent")
            continue
        progress(name.replace("_", " "))
        try:
            section()
        except Exception as exc:  # one section's crash is a finding; the others still run and write
            progress(f"{name}: FAILED {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
            results.add("failed", part=name, error=f"{type(exc).__name__}: {exc}"[:2000])

    seconds = time.perf_counter() - started
    written = results.write(out)
    docs = out / "docs"
    png = roofline.plot(results.section("aggregation"), ceilings, results.env["device"],
                        docs / "gpu_report_roofline.png")
    md = docs / "gpu_report.md"
    md.write_text(table.render(results, cov, ceilings, command, png.name, seconds))
    progress("wrote " + ", ".join(str(p) for p in written + [md, png]))
    _summary(results, cov, progress)
    return 0 if cov["mismatches"] == 0 and not cov["missing"] and not results.section("failed") else 1


def _labelled(size: str, data: Path | None, out: Path) -> Path | None:
    """The training section's labelled graph: the shared graph with features and labels of the most
    nodes (a tiny one of our own under ``tiny``: CI may have no shared data)."""
    if size == "tiny":
        return training.save_labelled(out / "tiny_labelled.npz")
    return graphs.labelled_path(data)


def _unique(gs: dict, names) -> list:
    seen, out = set(), []
    for n in names:
        if n in gs and id(gs[n]) not in seen:
            seen.add(id(gs[n]))
            out.append(gs[n])
    return out


def _summary(results, cov: dict, progress) -> None:
    agg = [r for r in results.section("aggregation") if r.get("ok")]
    ours = [r for r in agg if r["provider"].startswith("dgl_accel") and "linear" not in r["provider"]]
    lines = [f"correctness: {cov['checks']} checks, {cov['mismatches']} mismatches, "
             f"{cov['launched']}/{cov['registered']} specialisations launched"
             + (f" ({len(cov['missing'])} never launched: FAIL)" if cov["missing"] else "")]
    if ours:
        best = max(ours, key=lambda r: r["bw_fraction_fwd"])
        lines.append(f"aggregation: {len(agg)} timings; best forward {best['gbps_fwd']:.3g} GB/s "
                     f"({100 * best['bw_fraction_fwd']:.0f}% of copy) on {best['graph']} {best['op']} "
                     f"F={best['width']} {best['dtype']}")
    for r in results.section("sampling"):
        if r["where"] == "device" and r.get("ok"):
            lines.append(f"sampling: {r['graph']} {r['sampler']}: {r['rate']:.3g} {r['unit']}")
    fused = {table.attention_key(r): r for r in results.section("attention")
             if r.get("ok") and r["provider"] == "dgl_accel fused"}
    for r in results.section("attention"):
        base = fused.get(table.attention_key(r))
        if r.get("ok") and base and r["provider"] != base["provider"]:
            lines.append(f"attention: {r['graph']} {r['dtype']} {r.get('op', 'gat')} {r['heads']}x{r['dim']} layer "
                         f"fwd+bwd: fused {base['fwd_bwd_ms']:.3g} ms, {r['provider']} "
                         f"{r['fwd_bwd_ms'] / base['fwd_bwd_ms']:.2f}x slower")
    ours = {(r["graph"], r["model"], r["dtype"]): r for r in results.section("training")
            if r.get("ok") and r["provider"] == "dgl_accel"}
    for r in results.section("training"):
        base = ours.get((r["graph"], r["model"], r["dtype"]))
        if base and r is not base:
            lines.append(f"training: {r['graph']} {r['model']} {r['dtype']}: ours {base['step_s'] * 1e3:.3g} ms, "
                         f"{r['provider']} " + (f"{r['step_s'] / base['step_s']:.2f}x our step" if r.get("ok")
                                                else (r.get("error") or "failed")[:80]))
    for r in results.section("exec_paths"):
        if r.get("ok"):
            lines.append(f"execution paths: {r['graph']} {r['train_fraction']:.0%} depth {r['depth']}: "
                         f"{r['speedup']:.2f}x")
    progress("summary\n  " + "\n  ".join(lines))
