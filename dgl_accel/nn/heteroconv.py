"""Drop-in ``HeteroGraphConv``: DGL's container with its forward inside ``dgl_accel.enabled()``.

DGL's container cuts every relation graph ``g[etype]`` anew on each call (a new graph object);
cut while dgl-accel is enabled, each is recorded with the graph it came from, so its relation
module's structure (CSR views, degree scales) is built once per graph, not once per call
(``dgl_accel.graph.structure``).  Its relation modules are swapped one by one by ``swap``; one that
has no drop-in still has its aggregations routed, as under ``enable()``.  Under autocast, relations
whose products read the same node type's features share one cast of them
(``core.autocast.shared_casts``: DGL casts them again for every relation's every product).
"""
import dgl.nn

from ..core.autocast import shared_casts
from ..patching import enabled


class HeteroGraphConv(dgl.nn.HeteroGraphConv):
    def forward(self, g, inputs, mod_args=None, mod_kwargs=None):
        with enabled(), shared_casts():
            return super().forward(g, inputs, mod_args=mod_args, mod_kwargs=mod_kwargs)
