"""Drop-in subclasses of ``dgl.nn`` modules whose aggregation runs on dgl-accel's ops, and
``swap(model)`` to switch an existing model over in place."""
from .gatconv import GATConv
from .ginconv import GINConv
from .graphconv import GraphConv
from .sageconv import SAGEConv
from .swap import SwapReport, swap, unswap

__all__ = ["GraphConv", "SAGEConv", "GINConv", "GATConv", "swap", "unswap", "SwapReport"]
