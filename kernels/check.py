"""Ahead-of-time compile every registered kernel specialisation for real GPUs, without a GPU.

    python -m dgl_accel.kernels.check [--targets 80,90] [--kernel NAME] [--json FILE] [--jobs N]

For each specialisation and target it runs ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", cap, 32))``, then reads the cubin's resources with the ``cuobjdump`` and
the spill counts with the ``ptxas -v`` that ship inside the triton wheel.  Prints one table row per
(kernel, target) and exits 1 on any compile error or spill, so CI catches kernels that would be
slow or broken on an A100 (sm_80) or H100 (sm_90).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import io
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile

from .registry import Specialisation, specialisations

DEFAULT_TARGETS = (80, 90)


def _require_compiled_mode() -> None:
    # The interpreter and the compiler cannot share a process (see loader.py): pin compiled mode
    # before triton is imported, and refuse clearly if it is too late.
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "0"
    from .loader import process_interprets  # after the line above: it imports triton

    if process_interprets():
        raise RuntimeError(
            "expected a process with Triton in compiled mode for AOT compilation (got TRITON_INTERPRET=1 "
            "or an interpreted import). Fix: run `python -m dgl_accel.kernels.check` in its own process.")


@dataclasses.dataclass
class Result:
    kernel: str
    variant: str
    target: str
    registers: int | None = None
    spill_bytes: int | None = None     # spill stores + spill loads reported by ptxas
    local_bytes: int | None = None     # per-thread local memory in the cubin
    stack_bytes: int | None = None     # per-thread stack frame (where ptxas puts spills)
    shared_bytes: int | None = None    # static + dynamic shared memory the launch needs
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.spill_bytes


def _tool(name: str) -> str:
    import triton  # lazy: only after _require_compiled_mode() has fixed the mode

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"expected {name} inside the triton wheel at {path} (got no such file). "
            f"Fix: install an official triton 3.x wheel (pip install --no-deps 'triton==3.5.1')."
        )
    return path


def _arch(cap: int) -> str:
    return "sm_90a" if cap == 90 else f"sm_{cap}"  # triton targets the 'a' variant on Hopper


def _resources(cubin: bytes, workdir: str) -> dict:
    path = os.path.join(workdir, "k.cubin")
    with open(path, "wb") as fh:
        fh.write(cubin)
    text = subprocess.run([_tool("cuobjdump"), "--dump-resource-usage", path],
                          capture_output=True, text=True, check=True).stdout
    fields = dict(re.findall(r"(REG|SHARED|LOCAL|STACK):(\d+)", text))
    return {k: int(v) for k, v in fields.items()}


def _spill_bytes(ptxas_log: str) -> int | None:
    """Spill stores + loads in a ``ptxas -v`` log; None when it holds no function report."""
    if "bytes spill stores" not in ptxas_log:
        return None
    stores = sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", ptxas_log))
    loads = sum(int(x) for x in re.findall(r"(\d+) bytes spill loads", ptxas_log))
    return stores + loads


@contextlib.contextmanager
def _ptxas_log():
    """Triton's own ``ptxas -v`` call prints its log (TRITON_DUMP_PTXAS_LOG) into the returned
    buffer: the spill counts of the very cubin triton builds, without a second ptxas run."""
    saved = os.environ.get("TRITON_DUMP_PTXAS_LOG")
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield buffer
    finally:
        if saved is None:
            os.environ.pop("TRITON_DUMP_PTXAS_LOG", None)
        else:
            os.environ["TRITON_DUMP_PTXAS_LOG"] = saved


def _spills(ptx: str, cap: int, workdir: str) -> int:
    """Spill bytes from our own ``ptxas -v`` run (where triton's log is not there: a cached kernel)."""
    path = os.path.join(workdir, "k.ptx")
    with open(path, "w") as fh:
        fh.write(ptx)
    # Same flags as triton's own ptxas call (backends/nvidia/compiler.py make_cubin), so the
    # spill counts describe the cubin triton actually builds.
    proc = subprocess.run([_tool("ptxas"), "-lineinfo", "-v", f"--gpu-name={_arch(cap)}", path,
                           "-o", os.path.join(workdir, "k.o")], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed: {proc.stderr.strip()[-500:]}")
    return _spill_bytes(proc.stderr) or 0  # no function report: nothing that could spill


def compile_one(spec: Specialisation, cap: int, fn=None) -> Result:
    """Compile one specialisation for ``sm_<cap>``; ``fn`` overrides the registered kernel (tests)."""
    # lazy: triton (compiled mode) loads only after _require_compiled_mode()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    result = Result(spec.kernel, spec.tag, f"sm_{cap}")
    try:
        if fn is None:
            fn = getattr(importlib.import_module(f"{__package__}.{spec.module}"), spec.kernel)
        src = ASTSource(fn=fn, signature=dict(spec.signature), constexprs=dict(spec.constexprs))
        options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
        if spec.maxnreg:
            options["maxnreg"] = spec.maxnreg
        with _ptxas_log() as log:
            compiled = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=options)
        with tempfile.TemporaryDirectory() as workdir:
            res = _resources(compiled.asm["cubin"], workdir)
            spills = _spill_bytes(log.getvalue())
            result.spill_bytes = _spills(compiled.asm["ptx"], cap, workdir) if spills is None else spills
        result.registers = res.get("REG")
        result.local_bytes = res.get("LOCAL", 0)
        result.stack_bytes = res.get("STACK", 0)
        result.shared_bytes = res.get("SHARED", 0) + int(compiled.metadata.shared)
    except Exception as exc:  # report every failure in the table, fail at the end
        result.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
    return result


def _compile_pair(pair) -> Result:
    return compile_one(*pair)


def run(targets=DEFAULT_TARGETS, kernel_filter: str | None = None, jobs: int | None = None) -> list[Result]:
    """Results in registry order.  ``jobs`` worker processes (default: one per core, at most 8):
    each compile is a Triton lowering plus three external tools, all single-threaded, and the
    registry holds over a thousand (specialisation, target) pairs."""
    _require_compiled_mode()
    specs = [s for s in specialisations() if not kernel_filter or kernel_filter in s.kernel]
    pairs = [(spec, cap) for spec in specs for cap in targets]
    jobs = min(8, os.cpu_count() or 1) if jobs is None else jobs
    if jobs <= 1 or len(pairs) < 8:
        return [compile_one(*pair) for pair in pairs]
    # fork: the workers inherit the compiled mode pinned above (spawn would re-import under the
    # parent's environment too, only slower)
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(_compile_pair, pairs, chunksize=4)


def format_table(results: list[Result]) -> str:
    head = ("kernel", "variant", "target", "registers", "spill_bytes", "stack_bytes", "local_bytes",
            "shared_bytes", "status")
    rows = [head] + [
        (r.kernel, r.variant, r.target, str(r.registers), str(r.spill_bytes), str(r.stack_bytes),
         str(r.local_bytes), str(r.shared_bytes), "ok" if r.ok else (r.error or "SPILL"))
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_markdown(results: list[Result]) -> str:
    """The table as Markdown with its provenance, for docs/kernel_resources.md."""
    import triton  # lazy: only after _require_compiled_mode() has fixed the mode

    intro = ("# Kernel resource table\n\n"
             "Generated by `python -m dgl_accel.kernels.check --markdown docs/kernel_resources.md` "
             f"(triton {triton.__version__}), ahead of time for sm_80 (A100) and sm_90 (H100), no GPU needed. "
             "Registers per thread and spill bytes come from ptxas `-v` (same flags as triton's own call), "
             "stack and shared memory from `cuobjdump --dump-resource-usage`; shared bytes include the dynamic "
             "shared memory the launch requests. The test suite fails on any compile error or spill "
             "(tests/kernels/test_check.py).\n\n")
    head = "| kernel | variant | target | registers | spill bytes | stack bytes | shared bytes | status |"
    lines = [intro + head, "|" + "---|" * 8]
    for r in results:
        lines.append(f"| `{r.kernel}` | `{r.variant}` | {r.target} | {r.registers} | {r.spill_bytes} | "
                     f"{r.stack_bytes} | {r.shared_bytes} | {'ok' if r.ok else (r.error or 'SPILL')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dgl_accel.kernels.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(map(str, DEFAULT_TARGETS)),
                        help="comma-separated compute capabilities (default 80,90)")
    parser.add_argument("--kernel", default=None, help="only kernels whose name contains this")
    parser.add_argument("--json", default=None, help="also write the results as JSON to this file")
    parser.add_argument("--markdown", default=None, help="also write the table as Markdown to this file")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core, at most 8)")
    args = parser.parse_args(argv)
    try:
        targets = [int(t) for t in args.targets.split(",") if t.strip()]
    except ValueError:
        parser.error(f"expected --targets like 80,90 (got {args.targets!r})")
    results = run(targets, args.kernel, args.jobs)
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dataclasses.asdict(r) | {"ok": r.ok} for r in results], fh, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(format_markdown(results))
    bad = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(bad)} of {len(results)} specialisations compiled without spills"
          + (f"; FAILED: {', '.join(f'{r.kernel}@{r.target}' for r in bad)}" if bad else ""))
    return 1 if bad or not results else 0


if __name__ == "__main__":
    sys.exit(main())
