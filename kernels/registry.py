"""Every kernel specialisation we ship, for ahead-of-time checks (``python -m dgl_accel.kernels.check``).

A kernel module lists its specialisations in a module-level ``SPECIALISATIONS`` list; adding a
module here is all it takes for the AOT table and its test to cover it.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping

# Kernel modules of this package, in the order the table prints them.
KERNEL_MODULES = ("vector_scale", "gspmm_grouped", "sampling", "saint_frontier", "bulk_sampling", "walks",
                  "edge_softmax", "gat", "extrema", "sddmm", "headwise", "dot", "gatv2", "ppr",
                  "gat_heads", "dot_heads", "gatv2_heads")


@dataclasses.dataclass(frozen=True)
class Specialisation:
    """One compiled variant: kernel + argument types + constexpr values + launch options."""

    module: str                      # submodule of dgl_accel.kernels
    kernel: str                      # @triton.jit function name in that module
    signature: Mapping[str, str]     # arg name -> triton type ("*fp32", "i64", "fp32", "constexpr")
    constexprs: Mapping[str, object] = dataclasses.field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    maxnreg: int | None = None       # ptxas's register cap where its default target spills (None: its default)

    @property
    def tag(self) -> str:
        # pointer element types in argument order, e.g. "i64,i32,fp32,fp32[BLOCK_F=32]w4"
        ptr_types = ",".join(t[1:] for t in self.signature.values() if t.startswith("*"))
        consts = ",".join(f"{k}={v}" for k, v in self.constexprs.items())
        return f"{ptr_types}[{consts}]w{self.num_warps}" + (f"r{self.maxnreg}" if self.maxnreg else "")


def specialisations() -> list[Specialisation]:
    out: list[Specialisation] = []
    for name in KERNEL_MODULES:
        module = importlib.import_module(f"{__package__}.{name}")
        out.extend(module.SPECIALISATIONS)
    return out


def by_kernel() -> dict[str, list[Specialisation]]:
    grouped: dict[str, list[Specialisation]] = {}
    for spec in specialisations():
        grouped.setdefault(spec.kernel, []).append(spec)
    return grouped
