"""``swap(model)``: make the supported ``dgl.nn`` layers of an existing model dgl-accel layers, in place.

Our layers are subclasses that add no state, so swapping is a class change on the existing
object: parameters, buffers, hooks and state_dict keys stay exactly as they were, and
``load_state_dict`` works both ways.  ``unswap(model)`` reverses it.  Containers are walked through
(``named_modules``), so the relation modules inside a ``dgl.nn.HeteroGraphConv`` are swapped one by
one (and the container itself, whose drop-in keeps its relation graphs' structure cached across
calls); the report lists every other ``dgl.nn`` module it left alone, with the reason.
"""
from __future__ import annotations

import dgl.nn
import torch

from ..swap_report import SwapReport, qualname
from .dotgatconv import DotGatConv
from .edgeconv import EdgeConv
from .gatconv import GATConv
from .gatv2conv import GATv2Conv
from .ginconv import GINConv
from .graphconv import GraphConv
from .heteroconv import HeteroGraphConv
from .sageconv import SAGEConv

SWAPS = {dgl.nn.GraphConv: GraphConv, dgl.nn.SAGEConv: SAGEConv, dgl.nn.GINConv: GINConv, dgl.nn.GATConv: GATConv,
         dgl.nn.GATv2Conv: GATv2Conv, dgl.nn.DotGatConv: DotGatConv, dgl.nn.EdgeConv: EdgeConv,
         dgl.nn.HeteroGraphConv: HeteroGraphConv}
CONTAINERS = (dgl.nn.HeteroGraphConv,)  # swapped, and their modules reported one by one


def _checked(model) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"expected a torch.nn.Module (got {type(model).__name__}). Fix: pass your model object.")
    return model


def _why_kept(module: torch.nn.Module) -> str | None:
    """Why ``swap`` leaves this module alone, or None if it is not a ``dgl.nn`` module (or already ours)."""
    cls = type(module)
    if cls in SWAPS.values():
        return None  # already a dgl-accel layer: swap is idempotent
    if isinstance(module, tuple(SWAPS)):
        # A user subclass may override forward itself; changing its class would drop that.
        return f"{qualname(cls)} subclasses a dgl.nn layer"
    if not cls.__module__.startswith("dgl.nn."):
        return None
    return (f"{cls.__name__}: no dgl-accel drop-in; its aggregation still runs on dgl-accel under "
            f"enable() where supported")


def _reclass(model: torch.nn.Module, mapping: dict, report: SwapReport, explain: bool) -> SwapReport:
    """Give every module whose exact type is a key of ``mapping`` the mapped class, in place
    (parameters, buffers and state_dict keys stay); user subclasses of a ``dgl.nn`` layer are kept.
    ``explain``: list every other ``dgl.nn`` module in ``report.kept`` with the reason (not the
    parts of a layer already listed, e.g. the ``Identity`` inside a kept ``GATConv``)."""
    listed: list[str] = []  # layers whose inner modules are theirs, not the user's
    for name, module in model.named_modules():
        target = mapping.get(type(module))
        if target is not None:
            report.swapped.append((name, qualname(type(module)), qualname(target)))
            module.__class__ = target
            if not issubclass(target, CONTAINERS):  # a container's relation modules are the user's: reported
                listed.append(name + ".")
            continue
        why = _why_kept(module) if explain or isinstance(module, tuple(SWAPS)) else None
        if why is not None and not any(name.startswith(p) for p in listed):
            report.kept.append((name, why))
            if not isinstance(module, dgl.nn.HeteroGraphConv):
                listed.append(name + ".")
    return report


def swap(model: torch.nn.Module) -> SwapReport:
    """Swap every module whose exact type is a supported ``dgl.nn`` layer; returns what changed
    (``swapped``) and every other ``dgl.nn`` module it left alone with the reason (``kept``).

    >>> import dgl.nn, torch
    >>> model = torch.nn.Sequential(dgl.nn.GraphConv(4, 4), torch.nn.ReLU())
    >>> swap(model).swapped
    [('0', 'dgl.nn.pytorch.conv.graphconv.GraphConv', 'dgl_accel.nn.graphconv.GraphConv')]
    >>> unswap(model).swapped[0][2]
    'dgl.nn.pytorch.conv.graphconv.GraphConv'
    """
    return _reclass(_checked(model), SWAPS, SwapReport(), explain=True)


def unswap(model: torch.nn.Module) -> SwapReport:
    """Give swapped modules their ``dgl.nn`` class back."""
    return _reclass(_checked(model), {ours: theirs for theirs, ours in SWAPS.items()}, SwapReport(), explain=False)
