"""Regression guard: every public sampler of ``dgl_accel.sampling`` gives, for a given seed, output
BIT-IDENTICAL to ``tests/sampling/golden/sampler_outputs.pt``, recorded from the code before the package
layout refactor (commit dde0920) by ``tests/sampling/golden/record_sampler_outputs.py``.  The calls are
written once, in that module's ``FAMILIES``; this file reruns them against the package under test.

One case per (mode, sampler family), so a failure names both:

* ``native``     in this process (numba loops on, backend native);
* ``numba_off``  in a subprocess with ``DGL_ACCEL_NUMBA=0`` (read when the package imports);
* ``triton``     in a subprocess with ``DGL_ACCEL_BACKEND=triton`` set before import (the Triton
                 kernels under the interpreter, on a 60-node graph); these cases also check, via
                 ``dgl_accel.stats()``, that the interpreter path is the one that ran.

The subprocesses start as soon as the first case of this file runs and work while the in-process
cases run.  Every comparison is exact: same key set, dtype, shape and bits.
"""
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

_RECORDER = Path(__file__).resolve().parent / "golden" / "record_sampler_outputs.py"


def _load_recorder():
    name = "dgl_accel_golden_recorder"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _RECORDER)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


R = _load_recorder()
CASES = R.cases()


def _in_process(mode: str) -> bool:
    return R.env_matches(mode)


@pytest.fixture(scope="module")
def golden():
    return torch.load(R.GOLDEN_FILE, weights_only=True)


class _SubprocessRuns:
    """One recorder subprocess per mode that cannot run in this process, started at once for the
    modes of the selected cases; results collected on first use."""

    def __init__(self, modes, tmp: Path):
        self.tmp = tmp
        self.root = R.package_root()
        self.procs = {m: R.start_mode_subprocess(m, tmp / f"{m}.pt", self.root, keep_going=True) for m in modes}
        self.results = {}

    def get(self, mode):
        if mode not in self.results:
            try:
                self.results[mode] = R.finish_mode_subprocess(self.procs[mode], self.tmp / f"{mode}.pt")
            except Exception as e:  # remembered: every case of the mode reports it
                self.results[mode] = e
        res = self.results[mode]
        if isinstance(res, Exception):
            pytest.fail(f"the {mode} recorder subprocess failed: {res}", pytrace=False)
        return res

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.communicate()


@pytest.fixture(scope="module")
def subprocess_runs(request, tmp_path_factory):
    selected = [item for item in request.session.items
                if getattr(item, "module", None) is sys.modules[__name__] and hasattr(item, "callspec")
                and "mode" in item.callspec.params]
    modes = sorted({item.callspec.params["mode"] for item in selected} - {m for m in R.MODES if _in_process(m)})
    runs = _SubprocessRuns(modes, tmp_path_factory.mktemp("sampler_golden"))
    yield runs
    runs.close()


def _describe(name, want, got) -> str:
    if want.dtype != got.dtype or want.shape != got.shape:
        return f"{name}: expected {want.dtype} {tuple(want.shape)}, got {got.dtype} {tuple(got.shape)}"
    w, g = want.reshape(-1), got.reshape(-1)
    if want.is_floating_point():
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
        diff = (w.contiguous().view(bits) != g.contiguous().view(bits)).nonzero().flatten()
    else:
        diff = (w != g).nonzero().flatten()
    i = int(diff[0]) if diff.numel() else -1
    return (f"{name}: {diff.numel()} of {w.numel()} entries differ"
            + (f" (first at flat index {i}: expected {w[i].item()}, got {g[i].item()})" if i >= 0 else ""))


def _compare(golden: dict, mode: str, family: str, got: dict) -> None:
    prefix = f"{mode}/{family}/"
    names = {k[len(prefix):] for k in golden if k.startswith(prefix)}
    if mode == "numba_off":  # stored once under native/ where bit-identical when recorded
        names |= {k[len(f"native/{family}/"):] for k in golden if k.startswith(f"native/{family}/")}
    assert names, f"no golden tensors for {prefix}: re-record tests/sampling/golden/sampler_outputs.pt"
    got_names = {k[len(prefix):] for k in got}
    problems = [f"missing output {n}" for n in sorted(names - got_names)]
    problems += [f"unexpected output {n}" for n in sorted(got_names - names)]
    for n in sorted(names & got_names):
        want, have = golden[R.golden_key(golden, prefix + n)], got[prefix + n]
        same = (want.dtype == have.dtype and want.shape == have.shape and torch.equal(want, have)
                and R.same_bits(want, have))
        if not same:
            problems.append(_describe(n, want, have))
    if problems:
        shown = "\n  ".join(problems[:25])
        more = f"\n  ... and {len(problems) - 25} more" if len(problems) > 25 else ""
        pytest.fail(f"{mode}/{family}: {len(problems)} of {len(names)} outputs not bit-identical to the golden "
                    f"file:\n  {shown}{more}", pytrace=False)


def _check_paths(mode: str, family: str, paths: dict) -> None:
    if family not in paths:  # the package has no dgl_accel.stats(): nothing to check
        return
    labels = set(paths[family])
    if mode == "triton":
        assert labels == {"triton-interpreter"}, f"{family} under DGL_ACCEL_BACKEND=triton ran on {sorted(labels)}"
    else:
        assert labels <= {"native-cpu"}, f"{family} in mode {mode} ran on {sorted(labels)}"


@pytest.mark.slow  # over 2 s on 2 cores: the quick lane (scripts/test.sh --quick) leaves it out
@pytest.mark.parametrize("mode,family", CASES, ids=[f"{m}-{f}" for m, f in CASES])
def test_sampler_output_is_bit_identical(golden, subprocess_runs, mode, family):
    if _in_process(mode):
        paths: dict = {}
        got = R.run_family(mode, family, paths)
    else:
        tensors, errors, paths, _ = subprocess_runs.get(mode)
        if family in errors:
            pytest.fail(f"{mode}/{family} raised in the recorder subprocess:\n{errors[family]}", pytrace=False)
        prefix = f"{mode}/{family}/"
        got = {k: v for k, v in tensors.items() if k.startswith(prefix)}
    _compare(golden, mode, family, got)
    _check_paths(mode, family, paths)


def test_golden_file_matches_the_recorder(golden):
    """Every (mode, family) of the recorder has golden tensors and every golden tensor a case."""
    fams = {f"{m}/{f}" for m, f in CASES}
    stored = {"/".join(k.split("/")[:2]) for k in golden}
    assert stored <= fams, f"golden tensors of families the recorder no longer has: {sorted(stored - fams)}"
    missing = {c for c in fams - stored if not (c.startswith("numba_off/") and "native/" + c.split("/")[1] in stored)}
    assert not missing, f"recorder families without golden tensors: {sorted(missing)}"
