"""Building DGL blocks and subgraphs from the core's arrays, and the graph checks of the samplers:
the shared helpers of every sampler in :mod:`dgl_accel.sampling`.

Blocks and subgraphs are built with DGL's unit-graph constructor directly: ``dgl.create_block``
and ``dgl.graph`` re-validate the arrays and rebuild a metagraph on every call (~0.3 ms a block);
the arrays here are correct by construction.  Every builder falls back to the public constructor
if DGL's internals differ.
"""
from __future__ import annotations

import dgl
import numpy as np
import torch

try:
    from dgl import graph_index, heterograph_index
    from dgl.frame import Frame
    from dgl.heterograph import DGLBlock
    _FAST = True
except ImportError:  # pragma: no cover
    _FAST = False

from ..core.sampling.checks import expected
from ..core.sampling.layer.importance import member
from ..core.sampling.neighbor.sample import pack_pairs
from ..graph.structure import cached

__all__ = ["check_homogeneous", "np_idtype", "packed_pairs", "entry_ids", "new_block", "new_typed_block",
           "finish_block", "blocks_from_output", "device_block", "layer_block", "new_subgraph"]


def check_homogeneous(g, fix: str = "convert it with dgl.to_homogeneous(g) first.") -> None:
    """Raise unless ``g`` is a DGLGraph with one node type and one edge type (and not a block)."""
    if isinstance(g, dgl.DGLGraph) and not g.is_block and len(g.ntypes) == 1 and len(g.canonical_etypes) == 1:
        return
    if not isinstance(g, dgl.DGLGraph):
        got = type(g).__name__
    elif g.is_block:
        got = "a block"
    else:
        got = f"node types {list(g.ntypes)} and edge types {list(g.canonical_etypes)}"
    raise expected("a homogeneous graph (a DGLGraph with one node and one edge type, not a block)", got, fix)


def np_idtype(idtype):
    """The numpy dtype of a DGL idtype."""
    return np.int32 if idtype == torch.int32 else np.int64


def packed_pairs(g, csr, relation: tuple | None = None) -> np.ndarray:
    """:func:`~dgl_accel.core.sampling.neighbor.sample.pack_pairs` of the in-CSR ``csr`` of ``g``, or of
    its canonical edge type ``relation`` on a heterograph (cached per graph and relation)."""
    key = "accel_neighbor_pairs_v2" + ("" if relation is None else ":" + "/".join(relation))
    return cached(g, key, lambda _: pack_pairs(csr.indices.cpu().numpy(), csr.eids.cpu().numpy()))


def entry_ids(n: int, dtype) -> torch.Tensor:
    """Edge ids 0..n-1 of a CSC built entry by entry (numpy's arange: torch's intra-op pool stalls
    for ms on a busy 2-core machine)."""
    return torch.from_numpy(np.arange(n, dtype=dtype))


def new_block(indptr_b: np.ndarray, src_local: np.ndarray, num_src: int, num_dst: int, idtype,
              src_nid: np.ndarray, dst_nid: np.ndarray, eid: np.ndarray):
    """A DGLBlock from CSC arrays with its ``srcdata``/``dstdata[dgl.NID]`` and ``edata[dgl.EID]``
    (numpy arrays in ``idtype``'s dtype, shared, not copied).

    The CSC's edge-id array is an explicit arange (edge i is entry i): DGL reads an empty one the
    same way in most kernels, but its libxsmm SpMM (the backward of ``apply_edges`` in GATConv)
    checks for the array and fails without it.  The id columns go in as ready frames (no
    per-column frame update)."""
    indptr_t, indices_t = torch.from_numpy(indptr_b), torch.from_numpy(src_local)
    src_nid_t, dst_nid_t, eid_t = torch.from_numpy(src_nid), torch.from_numpy(dst_nid), torch.from_numpy(eid)
    if _FAST:
        try:
            gidx = heterograph_index.create_unitgraph_from_csr(
                2, num_src, num_dst, indptr_t, indices_t, entry_ids(src_local.shape[0], src_local.dtype),
                ["coo", "csr", "csc"], True)
            node_frames = [Frame({dgl.NID: src_nid_t}, num_rows=num_src), Frame({dgl.NID: dst_nid_t}, num_rows=num_dst)]
            edge_frames = [Frame({dgl.EID: eid_t}, num_rows=int(src_local.shape[0]))]
            return DGLBlock(gidx, (["_N"], ["_N"]), ["_E"], node_frames, edge_frames)
        except Exception:  # pragma: no cover - only on a DGL whose internals changed
            pass
    args = (indptr_t, indices_t, torch.arange(src_local.shape[0], dtype=indices_t.dtype))
    block = dgl.create_block(("csc", args), num_src_nodes=num_src, num_dst_nodes=num_dst, idtype=idtype)
    block.srcdata[dgl.NID], block.dstdata[dgl.NID], block.edata[dgl.EID] = src_nid_t, dst_nid_t, eid_t
    return block


