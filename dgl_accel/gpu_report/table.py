"""The markdown report (``docs/gpu_report.md``): environment, correctness and coverage, aggregation
against the peers and the issue's goals, sampling, execution paths, and the roofline plot."""
from __future__ import annotations

import math
from collections import defaultdict

from .graphact import summary as graphact_summary

SECTIONS = ("Environment", "Correctness", "Aggregation", "Sampling", "Training", "Execution paths", "GraphACT",
            "Roofline")
GOALS = {"float32": 1.5, "bfloat16": 2.0}  # geomean of ours vs torch.sparse.mm CSR, forward+backward, F >= 64
BW_GOAL, SAMPLING_GOAL = 0.70, 100e6
PLAN_GOAL = 10  # the locality split's build, in plain forwards (issue 29)


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def _f(x, digits=3):
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}g}"


def _verdict(ok: bool) -> str:
    return "**pass**" if ok else "**FAIL**"


def environment(env: dict, ceilings: dict, args: str) -> list[str]:
    lines = ["## Environment", "", "| | |", "|---|---|"]
    for k in ("device", "compute_capability", "driver", "cuda", "torch", "triton", "python", "mode"):
        lines.append(f"| {k} | {env.get(k, '')} |")
    lines.append(f"| copy bandwidth (read + write) | {ceilings['copy_bytes_per_s'] / 1e9:,.0f} GB/s |")
    for name, rate in ceilings.get("matmul", {}).items():
        lines.append(f"| {name} matrix product | {rate / 1e12:.3g} TFLOP/s |")
    lines += [f"| command | `{args}` |", ""]
    return lines


