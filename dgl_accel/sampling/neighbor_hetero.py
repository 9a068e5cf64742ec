"""Heterograph neighbour sampling for :class:`dgl_accel.sampling.NeighborSampler` (issue 17).

The relations' in-CSRs are stacked as segments of one CSR (:mod:`dgl_accel.core.sampling.neighbor.relations`,
cached on the graph), so a layer makes one neighbour choice for all relations that share a fanout:
one kernel launch on the Triton path, one compiled loop on the CPU, instead of one per relation.
The core samples (``sample_typed_layers``: on a CUDA graph every layer stays on the device, the
same samples as the CPU path) and this module converts its typed layers to DGL blocks.
Relation ``r``'s destination ``v`` draws as node ``row_offsets[r] + v`` of the stacked CSR under
the call's key, so two relations into one node type draw independently.
The block has DGL's typed layout (as ``dgl.to_block(frontier, dst_nodes)``): every node type on
both sides, every canonical edge type; ``dstdata[NID]`` per node type = the seeds of that type in
the given order (empty when none); ``srcdata[NID]`` per node type = those seeds first, then the
other sampled sources of that type (over all relations) in increasing id, as the homogeneous
sampler orders them; ``edata[EID]`` per edge type = the relation's edge ids, grouped by
destination in seed order.

DGL's rules kept: a fanout dict names every edge type (canonical or plain names), -1 = all
in-edges; ``prob``/``mask`` name an edge field, which must exist on every edge type here (DGL
silently misaligns its weight arrays when one lacks it); ``exclude_eids`` is a dict per edge type,
applied after the choice as in the homogeneous sampler; seeds are a dict {ntype: ids}.
"""
from __future__ import annotations

import dgl
import numpy as np
import torch

from ..core.sampling.arrays import np64
from ..core.sampling.checks import check_fanout, check_nodes, check_prob, excluded_edge_ids, expected
from ..core.sampling.neighbor.choice import weight_tables
from ..core.sampling.neighbor.relations import sample_typed_layers, stack_relations, stacked_weights
from ..graph.structure import cached, relation_in_csr
from .blocks import new_typed_block, np_idtype

__all__ = ["check_layer_fanouts", "layer_fanouts", "hetero_seeds", "hetero_exclusions", "hetero_blocks"]

DICT_FIX = "pass one fanout per edge type, e.g. {('user', 'follow', 'user'): 5, ('user', 'buys', 'item'): 3}."


def check_layer_fanouts(fanouts) -> list:
    """Per-layer fanouts, input layer first, each an int or a dict {etype: int} (-1 = all)."""
    out = []
    for i, f in enumerate(fanouts):
        if isinstance(f, dict):
            if not f:
                raise expected(f"fanouts[{i}] to name at least one edge type", "{}", DICT_FIX)
            out.append({k: check_fanout(v, f"fanouts[{i}][{k!r}]") for k, v in f.items()})
        else:
            out.append(check_fanout(f, f"fanouts[{i}]"))
    return out


def layer_fanouts(g, fanout) -> dict:
    """{canonical etype: fanout} of one layer on ``g``: an int applies to every edge type; a dict
    must name every edge type once (DGL's rule), by canonical or plain name."""
    if not isinstance(fanout, dict):
        return {c: fanout for c in g.canonical_etypes}
    if len(fanout) != len(g.canonical_etypes):
        raise expected(f"a fanout for each of the {len(g.canonical_etypes)} edge types (DGL's rule)",
                       f"keys {list(fanout)} for edge types {g.canonical_etypes}", DICT_FIX)
    out = {}
    for k, v in fanout.items():
        try:
            c = g.to_canonical_etype(k)
        except dgl.DGLError as e:
            raise expected("fanout keys that are edge types of the graph", repr(k), f"{DICT_FIX} ({e})") from None
        out[c] = v
    if len(out) != len(fanout):
        raise expected("each edge type named once in a fanout dict", f"keys {list(fanout)}", DICT_FIX)
    return out


def hetero_seeds(g, seed_nodes) -> dict:
    """Seeds as {ntype: int64 numpy ids} over every node type of ``g`` (empty where none given)."""
    if not isinstance(seed_nodes, dict):
        raise expected("seed nodes as a dict {ntype: ids} on a heterograph",
                       f"{type(seed_nodes).__name__} seeds on node types {g.ntypes} and edge types "
                       f"{g.canonical_etypes}", "pass the seeds per node type, as DGL's NeighborSampler takes "
                       f"them, e.g. {{{g.ntypes[0]!r}: torch.tensor([0, 1])}}.")
    for nt in seed_nodes:
        if nt not in g.ntypes:
            raise expected(f"seed node types among {g.ntypes}", repr(nt), "use the graph's node type names.")
    out = {}
    for nt in g.ntypes:
        if nt in seed_nodes:
            ids = torch.as_tensor(seed_nodes[nt])
            check_nodes(ids, g.num_nodes(nt), f"seed nodes of type {nt!r}")
            out[nt] = np64(ids.reshape(-1))
        else:
            out[nt] = np.empty(0, dtype=np.int64)
    return out


def hetero_exclusions(g, exclude_eids) -> dict:
    """``exclude_eids`` as {canonical etype: sorted distinct int64 ids}; a dict per edge type."""
    if exclude_eids is None:
        return {}
    if not isinstance(exclude_eids, dict):
        raise expected("exclude_eids as a dict {etype: edge ids} on a heterograph (DGL's rule)",
                       type(exclude_eids).__name__, "key the edge ids by their edge type.")
    return {g.to_canonical_etype(k): excluded_edge_ids(v) for k, v in exclude_eids.items()}


