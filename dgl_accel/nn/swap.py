"""``swap(model)``: make the supported ``dgl.nn`` layers of an existing model dgl-accel layers, in place.

Our layers are subclasses that add no state, so swapping is a class change on the existing
object: parameters, buffers, hooks and state_dict keys stay exactly as they were, and
``load_state_dict`` works both ways.  ``unswap(model)`` reverses it.
"""
from __future__ import annotations

import dataclasses

import dgl.nn
import torch

from .ginconv import GINConv
from .graphconv import GraphConv
from .sageconv import SAGEConv

SWAPS = {dgl.nn.GraphConv: GraphConv, dgl.nn.SAGEConv: SAGEConv, dgl.nn.GINConv: GINConv}


@dataclasses.dataclass
class SwapReport:
    swapped: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (name, from, to)
    kept: list[tuple[str, str]] = dataclasses.field(default_factory=list)         # (name, why)

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} module(s)"]
        lines += [f"  {name or '<root>'}: {a} -> {b}" for name, a, b in self.swapped]
        lines += [f"  kept {name or '<root>'}: {why}" for name, why in self.kept]
        return "\n".join(lines)


def _qualname(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _checked(model) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"expected a torch.nn.Module (got {type(model).__name__}). Fix: pass your model object.")
    return model


def _reclass(model: torch.nn.Module, mapping: dict, report: SwapReport) -> SwapReport:
    """Give every module whose exact type is a key of ``mapping`` the mapped class, in place
    (parameters, buffers and state_dict keys stay); user subclasses of a ``dgl.nn`` layer are kept."""
    for name, module in model.named_modules():
        target = mapping.get(type(module))
        if target is not None:
            report.swapped.append((name, _qualname(type(module)), _qualname(target)))
            module.__class__ = target
        elif isinstance(module, tuple(SWAPS)) and type(module) not in SWAPS.values():
            # A user subclass may override forward itself; changing its class would drop that.
            report.kept.append((name, f"{_qualname(type(module))} subclasses a dgl.nn layer"))
    return report


def swap(model: torch.nn.Module) -> SwapReport:
    """Swap every module whose exact type is a supported ``dgl.nn`` layer; returns what changed.

    >>> import dgl.nn, torch
    >>> model = torch.nn.Sequential(dgl.nn.GraphConv(4, 4), torch.nn.ReLU())
    >>> swap(model).swapped
    [('0', 'dgl.nn.pytorch.conv.graphconv.GraphConv', 'dgl_accel.nn.graphconv.GraphConv')]
    >>> unswap(model).swapped[0][2]
    'dgl.nn.pytorch.conv.graphconv.GraphConv'
    """
    return _reclass(_checked(model), SWAPS, SwapReport())


def unswap(model: torch.nn.Module) -> SwapReport:
    """Give swapped modules their ``dgl.nn`` class back."""
    return _reclass(_checked(model), {ours: theirs for theirs, ours in SWAPS.items()}, SwapReport())
