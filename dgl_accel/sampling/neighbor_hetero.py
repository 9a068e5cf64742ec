"""Heterograph neighbour sampling for :class:`dgl_accel.sampling.NeighborSampler` (issue 17).

Each relation ``(srctype, etype, dsttype)`` is sampled on its own in-CSR
(:func:`dgl_accel.graph.structure.relation_in_csr`) with the core's choice
(:func:`dgl_accel.core.sampling.neighbor.choose_positions`, the draw of ``sample_neighbors``), for
the current destination nodes of ``dsttype``; the relation's draws are keyed by
``call_seed(call key, relation index)`` so two relations into one node type draw independently.
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
from ..core.sampling.choice import weight_tables
from ..core.sampling.neighbor import choose_positions, unpack_pairs
from ..core.sampling.rng import call_seed
from ..graph.structure import relation_in_csr
from .blocks import np_idtype, packed_pairs

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


def _relation(g, c, prob):
    """(in-CSR, host indptr, packed (source, edge id) pairs, weight tables or None) of relation ``c``."""
    csr = relation_in_csr(g, c)
    indptr = np64(csr.indptr)
    pairs = packed_pairs(g, csr, c)
    tab = None
    if prob is not None:
        data = g.edges[c].data
        if prob not in data:
            raise expected(f"the edge field {prob!r} on every edge type", f"edge type {c} without it "
                           f"(fields {list(data.keys())})",
                           f"set g.edges[{c!r}].data[{prob!r}] (all ones for uniform sampling on that type).")
        p = data[prob]
        check_prob(p, g.num_edges(c), f"g.edges[{c!r}].data[{prob!r}]")
        tab = weight_tables(csr.indptr, csr.eids, p, indptr, np64(csr.eids))
    return csr, indptr, pairs, tab


def _layer(g, rels, cur, fanouts, excl, key, step, replace):
    """Sampled edges of one layer: {c: (dst positions in cur[dsttype], source ids, edge ids)}."""
    out = {}
    for i, c in enumerate(g.canonical_etypes):
        csr, indptr, pairs, tab = rels[c]
        dst = cur[c[2]]
        fanout = fanouts[c]
        if dst.size == 0 or fanout == 0:
            out[c] = (np.empty(0, np.int64),) * 3
            continue
        flat, counts = choose_positions(csr, dst, fanout, seed=call_seed(key, i), step=step,
                                        num_nodes=csr.num_rows, replace=replace, tables=tab, host_indptr=indptr)
        src, eid = unpack_pairs(np.take(pairs, flat))
        row = np.repeat(np.arange(dst.shape[0], dtype=np.int64), counts)
        ex = excl.get(c)
        if ex is not None and ex.size and eid.size:
            keep = ~np.isin(eid, ex)
            row, src, eid = row[keep], src[keep], eid[keep]
        out[c] = (row, np.asarray(src, np.int64), np.asarray(eid, np.int64))
    return out


def _block(g, cur, edges, idtype):
    """The typed block of one layer and its source ids per node type (seeds first, then the other
    sources in increasing id)."""
    np_idt = np_idtype(idtype)
    src_ids, local = {}, {}
    for nt in g.ntypes:
        dst = cur[nt]
        used = [edges[c][1] for c in g.canonical_etypes if c[0] == nt]
        n = g.num_nodes(nt)
        mark = np.zeros(n, dtype=bool)
        for s in used:
            mark[s] = True
        mark[dst] = False
        new = np.flatnonzero(mark)
        mapping = np.empty(n, dtype=np.int64)
        mapping[new] = np.arange(dst.shape[0], dst.shape[0] + new.shape[0], dtype=np.int64)
        mapping[dst] = np.arange(dst.shape[0], dtype=np.int64)
        src_ids[nt], local[nt] = np.concatenate([dst, new]), mapping
    data = {c: (torch.from_numpy(local[c[0]][edges[c][1]].astype(np_idt)),
                torch.from_numpy(edges[c][0].astype(np_idt))) for c in g.canonical_etypes}
    block = dgl.create_block(data, num_src_nodes={nt: int(src_ids[nt].shape[0]) for nt in g.ntypes},
                             num_dst_nodes={nt: int(cur[nt].shape[0]) for nt in g.ntypes}, idtype=idtype)
    for nt in g.ntypes:
        block.srcnodes[nt].data[dgl.NID] = torch.from_numpy(src_ids[nt].astype(np_idt))
        block.dstnodes[nt].data[dgl.NID] = torch.from_numpy(np.array(cur[nt], dtype=np_idt))
    for c in g.canonical_etypes:
        block.edges[c].data[dgl.EID] = torch.from_numpy(edges[c][2].astype(np_idt))
    return block, src_ids


def hetero_blocks(g, seed_nodes, fanouts, *, key: int, prob, replace: bool, exclude_eids=None) -> list:
    """The blocks of one call, input layer first (``fanouts`` input layer first, as the sampler's)."""
    if g.is_block:
        raise expected("a graph, not a block", "a block", "sample on the original graph.")
    per_layer = [layer_fanouts(g, f) for f in fanouts]
    cur = hetero_seeds(g, seed_nodes)
    excl = hetero_exclusions(g, exclude_eids)
    rels = {c: _relation(g, c, prob) for c in g.canonical_etypes}
    blocks = []
    for step, fan in enumerate(reversed(per_layer)):
        edges = _layer(g, rels, cur, fan, excl, key, step, replace)
        block, cur = _block(g, cur, edges, g.idtype)
        blocks.insert(0, block)
    return blocks