def correctness(rows: list[dict], cov: dict) -> list[str]:
    bad = [r for r in rows if not r["ok"]]
    launched = (f"kernel specialisations launched: {cov['launched']}/{cov['registered']} {_verdict(not cov['missing'])}"
                if cov.get("part", "all") == "all" else
                f"the samplers' checks alone (`--correctness {cov['part']}`: launch coverage not judged; "
                f"{cov['launched']}/{cov['registered']} specialisations launched)")
    lines = ["## Correctness", "",
             f"{len(rows)} checks, {len(bad)} mismatches {_verdict(not bad)}; {launched} ({cov['launches']} launches, "
             f"{len(cov['extra'])} launched variants not in the registry).", "",
             "| family | checks | mismatches |", "|---|---|---|"]
    fam = defaultdict(lambda: [0, 0])
    for r in rows:
        fam[r["family"]][0] += 1
        fam[r["family"]][1] += not r["ok"]
    lines += [f"| {k} | {n} | {b} |" for k, (n, b) in fam.items()]
    lines += ["", "| kernel | specialisations launched |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in cov["per_kernel"].items()]
    if bad:
        lines += ["", "Mismatches:", ""] + [f"- {r['family']} {r['case']}: {r['error'].splitlines()[0][:300]}"
                                            for r in bad]
    if cov["missing"]:
        lines += ["", f"Registered but never launched ({len(cov['missing'])}):", ""]
        lines += [f"- `{m}`" for m in cov["missing"][:60]]
        if len(cov["missing"]) > 60:
            lines.append(f"- ... and {len(cov['missing']) - 60} more (see gpu_coverage.jsonl)")
    if cov.get("other_mode"):
        lines += ["", "Launched only in the other Triton mode (not counted): "
                  + ", ".join(f"`{m}`" for m in cov["other_mode"])]
    return lines + [""]


def _ours(provider: str) -> bool:
    return provider.startswith("dgl_accel")


def aggregation(rows: list[dict], plans: list[dict] = ()) -> list[str]:
    lines = ["## Aggregation", "",
             "Forward / forward+backward in ms; GB/s and % of copy bandwidth for our forward (compulsory bytes: "
             "indptr + indices + a gathered row per edge + the output write); `x` columns: the peer's "
             "forward+backward time over ours (autotuned gs; > 1: ours is faster); `lines fwd`: the forward's "
             "time at the copy bandwidth if every gathered row came from HBM (fetch per edge) / if each came "
             "once (compulsory); `split fwd`: ours with the locality split forced on, forward (forward+backward), "
             "where the graph's rows outgrow the L2 budget.", "",
             "| graph | op | F | dtype | ours fwd | ours fwd+bwd | GB/s | % copy | lines fwd | split fwd | "
             "linear gs fwd+bwd | torch.sparse | PyG spmm | PyG MP | DGL |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = defaultdict(dict)
    for r in rows:
        cases[(r["graph"], r["op"], r["width"], r["dtype"])][r["provider"].split(" (")[0] + (
            " linear" if "linear" in r["provider"] else " split" if "locality split" in r["provider"] else "")] = r
    ratios = defaultdict(list)
    for (graph, op, width, dtype), p in cases.items():
        ours = p.get("dgl_accel")
        if ours is None:
            continue
        base = ours.get("fwd_bwd_ms")

        def x(name, p=p, base=base):
            r = p.get(name)
            if not r or not r.get("ok") or not base:
                return "n/a" if not r or not r.get("ok") else "—"
            return f"{r['fwd_bwd_ms']:.3g} ({r['fwd_bwd_ms'] / base:.2f}x)"
        if ours.get("ok") and p.get("torch.sparse.mm", {}).get("ok") and width >= 64:
            ratios[dtype].append(p["torch.sparse.mm"]["fwd_bwd_ms"] / base)
        lin, split = p.get("dgl_accel linear", {}), p.get("dgl_accel split", {})
        bounds = f"{_f(ours.get('fetch_line_ms'))} / {_f(ours.get('once_line_ms'))}"
        split_cell = f"{_f(split.get('fwd_ms'))} ({_f(split.get('fwd_bwd_ms'))})" if split.get("ok") else "—"
        lines.append(f"| {graph} | {op} | {width} | {dtype} | {_f(ours.get('fwd_ms'))} | {_f(base)} | "
                     f"{_f(ours.get('gbps_fwd'))} | {_f(100 * ours['bw_fraction_fwd'] if ours.get('ok') else None)}% | "
                     f"{bounds} | {split_cell} | "
                     f"{_f(lin.get('fwd_bwd_ms'))} (gs {lin.get('gs')}) | {x('torch.sparse.mm')} | {x('PyG spmm')} | "
                     f"{x('PyG MessagePassing')} | {x('DGL')} |")
    lines += ["", "Goals (issue 16):", ""]
    for dtype, goal in GOALS.items():
        g = geomean(ratios.get(dtype, []))
        lines.append(f"- {dtype}, F >= 64, forward+backward vs torch.sparse.mm CSR: geomean {_f(g)}x "
                     f"(goal {goal}x) {_verdict(g >= goal) if math.isfinite(g) else '(no data)'}"
                     + (f", {goal / g:.2f}x short" if math.isfinite(g) and g < goal else ""))
    bw = [r for r in rows if r["graph"] == "rmat22" and r["op"] == "copy_u" and r["width"] == 128
          and _ours(r["provider"]) and "linear" not in r["provider"] and r.get("ok")]
    for r in bw:
        lines.append(f"- R-MAT 22, F=128, {r['dtype']} forward: {100 * r['bw_fraction_fwd']:.0f}% of copy bandwidth "
                     f"(goal {BW_GOAL:.0%}) {_verdict(r['bw_fraction_fwd'] >= BW_GOAL)}")
    if not bw:
        lines.append("- R-MAT 22, F=128 forward bandwidth: not measured in this run")
    errors = sorted({f"{r['provider']}: {r['error']}" for r in rows if not r.get("ok")})
    if errors:
        lines += ["", "Providers that did not run:", ""] + [f"- {e}" for e in errors[:20]]
    return lines + [""] + aggregation_plan(plans)


def aggregation_plan(rows: list[dict]) -> list[str]:
    """The locality split's build against the forward it serves (goal: at most 10 forwards)."""
    if not rows:
        return []
    lines = ["Locality split: building both views' plan on a graph seen for the first time, against one "
             f"plain copy_u-sum forward (goal: at most {PLAN_GOAL} forwards).", "",
             "| graph | F | dtype | hot rows | hot share | plan ms | forward ms | plan / forward |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['width']} | {r['dtype']} | {r['hot_rows']:,} | {r['hot_share']:.1%} | "
                     f"{_f(r['plan_ms'])} | {_f(r['fwd_ms'])} | {_f(r['plan_over_fwd'])} "
                     f"{_verdict(r['plan_over_fwd'] <= PLAN_GOAL) if r['split'] else '(no split: every row fits)'} |")
    return lines + [""]


def sampling(rows: list[dict]) -> list[str]:
    lines = ["## Sampling", "", "| graph | sampler | unit | device | CPU (native) | device / CPU |",
             "|---|---|---|---|---|---|"]
    pairs = defaultdict(dict)
    for r in rows:
        pairs[(r["graph"], r["sampler"], r["unit"])][r["where"]] = r
    for (graph, sampler, unit), p in pairs.items():
        dev, cpu = p.get("device", {}), p.get("cpu", {})
        rd, rc = dev.get("rate"), cpu.get("rate")
        lines.append(f"| {graph} | {sampler} | {unit} | {_f(rd) if dev.get('ok') else dev.get('error', 'n/a')[:80]} | "
                     f"{_f(rc) if cpu.get('ok') else cpu.get('error', 'n/a')[:80]} | "
                     f"{_f(rd / rc) if rd and rc else '—'} |")
    goal = [p["device"] for (graph, sampler, _), p in pairs.items()
            if graph == "rmat22" and sampler.startswith("neighbor") and p.get("device", {}).get("ok")]
    lines += ["", "Goal (issue 16): neighbour sampling >= 100 M sampled edges/s on R-MAT 22: " + (
        f"{goal[0]['rate'] / 1e6:.3g} M/s {_verdict(goal[0]['rate'] >= SAMPLING_GOAL)}" if goal else "not measured")]
    return lines + [""]


def attention_key(row: dict) -> tuple:
    """What an attention row is compared within: graph, layer kind (GAT where rows predate ``op``),
    shape, dtype."""
    return row["graph"], row.get("op", "gat"), row["in_feats"], row["heads"], row["dim"], row["dtype"]


def attention(rows: list[dict]) -> list[str]:
    lines = ["## Attention", "", "One attention layer (GAT, GATv2, dot product: projection, scores, softmax, "
             "weighted sum, bias): forward and forward+backward in ms, peak memory of one training step beyond the "
             "live inputs (MiB); `x`: the provider's forward+backward time over our fused layer's of the same kind, "
             "shape and dtype (> 1: ours is faster).", "",
             "| graph | layer | dtype | provider | fwd | fwd+bwd | x | step peak MiB |",
             "|---|---|---|---|---|---|---|---|"]
    fused = {attention_key(r): r for r in rows if r.get("ok") and r["provider"] == "dgl_accel fused"}
    for r in rows:
        base = fused.get(attention_key(r), {}).get("fwd_bwd_ms")
        peak = r.get("step_peak_bytes")
        layer = f"{r.get('op', 'gat')} {r['in_feats']} -> {r['heads']} x {r['dim']}"
        if not r.get("ok"):
            lines.append(f"| {r['graph']} | {layer} | {r['dtype']} | {r['provider']} | {r['error'][:100]} | | | |")
            continue
        lines.append(f"| {r['graph']} | {layer} | {r['dtype']} | {r['provider']} | {_f(r['fwd_ms'])} | "
                     f"{_f(r['fwd_bwd_ms'])} | {_f(r['fwd_bwd_ms'] / base) if base else '—'} | "
                     f"{_f(peak / 2**20) if peak is not None else '—'} |")
    return lines + [""]


def exec_paths(rows: list[dict]) -> list[str]:
    lines = ["## Execution paths", "", "Backward aggregation (GCN-normalised copy_u-sum, fp32) with the output "
             "gradient nonzero on N^depth(training rows) only.", "",
             "| graph | training nodes | depth | path edges | full ms | paths ms | speedup |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['train_fraction']:.0%} | {r['depth']} | {r.get('path_edges', '—')} | "
                     f"{_f(r.get('full_ms'))} | {_f(r.get('paths_ms'))} | "
                     f"{_f(r.get('speedup')) if r.get('ok') else r.get('error', '')[:120]} |")
    return lines + [""]


def graphact(rows: list[dict]) -> list[str]:
    """GraphACT's rewritten aggregation against the plain one on walk subgraphs (issue 29's goal: the
    cost model picks the faster in at least 90% of the cases)."""
    if not rows:
        return []
    lines = ["## GraphACT", "", "copy_u-sum forward+backward (fp32) on GraphSAINT walk subgraphs, plain and through "
             "the redundancy plan (pair nodes pre-added); `model`: what `use_redundancy(\"auto\")` predicts for one "
             "aggregation.", "",
             "| graph | subgraph | F | nodes | edges | rewritten | pair nodes | gamma read | plain ms | plan ms | "
             "gain | model | picked the faster |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['subgraph']} | {r['width']} | {r['nodes']:,} | {r['edges']:,} | "
                     f"{r['edges_rewritten']:,} | {r['pair_nodes']:,} | {_f(r['gamma_read'])} | {_f(r['plain_ms'])} | "
                     f"{_f(r['plan_ms'])} | {_f(r['measured_gain'])}x | {'on' if r['predicted'] else 'off'} | "
                     f"{'yes' if r['picked_faster'] else 'no'} |")
    s = graphact_summary(rows)
    lines += ["", f"- the model picked the faster in {s['picked_faster']:.0%} of {s['cases']} cases (goal 90%) "
              f"{_verdict(s['picked_faster'] >= 0.9)}; the plan was faster in {s['faster']}, median gain "
              f"{_f(s['median_gain'])}x"]
    if s.get("fitted") is not None:
        c = s["fitted"]
        lines.append(f"- constants fitted to these timings: t_edge {c.t_edge:.3g}, t_pair {c.t_pair:.3g}, "
                     f"t_round {c.t_round:.3g} s (`core/redundancy/cost.py`'s `DEFAULT_CONSTANTS['cuda']` are "
                     "modelled, not measured)")
    return lines + [""]


def training(rows: list[dict], accuracy: list[dict], repeats: list[dict] = ()) -> list[str]:
    lines = ["## Training", "", "PyG's models as written against the same models after `dgl_accel.pyg.swap`, from "
             "the same weights, epochs interleaved: median step (full graph: an epoch; SAGE: the minibatches of an "
             "epoch, split sample / gather / forward / backward), the step's peak device memory beyond the tensors "
             "live before it, the largest relative gap of "
             "the per-epoch losses to the first provider that ran; `x`: each provider's step over ours (> 1: ours is "
             "faster).", "",
             "| graph | model | dtype | provider | step ms | x | sample / gather / fwd / bwd ms | step peak MiB "
             "| loss gap |",
             "|---|---|---|---|---|---|---|---|---|"]
    ours = {(r["graph"], r["model"], r["dtype"]): r for r in rows if r.get("ok") and r["provider"] == "dgl_accel"}
    for r in rows:
        base = ours.get((r["graph"], r["model"], r["dtype"]), {}).get("step_s")
        case = f"| {r['graph']} | {r['model']} | {r['dtype']} | {r['provider']} |"
        if not r.get("ok"):
            peak = (r.get("step_peak_bytes") or 0) / 2**20
            lines.append(f"{case} {(r.get('error') or '')[:120]} | | | {_f(peak)} | |")
            continue
        split = " / ".join(_f(r[f"{k}_s"] * 1e3) for k in ("sample", "gather", "forward", "backward")) \
            if "sample_s" in r else ""
        peak = r.get("step_peak_bytes")
        lines.append(f"{case} {_f(r['step_s'] * 1e3)} | {_f(r['step_s'] / base) if base else '—'} | {split} | "
                     f"{_f(peak / 2**20) if peak else '—'} | {_f(r.get('max_relative_loss_gap'), 2)} |")
    for r in repeats:
        lines += ["", f"Swapped GCN forward+backward on {r['graph']}, calls 1 / 2 / 3: host reads "
                  f"{' / '.join(map(str, r['host_reads']))} (the last call's: {', '.join(r['read_kinds']) or 'none'}), "
                  "edge_index "
                  f"structure builds {' / '.join(map(str, r['cache_builds']))}, "
                  f"{' / '.join(_f(t * 1e3) for t in r['seconds'])} ms."]
    by = defaultdict(list)
    for r in accuracy:
        by[(r["graph"], r["model"])].append(r)
    if by:
        lines += ["", "Accuracy (test accuracy at the best validation epoch, paired by seed; labels per class for "
                  "training / validation as in the rows):",
                  "", "| graph | model | seeds | PyG | ours | ours - PyG (points) |", "|---|---|---|---|---|---|"]
        for (graph, model), rs in by.items():
            a, b = (sum(r[k] for r in rs) / len(rs) for k in ("pyg", "dgl_accel"))
            lines.append(f"| {graph} | {model} | {len(rs)} ({rs[0].get('per_class')}) | {100 * a:.2f} | "
                         f"{100 * b:.2f} | {100 * (b - a):+.2f} |")
    return lines + [""]


def render(results, cov: dict, ceilings: dict, args: str, png_name: str, seconds: float | None,
           sources: list[str] | None = None) -> str:
    env = results.env
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    lines = [f"# GPU report: {env['device']}", "",
             f"Written by `python -m dgl_accel.gpu_report` at {results.section('correctness')[0]['timestamp']}"
             f"{took}; the rows are in `bench/results/gpu_*.jsonl`.", ""]
    if sources:  # rebuilt from the files (render.py): say which run each section comes from
        lines += ["Sections from the newest run that measured them:", ""] + [f"- {s}" for s in sources] + [""]
    lines += environment(env, ceilings, args)
    lines += correctness(results.section("correctness"), cov)
    lines += aggregation(results.section("aggregation"), results.section("aggregation_plan"))
    lines += sampling(results.section("sampling"))
    lines += attention(results.section("attention"))
    lines += training(results.section("training"), results.section("training_accuracy"),
                      results.section("training_repeat_calls"))
    lines += exec_paths(results.section("exec_paths"))
    lines += graphact(results.section("graphact"))
    cut = results.section("failed") + results.section("skipped")
    if cut:  # say plainly what this run did not measure, and why
        lines += ["## Not measured in this run", ""] + [
            f"- {r['part']}: {r.get('error') or r['reason']}" + (f" ({r['cases']} cases)" if r.get("cases") else "")
            for r in cut] + [""]
    lines += ["## Roofline", "", f"![roofline]({png_name})", ""]
    return "\n".join(lines)
