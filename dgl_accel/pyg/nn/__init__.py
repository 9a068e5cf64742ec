"""Drop-in ``torch_geometric.nn`` layers on dgl-accel's core: subclasses of PyG's own that override
``forward`` only (same constructor, parameters and state_dict keys), so ``dgl_accel.pyg.swap(model)``
can change an existing module's class in place.  What each accelerates and what it leaves to PyG's
forward (counted in ``dgl_accel.stats()`` as ``pyg.<Layer>: fallthrough: <reason>``) is in its
module's docstring."""

from ...core.extras import missing_extra

try:
    import torch_geometric  # noqa: F401  (first, so that without PyG the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
from .appnp import APPNP
from .edge_conv import EdgeConv
from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .gcn_conv import GCNConv
from .gin_conv import GINConv
from .gine_conv import GINEConv
from .graph_conv import GraphConv
from .lg_conv import LGConv
from .rgcn_conv import FastRGCNConv, RGCNConv
from .sage_conv import SAGEConv
from .sg_conv import SGConv
from .transformer_conv import TransformerConv

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GATConv", "GATv2Conv", "GraphConv", "SGConv", "APPNP", "LGConv",
           "GINEConv", "EdgeConv", "TransformerConv", "RGCNConv", "FastRGCNConv"]
