"""Which registered kernel specialisations (``kernels/registry.py``) a run launched.

A launch is recorded at the launch layer (:func:`dgl_accel.core.launch.record_launches`) and keyed
like a :class:`~dgl_accel.kernels.registry.Specialisation`: kernel, the element type of every
pointer argument, every constexpr value, ``num_warps`` and ``num_stages``.  Scalar arguments are
not part of the key (the registry does not enumerate them).  A specialisation counts as launched
only when a launch has exactly its key; any not launched is a failure of the report, since the AOT
table would then vouch for code that never runs (or miss code that does).  One exception, by
design: the frontier kernel's lane count depends on the Triton mode (``block_for``: 128 lanes
compiled, 32 interpreted), so each mode launches its own variant and the other is listed apart.
"""
from __future__ import annotations

import collections
import contextlib

import torch

from ..core.launch import kernel_module, record_launches

TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
                torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
                torch.bool: "i1"}


def arg_names(kernel) -> list[str]:
    """Parameter names of a ``@triton.jit`` function, compiled or interpreted."""
    names = getattr(kernel, "arg_names", None)
    if names is None:  # the interpreter's InterpretedFunction wraps the Python function
        names = list(kernel.fn.__code__.co_varnames[:kernel.fn.__code__.co_argcount])
    return list(names)


def spec_key(spec) -> tuple:
    """The identity of a registered specialisation (see the module docstring)."""
    pointers = tuple((a, t[1:]) for a, t in spec.signature.items() if t.startswith("*"))
    consts = tuple(sorted((k, v) for k, v in spec.constexprs.items()))
    return spec.module, spec.kernel, pointers, consts, spec.num_warps, spec.num_stages, spec.maxnreg


class LaunchLog:
    """Launch keys (with counts) while active; ``constexpr_names[kernel]`` from the registry."""

    def __init__(self, specs):
        self.specs = list(specs)
        self.constexpr_names: dict[str, set] = collections.defaultdict(set)
        for s in self.specs:
            self.constexpr_names[s.kernel].update(k for k, t in s.signature.items() if t == "constexpr")
        self.counts: collections.Counter = collections.Counter()

    def __call__(self, module, name, kernel, args, kwargs) -> None:
        names = arg_names(kernel)
        bound = dict(zip(names, args))
        bound.update(kwargs)
        consts = self.constexpr_names.get(name, set())
        pointers = tuple((a, TRITON_TYPES.get(bound[a].dtype, str(bound[a].dtype))) for a in names
                         if isinstance(bound.get(a), torch.Tensor))
        const_items = tuple(sorted((k, bound[k]) for k in consts if k in bound))
        key = (module, name, pointers, const_items, int(kwargs.get("num_warps", 4)), int(kwargs.get("num_stages", 3)),
               kwargs.get("maxnreg"))
        self.counts[key] += 1

    @contextlib.contextmanager
    def active(self):
        previous = record_launches(self)
        try:
            yield self
        finally:
            record_launches(previous)

    def report(self, compiled: bool) -> dict:
        """``{"registered", "launched", "missing": [tags], "extra": [launched keys not registered],
        "other_mode": [tags of the other Triton mode's variants]}``; ``compiled``: on a GPU."""
        other = [s for s in self.specs if not in_mode(s, compiled)]
        keys = {spec_key(s): s for s in self.specs if in_mode(s, compiled)}
        missing = [f"{s.kernel} {s.tag}" for k, s in keys.items() if k not in self.counts]
        extra = sorted({f"{k[1]} {dict(k[2])} {dict(k[3])} w{k[4]}" for k in self.counts if k not in keys})
        by_kernel = collections.Counter(s.kernel for k, s in keys.items() if k in self.counts)
        totals = collections.Counter(s.kernel for s in keys.values())
        return {"registered": len(keys), "launched": len(keys) - len(missing), "missing": missing,
                "other_mode": [f"{s.kernel} {s.tag}" for s in other],
                "extra": extra, "launches": sum(self.counts.values()),
                "per_kernel": {k: f"{by_kernel[k]}/{n}" for k, n in totals.items()}}


def in_mode(spec, compiled: bool) -> bool:
    """Whether this Triton mode's launchers can select ``spec`` (see the module docstring)."""
    if spec.kernel == "_frontier_kernel":
        return spec.constexprs["BLOCK"] == kernel_module("saint_frontier").block_for(compiled)
    return True