def new_typed_block(csc: dict, num_src: dict, num_dst: dict, idtype, src_nid: dict, dst_nid: dict, eid: dict):
    """A typed DGLBlock (``dgl.create_block``'s layout: node and edge types sorted) from one CSC
    ``(indptr, local source ids)`` per canonical edge type, with ``srcdata``/``dstdata[dgl.NID]``
    per node type and ``edata[dgl.EID]`` per edge type (numpy arrays in ``idtype``'s dtype, shared).
    As :func:`new_block`, edge i of a relation is its CSC entry i (explicit ids, for the same reason)."""
    srctypes, dsttypes, rels = sorted(num_src), sorted(num_dst), sorted(csc)
    t = torch.from_numpy  # short: a dozen conversions below
    if _FAST:
        try:
            s_of = {nt: i for i, nt in enumerate(srctypes)}
            d_of = {nt: i + len(srctypes) for i, nt in enumerate(dsttypes)}
            rel_graphs = []
            for c in rels:
                indptr, local = t(csc[c][0]), t(csc[c][1])
                rel_graphs.append(heterograph_index.create_unitgraph_from_csr(
                    2, num_src[c[0]], num_dst[c[2]], indptr, local, entry_ids(local.shape[0], csc[c][1].dtype),
                    ["coo", "csr", "csc"], True))
            meta = graph_index.from_coo(len(srctypes) + len(dsttypes), [s_of[c[0]] for c in rels],
                                        [d_of[c[2]] for c in rels], True)
            counts = torch.tensor([num_src[nt] for nt in srctypes] + [num_dst[nt] for nt in dsttypes],
                                  dtype=torch.int64)
            gidx = heterograph_index.create_heterograph_from_relations(meta, rel_graphs,
                                                                       dgl.utils.toindex(counts, "int64"))
            frames = ([Frame({dgl.NID: t(src_nid[nt])}, num_rows=num_src[nt]) for nt in srctypes]
                      + [Frame({dgl.NID: t(dst_nid[nt])}, num_rows=num_dst[nt]) for nt in dsttypes])
            edge_frames = [Frame({dgl.EID: t(eid[c])}, num_rows=int(csc[c][1].shape[0])) for c in rels]
            return DGLBlock(gidx, (srctypes, dsttypes), [c[1] for c in rels], frames, edge_frames)
        except Exception:  # pragma: no cover - only on a DGL whose internals changed
            pass
    data = {c: ("csc", (t(csc[c][0]), t(csc[c][1]), torch.arange(csc[c][1].shape[0], dtype=idtype))) for c in rels}
    block = dgl.create_block(data, num_src_nodes=num_src, num_dst_nodes=num_dst, idtype=idtype)
    for nt in srctypes:
        block.srcnodes[nt].data[dgl.NID] = t(src_nid[nt])
    for nt in dsttypes:
        block.dstnodes[nt].data[dgl.NID] = t(dst_nid[nt])
    for c in rels:
        block.edges[c].data[dgl.EID] = t(eid[c])
    return block


def finish_block(indptr_b, src_local, dst, new, eid, idtype):
    """The block (dst first, then the new sources, as sources; original node and edge ids attached)
    and its source ids, from relabelled CSC arrays: the one assembly step of every CPU/GPU sampler."""
    np_idt = np_idtype(idtype)
    src_ids = np.concatenate([dst, new])
    T = dst.shape[0]
    block = new_block(np.ascontiguousarray(indptr_b, dtype=np_idt), np.ascontiguousarray(src_local, dtype=np_idt),
                      int(src_ids.shape[0]), T, idtype, src_nid=src_ids.astype(np_idt, copy=False),
                      # a copy: ``dst`` is often a view of the caller's seed tensor, and two torch
                      # storages on one buffer break when a DataLoader worker moves the first to
                      # shared memory (the second then reads freed memory)
                      dst_nid=np.array(dst, dtype=np_idt), eid=np.ascontiguousarray(eid, dtype=np_idt))
    return block, src_ids


def blocks_from_output(out, idtype) -> list:
    """DGL blocks, input layer first, from the core's :class:`~dgl_accel.core.sampling.output.SamplerOutput`
    (the one conversion of the neighbour samplers).  Arrays on the CPU go in without a copy (but for
    the destination ids, as :func:`finish_block`); arrays on a device stay there."""
    if not out.layers or out.layers[0].indptr.device.type == "cpu":
        return [finish_block(*(a.numpy() for a in (layer.indptr, layer.src_local, layer.dst_nodes,
                                                      layer.src_nodes[layer.dst_nodes.shape[0]:], layer.eids)),
                             idtype)[0] for layer in out.layers]
    return [device_block(layer, idtype) for layer in out.layers]


