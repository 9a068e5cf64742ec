"""``subgraph_type="induced"`` of ``dgl_accel.pyg.NeighborSampler`` and the loaders, against PyG 2.8's
definition (its torch-sparse path, ``directed=False``; PyG cannot run it here: neither pyg-lib nor
torch-sparse is installed, and pyg-lib has no induced sampling): the nodes are the directional
sampler's (same seed, same nodes in the same order), the edges exactly every edge of the graph among
them, each once with its global id, grouped by destination in node order, each destination's in
``edge_index`` order (a repeated seed gets its in-edges at each position, a source is found at its first);
``num_sampled_*`` and ``batch`` None as PyG returns them; full fanouts give the node set and edges of
a plain-Python port of torch-sparse's loops; heterographs per edge type, link loaders, weighted node
draws, the device pipeline, and PyG's refusal of disjoint (and temporal) induced sampling."""
import warnings
from collections import defaultdict

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.loader import LinkNeighborLoader, NodeLoader  # noqa: E402
from torch_geometric.nn import GraphConv  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402
from torch_geometric.sampler.base import SubgraphType  # noqa: E402

import dgl_accel  # noqa: E402
from dgl_accel.core.jit import runtime  # noqa: E402
from dgl_accel.pyg import loader  # noqa: E402
from dgl_accel.pyg.sampler import NeighborSampler  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from tests.pyg.test_sampler import graph, hetero, timed_graph  # noqa: E402

INDUCED = "induced"


def induced_reference(edge_index, src_ids, dst_ids):
    """(row, col, e_id) by the definition: destination after destination of ``dst_ids`` (each
    position), its in-edges in edge-id order whose source is in ``src_ids`` (at its first position)."""
    first, into = {}, defaultdict(list)
    for i, v in enumerate(src_ids.tolist()):
        first.setdefault(v, i)
    for e, (s, d) in enumerate(edge_index.t().tolist()):
        into[d].append((e, s))
    out = [(first[s], i, e) for i, w in enumerate(dst_ids.tolist()) for e, s in into[w] if s in first]
    return [torch.tensor(t, dtype=torch.int64) for t in zip(*out)] if out else [torch.zeros(0, dtype=torch.int64)] * 3


def check_edges(edge_index, e_id, full_edge_index, src_ids, dst_ids):
    """Every edge of the graph from ``src_ids`` into ``dst_ids``, each once, in the definition's order."""
    row, col, eid = induced_reference(full_edge_index, src_ids, dst_ids)
    assert torch.equal(edge_index, torch.stack([row, col])) and torch.equal(e_id, eid)
    assert torch.equal(full_edge_index[:, e_id], torch.stack([src_ids[edge_index[0]], dst_ids[edge_index[1]]]))


def check_batch(b, data, seeds):
    assert b.batch_size == seeds.numel() and torch.equal(b.n_id[:b.batch_size], seeds)
    assert torch.equal(b.x, data.x[b.n_id]) and torch.equal(b.edge_attr, data.edge_attr[b.e_id])
    check_edges(b.edge_index, b.e_id, data.edge_index, b.n_id, b.n_id)
    assert all(k not in b for k in ("num_sampled_nodes", "num_sampled_edges", "batch"))  # None, as PyG's


def torch_sparse_nodes(edge_index, seeds, hops):
    """torch-sparse's node list for full fanouts (its ``sample<replace, directed>`` loops, in Python):
    the seeds, then each hop's new sources in order of first appearance."""
    into = defaultdict(list)
    for s, d in edge_index.t().tolist():
        into[d].append(s)
    samples, seen = list(seeds.tolist()), set(seeds.tolist())
    begin = 0
    for _ in range(hops):
        end = len(samples)
        for w in samples[begin:end]:
            for v in into[w]:
                if v not in seen:
                    seen.add(v)
                    samples.append(v)
        begin = end
    return samples


