"""Drop-in ``SAGEConv``: DGL's module, with its message passing routed through dgl-accel.

``mean`` and ``gcn`` aggregate with copy_u/u_mul_e + sum/mean, ``pool`` with copy_u/u_mul_e + max
(the arg-based extrema op, ``dgl_accel.core.extrema``), all on our paths; ``lstm``'s UDF reducer
goes to DGL unchanged.  Parameters, state_dict keys and outputs are DGL's.  Homogeneous graphs, blocks and
relation graphs ``hg[etype]`` between two node types (``dgl.nn.HeteroGraphConv``) all run on
dgl-accel; graphs with several relations go to DGL ("fallthrough: heterograph").
"""
import dgl.nn

from ..patching import enabled


class SAGEConv(dgl.nn.SAGEConv):
    def forward(self, graph, feat, edge_weight=None):
        if self._aggre_type == "lstm":  # a Python reducer: nothing of ours to route
            return super().forward(graph, feat, edge_weight=edge_weight)
        with enabled():
            return super().forward(graph, feat, edge_weight=edge_weight)