def device_block(layer, idtype):
    """A block from one :class:`~dgl_accel.core.sampling.output.SampledLayer` on the layer's device."""
    ids = torch.arange(layer.num_edges, dtype=idtype, device=layer.indptr.device)
    block = dgl.create_block(("csc", (layer.indptr.to(idtype), layer.src_local.to(idtype), ids)),
                             num_src_nodes=layer.src_nodes.shape[0], num_dst_nodes=layer.dst_nodes.shape[0],
                             idtype=idtype, device=layer.indptr.device)
    block.srcdata[dgl.NID], block.dstdata[dgl.NID] = layer.src_nodes.to(idtype), layer.dst_nodes.to(idtype)
    block.edata[dgl.EID] = layer.eids.to(idtype)
    return block


def layer_block(g, v, row_pos, src, eid, w, weight: str):
    """The block of a layer-wise sampler (:mod:`dgl_accel.sampling.layer`) from its kept edges:
    destination position ``row_pos`` in ``v``, source id, edge id and weight per edge.  Sources are
    ``v`` first, then the other sources in ascending id.  Returns (block, src nodes)."""
    used = torch.unique(src)
    v_sorted, _ = torch.sort(v)
    new = used[~member(v_sorted, used)]
    src_nodes = torch.cat([v, new])
    all_sorted, all_perm = torch.sort(src_nodes)
    src_local = all_perm[torch.searchsorted(all_sorted, src)]
    block = dgl.create_block((src_local, row_pos), num_src_nodes=src_nodes.numel(), num_dst_nodes=v.numel(),
                             idtype=g.idtype, device=g.device)
    block.srcdata[dgl.NID] = src_nodes.to(g.idtype)
    block.dstdata[dgl.NID] = v.to(g.idtype)
    block.edata[dgl.EID] = eid.to(g.idtype)
    block.edata[weight] = w.to(torch.float32)
    return block, src_nodes


def device_subgraph(indptr: torch.Tensor, local: torch.Tensor, nodes: torch.Tensor, eids: torch.Tensor, idtype):
    """:func:`new_subgraph`'s CSC form from tensors on any device, built there: ``nodes.shape[0]``
    nodes (``ndata[dgl.NID] = nodes``), in-edges of node i at ``indptr[i]:indptr[i + 1]`` from
    ``local`` sources, ``edata[dgl.EID] = eids``."""
    dev = indptr.device
    ids = torch.arange(local.shape[0], dtype=idtype, device=dev)
    sg = dgl.graph(("csc", (indptr.to(idtype), local.to(idtype), ids)), num_nodes=nodes.shape[0], idtype=idtype,
                   device=dev)
    sg.ndata[dgl.NID] = nodes.to(idtype)
    sg.edata[dgl.EID] = eids.to(idtype)
    return sg


def new_subgraph(fmt: str, arrays, k: int, idtype, nodes: np.ndarray, eids: np.ndarray):
    """A homogeneous DGLGraph of ``k`` nodes (the parent's ``nodes``, in ``ndata[dgl.NID]``) with
    ``edata[dgl.EID] = eids``, from ``arrays``: ``(indptr, local sources)`` of a CSC whose edge j is
    entry j (``fmt="csc"``) or ``(src, dst)`` (``fmt="coo"``), in ``idtype``'s numpy dtype."""
    np_idt = np_idtype(idtype)
    a, b = (torch.from_numpy(np.asarray(x).astype(np_idt, copy=False)) for x in arrays)
    sg = None
    if _FAST:
        try:
            if fmt == "csc":
                ids = entry_ids(b.shape[0], np_idt)
                gidx = heterograph_index.create_unitgraph_from_csr(1, k, k, a, b, ids, ["coo", "csr", "csc"], True)
            else:
                gidx = heterograph_index.create_unitgraph_from_coo(1, k, k, a, b, ["coo", "csr", "csc"])
            sg = dgl.DGLGraph(gidx, ["_N"], ["_E"])
        except Exception:  # pragma: no cover - only on a DGL whose internals changed
            sg = None
    if sg is None:  # pragma: no cover
        if fmt == "csc":  # dgl.graph takes CSR (rows = sources): give it the transposed view via COO
            a, b = b, torch.from_numpy(np.repeat(np.arange(k, dtype=np_idt), np.diff(a.numpy())))
        sg = dgl.graph((a, b), num_nodes=k, idtype=idtype)
    sg.ndata[dgl.NID] = torch.from_numpy(nodes.astype(np_idt, copy=False))
    sg.edata[dgl.EID] = torch.from_numpy(eids.astype(np_idt, copy=False))
    return sg
