"""Drop-in ``SAGEConv``: DGL's module, with its message passing routed through dgl-accel.

``mean`` and ``gcn`` aggregate with copy_u/u_mul_e + sum/mean, ``pool`` with copy_u/u_mul_e + max
(the arg-based extrema op, ``dgl_accel.core.extrema``), all on our paths; ``lstm``'s UDF reducer
goes to DGL unchanged.  Parameters, state_dict keys and outputs are DGL's.  Homogeneous graphs, blocks and
relation graphs ``hg[etype]`` between two node types (``dgl.nn.HeteroGraphConv``) all run on
dgl-accel; graphs with several relations go to DGL ("fallthrough: heterograph").

``mean`` with one feature tensor, no edge weights and a layer that narrows at least
:data:`ONE_PRODUCT_MIN_RATIO` times (in >= 4 out; DGL applies ``fc_neigh`` before the aggregation
from in > out) runs as one product and one aggregation: x [W_neigh | W_self] in one
:func:`dgl_accel.functional.dense` (x is read once, on oneDNN for large inputs), the mean of the
neighbour half (:func:`dgl_accel.functional.gspmm`), plus the self half and the bias.  The same
numbers as DGL's two products.  Measured (one thread, DGL's step time / ours): 1.13-1.26x at in 767
and 1433 -> 64 on Cora and Amazon-CS, 1.30x at 128 -> 16 on Amazon-CS; at 128 -> 64 it lost on
Slashdot (0.74-0.87x: the [N, 2 out] product and its halves' copies cost more memory traffic than
the second read of x saves), so narrower ratios, pairs of features (``HeteroGraphConv``'s relations)
and edge weights take DGL's mean forward with the aggregation called directly (not through
``update_all``) and the self half added into the product's output; ``pool`` takes the same direct
forward with its max.  The one-product forward pays where its product runs on oneDNN
(``dgl_accel.core.dense.onednn_enabled``: by default CPUs other than Intel's); on an Intel Xeon
(2026-11-29) it lost to DGL's two products at every shape it applies to (128 -> 16 on Amazon-CS
0.96-0.97x against 1.01-1.05x for the direct forward; 767 -> 64 on Cora 0.97x vs 1.05x, on
Amazon-CS 0.93x vs 1.02x; 1433 -> 64 on Cora 1.01x vs 1.03x), so there the direct forward runs.

``gcn`` with one feature tensor on a graph or a block runs DGL's gcn forward step for step, with
the in-degrees + 1 it divides by cached per graph (DGL asks the graph for them on every call) and,
without edge weights, the sum, the own row, the division and the bias as one op
(:func:`dgl_accel.functional.copy_u_sum_self`); the same numbers as DGL's.
"""
import dgl.nn
import torch
import torch.nn.functional as F

from ..core.autocast import cast_for_products
from ..core.dense import onednn_enabled
from ..functional import copy_u_sum_self, dense, gspmm
from ..graph.structure import cached, is_supported_graph
from ..patching import enabled
from .inputs import feature_pair, one_tensor_on_sources, one_weight_per_edge

ONE_PRODUCT_MIN_RATIO = 4  # in_feats / out_feats from which the one-product mean forward pays (docstring)


