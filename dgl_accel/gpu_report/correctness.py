"""Correctness on hardware: every kernel family launched on the report's device and compared with
the test suite's references under the test suite's rule (``dgl_accel.testing.tolerances``).

Floating ops (``scale``, aggregation forward and backward) follow the FlashAttention rule
(:func:`~dgl_accel.testing.tolerances.assert_matches_reference`: at most twice as far from the fp64
reference as plain torch in the same dtype, plus the dtype's atol) in fp32, fp16, bf16 and fp64,
with atomic and deterministic combine, int32 and int64 ids, every feature tile, and a hub of more
than 1,024 neighbours in both directions; GCN's normalisation on every variant, plain sum and mean
(the paths of ``update_all(copy_u, sum)`` and SAGEConv) on every dtype, id type, combine and tile
(plain copy_u-sum, atomic, is also what the autotuner's timer launches); all of these in the tiny
run too (each is a registered variant).  The samplers
(:mod:`.correctness_sampling`) must equal their CPU twins exactly (integer outputs: the tolerance
table's exact rule).  Launches are counted by :class:`~.coverage.LaunchLog`; a registered
specialisation that no check launched fails the report.
"""
from __future__ import annotations

import time
import traceback

import torch

from ..core.aggregation.function import aggregate
from ..core.aggregation.locality import row_tile_bytes, use_locality
from ..core.aggregation.views import TensorGraph
from ..core.vector_scale import scale
from ..kernels.registry import specialisations
from ..testing.reference import ref_gspmm, ref_scale
from ..testing.tolerances import assert_close, assert_matches_reference
from . import (
    correctness_attention,
    correctness_attention_variants,
    correctness_extrema,
    correctness_headwise,
    correctness_ppr,
    correctness_sampling,
    correctness_sddmm,
)
from .coverage import LaunchLog
from .graphs import Graph, hub_graph

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
WIDTHS = (16, 32, 64, 128)  # one per feature tile of kernels/gspmm_grouped.py (FEATURE_TILES)
MODES = ("copy_u", "u_mul_e scalar", "u_mul_e per-feature")


# (norm, reduce) of each normalisation the checks run: GCN's (the registered variants, both
# degree scales), plain sum (no scales: what update_all(copy_u, sum) and the autotuner's timer
# launch) and mean (the destination scale alone: SAGEConv's mean)
KINDS = {"gcn": ("both", "sum"), "sum": ("none", "sum"), "mean": ("none", "mean")}


def ref_aggregate(src, dst, n, x, w, gout, kind: str = "gcn"):
    """(out, grad x[, grad w]) of the ``kind`` aggregation (:data:`KINDS`) in plain torch, in x's dtype."""
    x = x.detach().requires_grad_(True)
    inputs = [x]
    if w is not None:
        w = w.detach().requires_grad_(True)
        inputs.append(w)
    in_deg = torch.bincount(dst, minlength=n).clamp(min=1).to(x.dtype)
    src_scale = torch.bincount(src, minlength=n).clamp(min=1).to(x.dtype).pow(-0.5) if kind == "gcn" else None
    dst_scale = {"gcn": in_deg.pow(-0.5), "mean": 1 / in_deg, "sum": None}[kind]
    with torch.enable_grad():
        h = x * src_scale[:, None] if src_scale is not None else x
        out = ref_gspmm((src, dst, n), "u_mul_e" if w is not None else "copy_u", "sum", h, w)
        out = out * dst_scale[:, None] if dst_scale is not None else out
        grads = torch.autograd.grad(out, inputs, gout)
    return (out.detach(), *grads)


def ours_aggregate(g: TensorGraph, x, w, gout, deterministic: bool, kind: str = "gcn"):
    x = x.detach().requires_grad_(True)
    inputs = [x]
    if w is not None:
        w = w.detach().requires_grad_(True)
        inputs.append(w)
    norm, reduce = KINDS[kind]
    with torch.enable_grad():
        out = aggregate(g, "copy_u" if w is None else "u_mul_e", reduce, x, w, norm=norm,
                        deterministic=deterministic)
        grads = torch.autograd.grad(out, inputs, gout)
    return (out.detach(), *grads)


