"""``swap(model)``: make the supported ``torch_geometric.nn`` layers of an existing model dgl-accel
layers, in place; ``unswap(model)`` gives them their PyG class back.

Our layers (:mod:`dgl_accel.pyg.nn`) are subclasses that add no state and override ``forward``
only, so swapping is a class change on the existing object: parameters, buffers, hooks, PyG's
``cached`` state and state_dict keys stay exactly as they were, and ``load_state_dict`` works both
ways.  Every module of the model is visited (``named_modules``: inside ``Sequential``, PyG's
``BasicGNN`` models, ``HeteroConv``, ``to_hetero`` graphs, ...).  Only modules whose exact type is a
supported PyG layer change: a user's subclass of one may override ``forward`` itself, so it is kept
and reported, as is every other PyG message passing layer (no drop-in: it runs PyG's own forward).
"""
from __future__ import annotations

from ..core.extras import missing_extra

try:
    import torch_geometric  # noqa: F401  (first, so that without PyG the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

import torch
import torch_geometric.nn as pyg_nn
from torch_geometric.nn.conv import MessagePassing

from ..swap_report import SwapReport, qualname
from .nn import (
    APPNP,
    EdgeConv,
    FastRGCNConv,
    GATConv,
    GATv2Conv,
    GCNConv,
    GINConv,
    GINEConv,
    GraphConv,
    LGConv,
    RGCNConv,
    SAGEConv,
    SGConv,
    TransformerConv,
)

SWAPS = {pyg_nn.GCNConv: GCNConv, pyg_nn.SAGEConv: SAGEConv, pyg_nn.GINConv: GINConv, pyg_nn.GATConv: GATConv,
         pyg_nn.GATv2Conv: GATv2Conv, pyg_nn.GraphConv: GraphConv, pyg_nn.SGConv: SGConv, pyg_nn.APPNP: APPNP,
         pyg_nn.LGConv: LGConv, pyg_nn.GINEConv: GINEConv, pyg_nn.EdgeConv: EdgeConv,
         pyg_nn.TransformerConv: TransformerConv, pyg_nn.RGCNConv: RGCNConv, pyg_nn.FastRGCNConv: FastRGCNConv}


def _checked(model) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module (got {type(model).__name__}). Fix: pass your model object, "
                        f"e.g. swap(model) for model = torch_geometric.nn.models.GCN(...).")
    return model


def _why_kept(module: torch.nn.Module) -> str | None:
    """Why ``swap`` leaves a message passing layer alone, or None (not one, or already ours)."""
    cls = type(module)
    if cls in SWAPS.values() or not isinstance(module, MessagePassing):
        return None
    if isinstance(module, tuple(SWAPS)):
        return f"{qualname(cls)} subclasses a torch_geometric.nn layer (it may override forward itself)"
    return f"{cls.__name__}: no dgl-accel drop-in; it runs PyG's own forward"


def _reclass(model: torch.nn.Module, mapping: dict, explain: bool) -> SwapReport:
    """Give every module whose exact type is a key of ``mapping`` the mapped class, in place;
    ``explain``: list the other message passing layers in ``kept`` with the reason (not those
    inside a layer already listed)."""
    report, listed = SwapReport(), []
    for name, module in model.named_modules():
        if any(name.startswith(prefix) for prefix in listed):
            continue  # a layer's own parts (GINConv's nn, ...): the layer was reported
        target = mapping.get(type(module))
        if target is not None:
            report.swapped.append((name, qualname(type(module)), qualname(target)))
            module.__class__ = target
        elif explain and (why := _why_kept(module)) is not None:
            report.kept.append((name, why))
        else:
            continue
        listed.append(name + ".")
    return report


def swap(model: torch.nn.Module) -> SwapReport:
    """Swap every module whose exact type is ``GCNConv``, ``SAGEConv``, ``GINConv``, ``GATConv``,
    ``GATv2Conv``, ``GraphConv``, ``SGConv``, ``APPNP``, ``LGConv``, ``GINEConv``, ``EdgeConv``,
    ``TransformerConv``, ``RGCNConv`` or ``FastRGCNConv`` of ``torch_geometric.nn`` for dgl-accel's,
    in place; returns what changed and every other message passing layer it left alone, with the
    reason.

    >>> import torch, torch_geometric.nn as pyg_nn
    >>> model = torch.nn.Sequential(pyg_nn.GCNConv(4, 4), torch.nn.ReLU())
    >>> swap(model).swapped
    [('0', 'torch_geometric.nn.conv.gcn_conv.GCNConv', 'dgl_accel.pyg.nn.gcn_conv.GCNConv')]
    >>> unswap(model).swapped[0][2]
    'torch_geometric.nn.conv.gcn_conv.GCNConv'
    """
    return _reclass(_checked(model), SWAPS, explain=True)


def unswap(model: torch.nn.Module) -> SwapReport:
    """Give swapped modules their ``torch_geometric.nn`` class back, in place."""
    return _reclass(_checked(model), {ours: theirs for theirs, ours in SWAPS.items()}, explain=False)


__all__ = ["SWAPS", "SwapReport", "swap", "unswap"]
