"""What ``swap`` / ``unswap`` changed in a model, for both adapters (``dgl_accel.nn.swap`` for DGL's
layers, ``dgl_accel.pyg.swapping`` for PyG's): one report type, torch only."""
from __future__ import annotations

import dataclasses

__all__ = ["SwapReport", "qualname"]


def qualname(cls) -> str:
    """``module.QualName`` of a class, as the report lists it."""
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclasses.dataclass
class SwapReport:
    """``swapped``: (name, old class, new class) per module changed; ``kept``: (name, why) per
    layer left alone.

    >>> print(SwapReport(swapped=[("0", "a.A", "b.A")], kept=[("1", "no drop-in")]))
    swapped 1 module(s)
      0: a.A -> b.A
      kept 1: no drop-in
    """

    swapped: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    kept: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} module(s)"]
        lines += [f"  {name or '<root>'}: {a} -> {b}" for name, a, b in self.swapped]
        lines += [f"  kept {name or '<root>'}: {why}" for name, why in self.kept]
        return "\n".join(lines)