class Checks:
    """Runs checks, one row each: ``{family, case, ok, error, seconds}``.  With ``shard=(k, n)`` only
    every n-th check from the k-th runs (:mod:`.warm`'s workers split the compiles this way)."""

    def __init__(self, results, progress, shard: tuple[int, int] | None = None):
        self.results, self.progress, self.shard = results, progress, shard
        self.failures = self.seen = 0

    def run(self, family: str, case: str, fn) -> bool:
        self.seen += 1
        if self.shard and (self.seen - 1) % self.shard[1] != self.shard[0]:
            return True
        t0 = time.perf_counter()
        try:
            fn()
            ok, error = True, ""
        except Exception as exc:  # a mismatch or a crash: both are findings, the run goes on
            ok, error = False, f"{type(exc).__name__}: {exc}"[:2000]
            self.progress(f"  MISMATCH {family} {case}: {error.splitlines()[0][:300]}")
            if not isinstance(exc, AssertionError):
                self.progress(traceback.format_exc(limit=3))
        self.failures += not ok
        self.results.add("correctness", family=family, case=case, ok=ok, error=error,
                         seconds=round(time.perf_counter() - t0, 4))
        return ok


def check_scale(checks: Checks, device) -> None:
    gen = torch.Generator().manual_seed(0)
    for dtype in DTYPES:
        x = torch.randn(3000, generator=gen).to(device=device, dtype=dtype)
        checks.run("scale", str(dtype).replace("torch.", ""),
                   lambda x=x: assert_matches_reference(scale(x, 1.7), ref_scale, x, 1.7))


def _inputs(g: Graph, width: int, mode: str, dtype, device, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_nodes, width, generator=gen).to(device=device, dtype=dtype)
    gout = torch.randn(g.num_nodes, width, generator=gen).to(device=device, dtype=dtype)
    w = None
    if mode != "copy_u":
        cols = 1 if mode == "u_mul_e scalar" else width
        w = torch.rand(g.num_edges, cols, generator=gen).add_(0.5).to(device=device, dtype=dtype)
    return x, w, gout


def check_aggregation_case(checks: Checks, g: Graph, idtype, dtype, mode: str, width: int, det: bool,
                           device, seed: int, backward: bool = True, kind: str = "gcn", label: str = "") -> None:
    src, dst = g.src.to(device), g.dst.to(device)
    views = TensorGraph(src.to(idtype), dst.to(idtype), num_nodes=g.num_nodes)
    x, w, gout = _inputs(g, width, mode, dtype, device, seed)
    case = (f"{g.name} {str(idtype)[6:]} {str(dtype)[6:]} {mode} F={width} "
            f"{'deterministic' if det else 'atomic'}{'' if backward else ' (forward)'}"
            f"{'' if kind == 'gcn' else f' {kind}'}{f' ({label})' if label else ''}")

    def check():
        if backward:
            ours = ours_aggregate(views, x, w, gout, det, kind)
        else:
            with torch.no_grad():
                efeat = None if w is None else w
                ours = (aggregate(views, "copy_u" if w is None else "u_mul_e", KINDS[kind][1], x, efeat,
                                  norm=KINDS[kind][0], deterministic=det),)
        names = ("forward", "grad x", "grad w")
        refs: dict = {}  # one reference run per precision (fp64 and the case's dtype), shared by the outputs

        def ref(*a, k):
            if a[3].dtype not in refs:
                refs[a[3].dtype] = ref_aggregate(*a, kind=kind)
            return refs[a[3].dtype][k]
        for k, actual in enumerate(ours):
            assert_matches_reference(actual, lambda *a, k=k: ref(*a, k=k), src, dst, g.num_nodes, x, w, gout,
                                     msg=names[k])

    checks.run("aggregation", case, check)


