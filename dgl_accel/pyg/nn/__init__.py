"""Drop-in ``torch_geometric.nn`` layers on dgl-accel's core: subclasses of PyG's own that override
``forward`` only (same constructor, parameters and state_dict keys), so ``dgl_accel.pyg.swap(model)``
can change an existing module's class in place.  What each accelerates and what it leaves to PyG's
forward (counted in ``dgl_accel.stats()`` as ``pyg.<Layer>: fallthrough: <reason>``) is in its
module's docstring."""
from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .gcn_conv import GCNConv
from .gin_conv import GINConv
from .sage_conv import SAGEConv

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GATConv", "GATv2Conv"]
