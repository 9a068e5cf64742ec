"""Drop-in ``EdgeConv``: DGL's module, its per-edge work done per node.

DGL computes, for every edge u -> v, ``e = theta(x_v - x_u) + phi(x_v)`` and takes the max over
the in-edges of v: three [E, F] tensors forward (the differences, theta's product on them, the
sums) and as many backward.  ``theta`` is linear, so ``e = (W x_v + b + phi(x_v)) - W x_u``, and
the only term that depends on u is ``W x_u``: the max over u is ``W x_v + b + phi(x_v)`` minus the
min over the in-neighbours of ``W x_u``.  That is two products over the nodes and one min
aggregation (the arg-based extrema op, ``dgl_accel.core.extrema``); the gradient goes to the
same in-neighbour as DGL's (the argmax of e is the argmin of ``W x_u``).  The numbers are DGL's up
to rounding (a product of differences against a difference of products).  Destinations without
in-edges give 0, as DGL's ``update_all`` does.

With ``batch_norm`` the normalisation needs every edge's value: that layer makes one [E, F] tensor,
``e = (W x_v + b + phi(x_v)) - W x_u`` (one SDDMM), normalises it and takes the max over the
in-edges; DGL makes three and runs theta's product on E rows rather than N.  Graphs with several
relations and inputs other than float tensors [N, F] (or a pair of them on a block or a relation
graph between two node types) keep DGL's forward (with its message passing routed through
dgl-accel), as does a graph with destinations without in-edges when the module does not allow
them (DGL's error).
"""
import dgl.nn
import torch
import torch.nn.functional as F

from ..functional import gsddmm, gspmm
from ..graph.structure import cached
from ..patching import enabled
from .inputs import feature_pair, one_tensor_on_sources


class EdgeConv(dgl.nn.EdgeConv):
    def forward(self, g, feat):
        if not self._direct_applies(g, feat):
            with enabled():
                return super().forward(g, feat)
        return self._direct(g, feat)

    def _direct_applies(self, g, feat) -> bool:
        if g.num_edges() == 0:
            return False
        if isinstance(feat, tuple):  # on one node frame DGL's dstdata write replaces the sources too
            fits = feature_pair(g, feat) and not g.is_homogeneous
        else:
            fits = (isinstance(feat, torch.Tensor) and feat.dim() == 2
                    and one_tensor_on_sources(g, feat, feat.shape[1], blocks=True))
        return fits and (self._allow_zero_in_degree or not _has_empty_rows(g))  # else DGL's forward raises its error

    def _direct(self, g, feat):
        if isinstance(feat, tuple):
            h_src, h_dst = feat
            w_src = F.linear(h_src, self.theta.weight)
            w_dst = F.linear(h_dst, self.theta.weight)
        else:  # a graph, or a block whose destinations are its first sources
            h_src = feat
            h_dst = feat[: g.num_dst_nodes()] if g.is_block else feat
            w_src = F.linear(h_src, self.theta.weight)
            w_dst = w_src[: g.num_dst_nodes()] if g.is_block else w_src
        own = w_dst + self.phi(h_dst)
        if self.theta.bias is not None:  # in w_dst's dtype: theta's own product adds it so (autocast: bf16)
            own = own + self.theta.bias.to(own.dtype)
        if self.batch_norm:  # the normalisation needs every edge's value: e = own_v - W x_u, one [E, F] tensor
            return gspmm(g, "copy_e", "max", None, self.bn(gsddmm(g, "sub", own, w_src, "v", "u")))
        rst = own - gspmm(g, "copy_u", "min", w_src)
        if _has_empty_rows(g):  # DGL's update_all leaves 0 where no edge arrives
            rst = rst * cached(g, f"edgeconv.has_in_edges.{rst.dtype}",
                               lambda gg: (gg.in_degrees() > 0).to(rst.dtype).unsqueeze(-1))
        return rst


def _has_empty_rows(g) -> bool:
    return cached(g, "edgeconv.has_empty_rows", lambda gg: bool((gg.in_degrees() == 0).any()))