class SAGEConv(dgl.nn.SAGEConv):
    def forward(self, graph, feat, edge_weight=None):
        if self._aggre_type == "lstm":  # a Python reducer: nothing of ours to route
            return super().forward(graph, feat, edge_weight=edge_weight)
        if self._one_product_applies(graph, feat, edge_weight):
            return self._mean_one_product(graph, feat)
        if self._aggre_type == "gcn" and self._gcn_applies(graph, feat, edge_weight):
            return self._gcn(graph, feat, edge_weight)
        if self._aggre_type in ("mean", "pool") and self._direct_applies(graph, feat, edge_weight):
            return self._direct(graph, feat, edge_weight)
        with enabled():
            return super().forward(graph, feat, edge_weight=edge_weight)

    def _one_product_applies(self, graph, feat, edge_weight) -> bool:
        return (self._aggre_type == "mean" and edge_weight is None and isinstance(feat, torch.Tensor)
                and feat.dim() == 2 and feat.is_floating_point()
                and self._in_src_feats >= ONE_PRODUCT_MIN_RATIO * self._out_feats
                and graph.num_edges() > 0 and is_supported_graph(graph, relation=True)
                and (graph.is_block or graph.num_src_nodes() == graph.num_dst_nodes()) and onednn_enabled())

    def _gcn_applies(self, graph, feat, edge_weight) -> bool:
        return (graph.num_edges() > 0 and one_tensor_on_sources(graph, feat, self._in_src_feats, blocks=True)
                and one_weight_per_edge(graph, edge_weight))

    def _direct_applies(self, graph, feat, edge_weight) -> bool:
        if graph.num_edges() == 0 or not one_weight_per_edge(graph, edge_weight):
            return False
        if not isinstance(feat, tuple):
            return one_tensor_on_sources(graph, feat, self._in_src_feats, blocks=True)
        return (feature_pair(graph, feat) and feat[0].shape[1] == self._in_src_feats
                and feat[1].shape[1] == self._in_dst_feats)

    def _direct(self, graph, feat, edge_weight):
        """DGL's mean or pool forward (the same operations in the same order) with the aggregation
        called directly, not through ``update_all`` (its Python is most of a small graph's step),
        and the self half added into the product's fresh output rather than into a new tensor."""
        # under autocast the products' input is cast once (not once per product), the same numbers;
        # feat_src only where its first use is a product (pool, and mean with DGL's lin_before_mp)
        src_products = self._aggre_type == "pool" or self._in_src_feats > self._out_feats
        if isinstance(feat, tuple):
            feat_src, feat_dst = self.feat_drop(feat[0]), cast_for_products(self.feat_drop(feat[1]))
            feat_src = cast_for_products(feat_src) if src_products else feat_src
        else:
            feat_src = feat_dst = self.feat_drop(feat)
            if src_products:
                feat_src = feat_dst = cast_for_products(feat_src)
            if graph.is_block:
                feat_dst = feat_src[: graph.num_dst_nodes()]
            if not src_products:
                feat_dst = cast_for_products(feat_dst)
        op = "copy_u" if edge_weight is None else "u_mul_e"
        if self._aggre_type == "pool":
            neigh = self.fc_neigh(gspmm(graph, op, "max", F.relu(self.fc_pool(feat_src)), edge_weight))
        elif self._in_src_feats > self._out_feats:  # DGL's lin_before_mp
            neigh = gspmm(graph, op, "mean", self.fc_neigh(feat_src), edge_weight)
        else:
            neigh = self.fc_neigh(gspmm(graph, op, "mean", feat_src, edge_weight))
        rst = self.fc_self(feat_dst).add_(neigh)  # DGL: fc_self(h_self) + h_neigh (the product keeps no output)
        if self.activation is not None:
            rst = self.activation(rst)
        if self.norm is not None:
            rst = self.norm(rst)
        return rst

    def _gcn(self, graph, feat, edge_weight):
        """DGL's gcn forward (the same operations in the same order) on our aggregation, with the
        in-degrees + 1 it divides by cached per graph, not recomputed by DGL on every call.
        Without edge weights the sum, the own row, the division and (when the product comes first)
        the bias are one op: :func:`dgl_accel.functional.copy_u_sum_self`."""
        x = self.feat_drop(feat)
        lin_first = self._in_src_feats > self._out_feats
        h = self.fc_neigh(x) if lin_first else x
        degs = cached(graph, f"sage.gcn_degrees_plus_one.{h.dtype}", lambda g: g.in_degrees().to(h) + 1)
        if edge_weight is None:
            rst = copy_u_sum_self(graph, h, divisor=degs, bias=self.bias if lin_first else None)
        else:
            h_dst = h[: graph.num_dst_nodes()] if graph.is_block else h  # a slice's backward copies all of h
            rst = (gspmm(graph, "u_mul_e", "sum", h, edge_weight) + h_dst) / degs.unsqueeze(-1)
            rst = rst + self.bias if lin_first and self.bias is not None else rst
        if not lin_first:
            rst = self.fc_neigh(rst)
            if self.bias is not None:
                rst = rst + self.bias
        if self.activation is not None:
            rst = self.activation(rst)
        if self.norm is not None:
            rst = self.norm(rst)
        return rst

    def _mean_one_product(self, graph, feat):
        """DGL's mean forward with fc_neigh and fc_self as one product over the sources (the
        destinations are the first sources: a homogeneous graph or a block)."""
        out = self._out_feats
        x = self.feat_drop(feat)
        both = dense(x, torch.cat([self.fc_neigh.weight, self.fc_self.weight]).t())  # [num_src, 2 out]
        rst = gspmm(graph, "copy_u", "mean", both[:, :out].contiguous())
        rst = rst + both[: graph.num_dst_nodes(), out:]
        if self.fc_self.bias is not None:
            rst = rst + self.fc_self.bias
        if self.activation is not None:
            rst = self.activation(rst)
        if self.norm is not None:
            rst = self.norm(rst)
        return rst
