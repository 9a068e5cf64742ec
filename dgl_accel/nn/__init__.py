"""Drop-in subclasses of ``dgl.nn`` modules whose aggregation runs on dgl-accel's ops, and
``swap(model)`` to switch an existing model over in place; ``ShaDowReadout``, shaDow-GNN's target
readout."""

from ..core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
from .dotgatconv import DotGatConv
from .edgeconv import EdgeConv
from .gatconv import GATConv
from .gatv2conv import GATv2Conv
from .ginconv import GINConv
from .graphconv import GraphConv
from .heteroconv import HeteroGraphConv
from .readout import ShaDowReadout
from .sageconv import SAGEConv
from .swap import SwapReport, swap, unswap

__all__ = ["GraphConv", "SAGEConv", "GINConv", "GATConv", "GATv2Conv", "DotGatConv", "EdgeConv", "HeteroGraphConv",
           "swap", "unswap", "SwapReport", "ShaDowReadout"]