# ------------------------------------------------------------------------------ homogeneous
@settings(max_examples=30)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=150), replace=st.booleans(),
       fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 3]), min_size=1, max_size=3), seed=st.integers(0, 2**64 - 1),
       data=st.data(), compiled=st.booleans())
def test_hypothesis_graphs_nodes_of_the_directional_sampler_edges_all_among_them(e, replace, fanouts, seed, data,
                                                                                 compiled):
    """``compiled``: the induced step's compiled pass even on these small graphs (else numpy below MIN_WORK)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "MIN_WORK", 0 if compiled else 1 << 40)
        check_hypothesis_graph(e, replace, fanouts, seed, data)


def check_hypothesis_graph(e, replace, fanouts, seed, data):
    g = Data(x=torch.arange(e.num_src), edge_index=torch.stack([e.src, e.dst]).long(), num_nodes=e.num_src,
             edge_attr=torch.arange(e.src.numel()) * 10)
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=8, unique=True)))
    ind = NeighborSampler(g, fanouts, replace=replace, subgraph_type=INDUCED, seed=seed)
    b = NodeLoader(g, node_sampler=ind, input_nodes=seeds, batch_size=seeds.numel())(torch.arange(seeds.numel()))
    check_batch(b, g, seeds)
    directional = NeighborSampler(g, fanouts, replace=replace, seed=seed).sample_from_nodes(
        NodeSamplerInput(None, seeds))
    assert torch.equal(b.n_id, directional.node)


def test_loader_batches_and_pygs_output_fields():
    data = graph()
    seeds = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(1))[:40]
    ours = loader.NeighborLoader(data, [3, 2], input_nodes=seeds, batch_size=16, subgraph_type=INDUCED, seed=4)
    assert ours.node_sampler.subgraph_type == SubgraphType.induced
    for i, b in enumerate(ours):
        check_batch(b, data, seeds[16 * i:16 * (i + 1)])
    out = ours.node_sampler.sample_from_nodes(NodeSamplerInput(None, seeds[:5]))
    assert out.batch is None and out.num_sampled_nodes is None and out.num_sampled_edges is None
    assert all(t.dtype == torch.int64 for t in (out.node, out.row, out.col, out.edge))
    with pytest.warns(UserWarning, match="'directed' argument in 'NeighborSampler' is deprecated"):
        old = loader.NeighborLoader(data, [3, 2], input_nodes=seeds, batch_size=16, directed=False, seed=4)
    fresh = loader.NeighborLoader(data, [3, 2], input_nodes=seeds, batch_size=16, subgraph_type=INDUCED, seed=4)
    assert all(torch.equal(a.e_id, b.e_id) for a, b in zip(old, fresh))


def test_duplicated_seeds_as_torch_sparse_lists_them():
    data = graph()
    b = NodeLoader(data, node_sampler=NeighborSampler(data, [3], subgraph_type=INDUCED, seed=0),
                   input_nodes=torch.tensor([7, 7, 2]), batch_size=3)(torch.arange(3))
    assert b.n_id[:3].tolist() == [7, 7, 2]
    check_edges(b.edge_index, b.e_id, data.edge_index, b.n_id, b.n_id)
    assert not bool((b.edge_index[0] == 1).any())  # a source is its first position
    got = torch.bincount(b.edge_index[1], minlength=3)
    assert got[0] == got[1] > 0  # each copy of 7 gets its in-edges


def test_full_fanouts_give_torch_sparses_nodes_and_the_model_agrees():
    data = graph(n=80, e=300, seed=4)
    seeds = torch.tensor([3, 17, 42])
    b = NodeLoader(data, node_sampler=NeighborSampler(data, [-1, -1], subgraph_type=INDUCED, seed=0),
                   input_nodes=seeds, batch_size=3)(torch.arange(3))
    want = torch_sparse_nodes(data.edge_index, seeds, 2)
    assert len(want) == b.num_nodes and set(want) == set(b.n_id.tolist())  # the same nodes (hop order: ours)
    check_batch(b, data, seeds)
    conv1, conv2 = GraphConv(4, 8), GraphConv(8, 3)  # two layers see exactly the 2-hop in-neighbourhood
    full = conv2(conv1(data.x, data.edge_index).relu(), data.edge_index)[seeds]
    assert torch.allclose(conv2(conv1(b.x, b.edge_index).relu(), b.edge_index)[:3], full, atol=1e-5)


# ------------------------------------------------------------------------------ heterographs
def test_hetero_every_edge_type_between_its_sampled_nodes():
    h = hetero()
    fan = {("paper", "cites", "paper"): [2, 1], ("author", "writes", "paper"): [-1, 3],
           ("paper", "rev_writes", "author"): [1, 2]}
    seeds = torch.arange(0, 40, 3)
    ind = NodeLoader(h, node_sampler=NeighborSampler(h, fan, subgraph_type=INDUCED, seed=2),
                     input_nodes=("paper", seeds), batch_size=7)
    directional = NodeLoader(h, node_sampler=NeighborSampler(h, fan, seed=2), input_nodes=("paper", seeds),
                             batch_size=7)
    for b, d in zip(ind, directional):
        for nt in h.node_types:
            assert torch.equal(b[nt].n_id, d[nt].n_id) and torch.equal(b[nt].x, h[nt].x[b[nt].n_id])
            assert "num_sampled_nodes" not in b[nt]
        for et in h.edge_types:
            check_edges(b[et].edge_index, b[et].e_id, h[et].edge_index, b[et[0]].n_id, b[et[2]].n_id)
            assert torch.equal(b[et].edge_attr, h[et].edge_attr[b[et].e_id])


def test_hetero_full_fanouts_give_torch_sparses_nodes():
    """torch-sparse's hetero loops: per hop, every edge type from the previous hop's new nodes of its
    destination type; the new sources of a type join its list (full fanouts: one node set)."""
    h = hetero(3)
    seeds = {"author": torch.tensor([0, 5, 9])}
    b = NodeLoader(h, node_sampler=NeighborSampler(h, [-1, -1], subgraph_type=INDUCED, seed=0),
                   input_nodes=("author", seeds["author"]), batch_size=3)(torch.arange(3))
    samples = {nt: list(seeds.get(nt, torch.zeros(0, dtype=torch.int64)).tolist()) for nt in h.node_types}
    begin = {nt: 0 for nt in h.node_types}
    for _ in range(2):
        end = {nt: len(v) for nt, v in samples.items()}
        for et in h.edge_types:
            for s, d in h[et].edge_index.t().tolist():
                if d in samples[et[2]][begin[et[2]]:end[et[2]]] and s not in samples[et[0]]:
                    samples[et[0]].append(s)
        begin = end
    for nt in h.node_types:
        assert sorted(samples[nt]) == sorted(b[nt].n_id.tolist())
    for et in h.edge_types:
        check_edges(b[et].edge_index, b[et].e_id, h[et].edge_index, b[et[0]].n_id, b[et[2]].n_id)


# ------------------------------------------------------------------------------------- links
@pytest.mark.parametrize("neg", ["binary", "triplet"])
def test_link_loader_induced_around_the_seed_edges(neg):
    data = graph()
    pos = data.edge_index[:, :30]
    ours = loader.LinkNeighborLoader(data, [3, 2], edge_label_index=pos, batch_size=10, neg_sampling=neg,
                                     subgraph_type=INDUCED, seed=0)
    for b in ours:
        check_edges(b.edge_index, b.e_id, data.edge_index, b.n_id, b.n_id)
        want = pos[:, b.input_id]
        if neg == "binary":
            assert torch.equal(b.n_id[b.edge_label_index[:, :10]], want)
        else:
            assert torch.equal(b.n_id[b.src_index], want[0]) and torch.equal(b.n_id[b.dst_pos_index], want[1])
    h = hetero()
    et = ("author", "writes", "paper")
    hb = next(iter(LinkNeighborLoader(h, [2, 2], edge_label_index=(et, h[et].edge_index[:, :8]), batch_size=8,
                                      neighbor_sampler=NeighborSampler(h, [2, 2], subgraph_type=INDUCED, seed=1))))
    assert torch.equal(torch.stack([hb["author"].n_id[hb[et].edge_label_index[0]],
                                    hb["paper"].n_id[hb[et].edge_label_index[1]]]), h[et].edge_index[:, :8])
    for rel in h.edge_types:
        check_edges(hb[rel].edge_index, hb[rel].e_id, h[rel].edge_index, hb[rel[0]].n_id, hb[rel[2]].n_id)


# ------------------------------------------------------------------------ weights, devices, refusals
def test_weighted_draws_the_nodes_by_weight_then_takes_every_edge_among_them():
    data = graph()
    data.w = torch.rand(data.num_edges, generator=torch.Generator().manual_seed(1))
    data.w[::3] = 0
    for b, d in zip(NodeLoader(data, node_sampler=NeighborSampler(data, [3, 2], weight_attr="w", subgraph_type=INDUCED,
                                                                  seed=4), batch_size=20),
                    NodeLoader(data, node_sampler=NeighborSampler(data, [3, 2], weight_attr="w", seed=4),
                               batch_size=20)):
        assert torch.equal(b.n_id, d.n_id)
        check_edges(b.edge_index, b.e_id, data.edge_index, b.n_id, b.n_id)
        assert bool((data.w[b.e_id] == 0).any())  # zero-weight edges among the nodes are in the subgraph


@pytest.mark.interpreter
def test_device_pipeline_gives_the_cpu_paths_batches():
    data, h = graph(n=40, e=200), hetero()
    out = {}
    for name in ("native", "triton"):
        dgl_accel.reset_stats()
        with dgl_accel.use_backend(name):
            homo = [(b.n_id, b.edge_index, b.e_id) for b in NodeLoader(
                data, node_sampler=NeighborSampler(data, [3, -1], subgraph_type=INDUCED, seed=5), batch_size=25)]
            het = [(b["paper"].n_id, b["author"].n_id, b["cites"].edge_index, b["writes"].e_id) for b in NodeLoader(
                h, node_sampler=NeighborSampler(h, [2, 2], subgraph_type=INDUCED, seed=1),
                input_nodes=("paper", torch.arange(20)), batch_size=10)]
        out[name] = homo + het
        path = "native-cpu" if name == "native" else "triton-interpreter"
        assert dgl_accel.stats()["induced_hops"] == {path: 2 + 2 * 3}  # a call per relation and batch
    assert all(torch.equal(x, y) for p, q in zip(out["native"], out["triton"]) for x, y in zip(p, q))


@pytest.mark.parametrize("make", [
    lambda d: NeighborSampler(d, [2], subgraph_type=INDUCED, disjoint=True),
    lambda d: loader.NeighborLoader(d, [2], subgraph_type=INDUCED, disjoint=True),
    lambda d: loader.LinkNeighborLoader(d, [2], directed=False, disjoint=True),
    lambda d: NeighborSampler(d, [2], subgraph_type=INDUCED, time_attr="time"),
    lambda d: NeighborSampler(HeteroData({"v": {"num_nodes": d.num_nodes}, ("v", "to", "v"): {"edge_index": d.edge_index}}),
                              [2], subgraph_type=INDUCED, disjoint=True),
], ids=["sampler", "loader", "link-loader-directed", "temporal", "hetero"])
def test_disjoint_induced_is_pygs_value_error_at_construction(make):
    """PyG refuses it (its torch-sparse path; at the first batch there): here when it is built."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # directed=False's deprecation
        with pytest.raises(ValueError, match="'disjoint' sampling not supported for neighbor sampling with "
                                             "`subgraph_type='induced'`"):
            make(timed_graph())