def check_aggregation(checks: Checks, small: Graph, hub_degree: int, device, tiny: bool) -> None:
    """Every registered forward/reduce/SDDMM variant on a small graph (3 dtypes x 2 id types x 3
    message kinds x 2 combines x 4 tiles), fp64 on a subset, plain sum and mean, and hub rows in both
    directions (every dtype; fp32 and bf16 under ``tiny``, where the interpreter's time is the limit)."""
    seed = 0
    for dtype in DTYPES[:3]:
        for idtype in (torch.int32, torch.int64):
            for mode in MODES:
                for det in (False, True):
                    for width in WIDTHS:
                        seed += 1
                        # tiny: the backward (and its SDDMM) at one width; the interpreter's time is the limit
                        check_aggregation_case(checks, small, idtype, dtype, mode, width, det, device, seed,
                                               backward=not tiny or width == 32)
    for mode in MODES:
        for det in (False, True):
            seed += 1
            check_aggregation_case(checks, small, torch.int64, torch.float64, mode, 24, det, device, seed)
    # the user paths besides GCN's: plain sum and mean (no scales / the destination scale alone), each
    # message kind and registered combination on every tile (kernels/gspmm_grouped.py: forward, backward, reduce,
    # edge-weight gradient), so the tiny run too launches every one; plain copy_u-sum, atomic, is also
    # what the group-size autotuner's timer launches on a GPU for each (dtype, width)
    ids = (torch.int32, torch.int64)
    kinds = [(k, d, i, m, det, w) for k in ("sum", "mean") for d in DTYPES[:3] for i in ids
             for m in MODES for det in (False, True) for w in WIDTHS]
    kinds += [("sum", torch.float64, torch.int64, "copy_u", False, 24)]  # fp64's registered F=24
    for kind, dtype, idtype, mode, det, width in kinds:
        seed += 1
        check_aggregation_case(checks, small, idtype, dtype, mode, width, det, device, seed, kind=kind)
    hub = hub_graph(hub_degree + 50, hub_degree, 100 if tiny else 4 * hub_degree, device)
    cases = [(d, m, det) for d in DTYPES for m in ("copy_u", "u_mul_e scalar") for det in (False, True)]
    if tiny:  # the interpreter pays per program: both combines, one message kind each
        cases = [(torch.float32, "copy_u", False), (torch.bfloat16, "u_mul_e scalar", True)]
    for dtype, mode, det in cases:
        seed += 1
        check_aggregation_case(checks, hub, torch.int64, dtype, mode, 32, det, device, seed)