def _stack(g):
    """The relations of ``g`` stacked as one CSR (cached on the graph), rows in
    ``g.canonical_etypes`` order."""
    return cached(g, "accel_hetero_stack_v1",
                  lambda h: stack_relations([relation_in_csr(h, c) for c in h.canonical_etypes]))


def _weights(g, stack, prob: str):
    """Weight tables of the stacked CSR for the edge field ``prob`` (checked on every edge type)."""
    probs = []
    for c in g.canonical_etypes:
        data = g.edges[c].data
        if prob not in data:
            raise expected(f"the edge field {prob!r} on every edge type", f"edge type {c} without it "
                           f"(fields {list(data.keys())})",
                           f"set g.edges[{c!r}].data[{prob!r}] (all ones for uniform sampling on that type).")
        check_prob(data[prob], g.num_edges(c), f"g.edges[{c!r}].data[{prob!r}]", values=False)
        probs.append(data[prob])
    # rebuilt only when a weight tensor changes (identity or in-place version); a holder cached on
    # the graph, since weight_tables' own cache keys on the stacked tensor, new on every concatenation
    holder = cached(g, f"accel_hetero_weights:{prob}", lambda _: {})
    key = tuple((p.data_ptr(), p._version, p.dtype, p.numel()) for p in probs)
    if holder.get("key") != key:
        for c, p in zip(g.canonical_etypes, probs):  # the values, read once per weight tensor (as weight_tables)
            check_prob(p, g.num_edges(c), f"g.edges[{c!r}].data[{prob!r}]")
        w = stacked_weights(stack, probs)
        holder.update(key=key, probs=probs,  # refs keep the keyed data pointers from being reused
                      tables=weight_tables(stack.csr.indptr, stack.csr.eids, w, stack.host_indptr,
                                           np64(stack.csr.eids)))
    return holder["tables"]


def _typed_block(g, layer, idtype):
    """The typed DGL block of one :class:`~dgl_accel.core.sampling.output.TypedLayer` (node types
    in ``g.ntypes`` order, relations in ``g.canonical_etypes`` order), on the layer's device."""
    rels, types = g.canonical_etypes, g.ntypes
    num_src = {nt: int(layer.src_nodes[t].shape[0]) for t, nt in enumerate(types)}
    num_dst = {nt: int(layer.dst_nodes[t].shape[0]) for t, nt in enumerate(types)}
    if layer.relations and layer.relations[0].indptr.device.type != "cpu":
        dev = layer.relations[0].indptr.device
        data = {c: ("csc", (b.indptr.to(idtype), b.src_local.to(idtype),
                            torch.arange(b.num_edges, dtype=idtype, device=dev)))
                for c, b in zip(rels, layer.relations)}
        block = dgl.create_block(data, num_src_nodes=num_src, num_dst_nodes=num_dst, idtype=idtype, device=dev)
        for t, nt in enumerate(types):
            block.srcnodes[nt].data[dgl.NID] = layer.src_nodes[t].to(idtype)
            block.dstnodes[nt].data[dgl.NID] = layer.dst_nodes[t].to(idtype)
        for c, b in zip(rels, layer.relations):
            block.edges[c].data[dgl.EID] = b.eids.to(idtype)
        return block
    np_idt = np_idtype(idtype)
    return new_typed_block({c: (b.indptr.numpy().astype(np_idt), b.src_local.numpy().astype(np_idt))
                            for c, b in zip(rels, layer.relations)}, num_src, num_dst, idtype,
                           {nt: layer.src_nodes[t].numpy().astype(np_idt) for t, nt in enumerate(types)},
                           # a copy: the destinations may view the caller's seed tensor (see blocks.finish_block)
                           {nt: np.array(layer.dst_nodes[t].numpy(), dtype=np_idt) for t, nt in enumerate(types)},
                           {c: b.eids.numpy().astype(np_idt) for c, b in zip(rels, layer.relations)})


def hetero_blocks(g, seed_nodes, fanouts, *, key: int, prob, replace: bool, exclude_eids=None) -> list:
    """The blocks of one call, input layer first (``fanouts`` input layer first, as the sampler's)."""
    if g.is_block:
        raise expected("a graph, not a block", "a block", "sample on the original graph.")
    per_layer = [layer_fanouts(g, f) for f in fanouts]
    seeds = hetero_seeds(g, seed_nodes)
    excl = hetero_exclusions(g, exclude_eids)
    stack = _stack(g)
    tables = None if prob is None else _weights(g, stack, prob)
    rels, types = g.canonical_etypes, {nt: t for t, nt in enumerate(g.ntypes)}
    out = sample_typed_layers(stack, [(types[c[0]], types[c[2]]) for c in rels],
                              [g.num_nodes(nt) for nt in g.ntypes], [torch.from_numpy(seeds[nt]) for nt in g.ntypes],
                              [[f[c] for c in rels] for f in per_layer],
                              seed=key, replace=replace, tables=tables,
                              exclude=[None if excl.get(c) is None else torch.from_numpy(excl[c]) for c in rels])
    return [_typed_block(g, layer, g.idtype) for layer in out.layers]