def check_locality_split(checks: Checks, small: Graph, device, tiny: bool) -> None:
    """The aggregation run as a locality split (its hot rows an eighth of the nodes): the deterministic
    combine's two-part reduce on every registered tile and dtype, with and without the destination
    scale (GCN's, the plain sum's), and the atomic combine on one tile per dtype."""
    cases = [(d, w, k, True) for d in DTYPES[:3] for w in WIDTHS for k in ("gcn", "sum")]
    cases += [(torch.float64, 24, "gcn", True)] + [(d, 32, "gcn", False) for d in DTYPES]
    for n, (dtype, width, kind, det) in enumerate(cases):
        with use_locality("on", l2_bytes=2 * row_tile_bytes(width, dtype) * max(1, small.num_nodes // 8)):
            check_aggregation_case(checks, small, torch.int64, dtype, "copy_u", width, det, device, 900 + n,
                                   backward=not tiny or width == 32, kind=kind, label="locality split")


def check_low_precision_hub(checks: Checks, device, tiny: bool) -> None:
    """bf16 / fp16 copy_u-sum over one hub of 120,000 in-edges (2,000 under ``tiny``) of positive
    inputs against the exact (float64) sum of the same rounded inputs, within the dtype's tolerance:
    where a sum accumulated in the storage dtype stalls (``torch.sparse.mm`` in bf16 on the H200 was
    off by up to 6.25x on such rows), ours accumulates in fp32."""
    hub_in = 2_000 if tiny else 120_000
    n = hub_in + 1
    src = torch.arange(1, n, device=device)
    dst = torch.zeros(hub_in, dtype=torch.int64, device=device)
    g = TensorGraph(src, dst, num_nodes=n)
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.rand((n, 8), generator=torch.Generator().manual_seed(11)).to(device=device, dtype=dtype)

        def check(x=x, dtype=dtype):
            exact = x.double()[1:].sum(0)
            assert_close(aggregate(g, "copy_u", "sum", x)[0], exact.to(dtype), msg=f"hub of {hub_in} in-edges")
        checks.run("aggregation", f"{str(dtype)[6:]} sum over a hub of {hub_in:,} in-edges vs the exact sum", check)


def run(results, device, *, small: Graph, hub_degree: int, sampling_graph: Graph, tiny: bool, progress,
        shard: tuple[int, int] | None = None, part: str = "all") -> dict:
    """All checks (or one shard of them) with launch recording on; returns the coverage report (also
    added as a row).  ``part="sampling"``: the samplers' checks alone (their kernels compile in
    seconds; the rest take minutes), launch coverage not judged (``missing`` empty, ``part`` says so)."""
    if part not in ("all", "sampling"):
        raise ValueError(f"expected correctness part 'all' or 'sampling' (got {part!r}). Fix: pass one of them.")
    log = LaunchLog(specialisations())
    checks = Checks(results, progress, shard)
    t0 = time.perf_counter()
    with log.active():
        if part == "all":
            _kernel_checks(checks, small, hub_degree, device, tiny, progress, t0)
        correctness_sampling.run(checks, sampling_graph, hub_degree, device, tiny, progress)
        correctness_ppr.run(checks, sampling_graph, device, tiny)
        progress(f"  PPR push: done ({time.perf_counter() - t0:.1f} s)")
        progress(f"  sampling: done ({time.perf_counter() - t0:.1f} s)")
    cov = {**log.report(compiled=device.type == "cuda"), "part": part}
    if part != "all":
        cov["missing"] = []
    results.add("coverage", registered=cov["registered"], launched=cov["launched"], missing=cov["missing"],
                other_mode=cov["other_mode"], part=part,
                extra=cov["extra"], launches=cov["launches"], per_kernel=cov["per_kernel"],
                checks=len(results.section("correctness")), mismatches=checks.failures,
                ok=checks.failures == 0 and not cov["missing"])
    return {**cov, "mismatches": checks.failures, "checks": len(results.section("correctness"))}


def _kernel_checks(checks: Checks, small: Graph, hub_degree: int, device, tiny: bool, progress, t0: float) -> None:
    """Every kernel family but the samplers'."""
    check_scale(checks, device)
    progress(f"  scale: done ({time.perf_counter() - t0:.1f} s)")
    check_aggregation(checks, small, hub_degree, device, tiny)
    check_locality_split(checks, small, device, tiny)
    check_low_precision_hub(checks, device, tiny)
    progress(f"  aggregation: done ({time.perf_counter() - t0:.1f} s)")
    correctness_extrema.run(checks, small, device, tiny)
    progress(f"  max/min aggregation: done ({time.perf_counter() - t0:.1f} s)")
    correctness_sddmm.run(checks, small, device, tiny)
    progress(f"  sddmm: done ({time.perf_counter() - t0:.1f} s)")
    correctness_headwise.run(checks, small, device, tiny)
    progress(f"  head-wise aggregation: done ({time.perf_counter() - t0:.1f} s)")
    correctness_attention.run(checks, small, device, tiny)
    progress(f"  attention: done ({time.perf_counter() - t0:.1f} s)")
    correctness_attention_variants.run(checks, small, device, tiny)
    progress(f"  dot-product and GATv2 attention: done ({time.perf_counter() - t0:.1f} s)")
