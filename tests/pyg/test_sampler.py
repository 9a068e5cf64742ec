"""``dgl_accel.pyg.NeighborSampler`` against PyG's sampler contract, through PyG's own loaders
(``NodeLoader``, ``NeighborLoader(neighbor_sampler=...)``, ``LinkNeighborLoader``): every sampled
edge is that edge of the graph (``n_id`` / ``e_id`` / edge attributes agree), the seeds come first,
hop k holds exactly ``min(fanout, in-degree)`` distinct in-edges of each node first reached at hop
k-1, the per-hop counts add up, a run is reproducible, full fanouts give the k-hop subgraph (a model
on the batch equals the model on the whole graph at the seeds), heterographs per edge type, links
with negative sampling, bad input refused before sampling, and the device pipeline (the Triton
kernels, interpreted here; compiled on a CUDA graph where there is one) gives the CPU path's batches."""
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader, NodeLoader  # noqa: E402
from torch_geometric.nn import GraphConv, SAGEConv  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402
from torch_geometric.utils import is_undirected, k_hop_subgraph  # noqa: E402

import dgl_accel  # noqa: E402
from dgl_accel.pyg import loader  # noqa: E402  (ours: PyG's loaders with the sampler built from their arguments)
from dgl_accel.pyg.sampler import NeighborSampler  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402


def graph(n=60, e=400, seed=0) -> Data:
    """A multigraph with self-loops, multi-edges and isolated nodes (the last 5), features on both."""
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n - 5, (2, e), generator=g)
    src[:10] = dst[:10]                                     # self-loops
    src[10:30], dst[10:30] = src[30:50], dst[30:50]         # multi-edges
    return Data(x=torch.randn(n, 4, generator=g), edge_index=torch.stack([src, dst]),
                edge_attr=torch.randn(e, 3, generator=g), num_nodes=n)


def wanted(deg: torch.Tensor, fanout: int, replace: bool) -> torch.Tensor:
    if fanout < 0:
        return deg
    return torch.where(deg > 0, fanout, 0) if replace else deg.clamp(max=fanout)


def check_hops(n_id, row, col, e_id, nodes, edges, fanouts, replace, in_deg, src_ids=None):
    """Hop k of one (homogeneous or single-relation) batch: destinations are the nodes first reached
    at hop k-1, each with wanted(...) in-edges (distinct without replacement); the next hop's nodes
    are exactly the sources not seen before.  ``src_ids``: the sources' node list (heterographs)."""
    src_ids = n_id if src_ids is None else src_ids
    assert len(edges) == len(fanouts) and sum(edges) == col.numel() == row.numel() == e_id.numel()
    n0 = e0 = 0
    for k, f in enumerate(fanouts):
        n1, e1 = n0 + nodes[k], e0 + edges[k]
        c, eid = col[e0:e1], e_id[e0:e1]
        assert ((c >= n0) & (c < n1)).all()
        assert torch.equal(torch.bincount(c - n0, minlength=n1 - n0), wanted(in_deg[n_id[n0:n1]], f, replace))
        if not replace:
            assert torch.unique(torch.stack([c, eid]), dim=1).shape[1] == eid.numel()
        n0, e0 = n1, e1
    return n0


def check_batch(batch, data, fanouts, replace, seeds):
    """PyG's output contract for one homogeneous batch."""
    n_id, ei, e_id, bs = batch.n_id, batch.edge_index, batch.e_id, batch.batch_size
    assert bs == seeds.numel() and torch.equal(n_id[:bs], seeds)
    assert torch.equal(batch.x, data.x[n_id]) and torch.equal(batch.edge_attr, data.edge_attr[e_id])
    assert torch.equal(data.edge_index[:, e_id], n_id[ei])  # every sampled edge is that edge of the graph
    nodes, edges = batch.num_sampled_nodes, batch.num_sampled_edges
    assert len(nodes) == len(fanouts) + 1 and sum(nodes) == n_id.numel() == batch.num_nodes
    assert n_id.unique().numel() == n_id.numel()
    in_deg = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
    check_hops(n_id, ei[0], ei[1], e_id, nodes, edges, fanouts, replace, in_deg)
    n1 = e1 = 0
    for k in range(len(fanouts)):  # hop k+1's nodes: hop k's sources not seen before, each once
        n1, e0, e1 = n1 + nodes[k], e1, e1 + edges[k]
        new = set(n_id[ei[0, e0:e1]].tolist()) - set(n_id[:n1].tolist())
        assert sorted(new) == n_id[n1:n1 + nodes[k + 1]].tolist()


def batches(loader):
    return [(b.n_id, b.edge_index, b.e_id) for b in loader]


# ------------------------------------------------------------------------------ homogeneous
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2, 1], [0, 4]])
@pytest.mark.parametrize("replace", [False, True])
def test_node_loader_batches_follow_pygs_contract(fanouts, replace):
    data = graph()
    input_nodes = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(1))[:40]
    sampler = NeighborSampler(data, fanouts, replace=replace, seed=1)
    loader = NodeLoader(data, node_sampler=sampler, input_nodes=input_nodes, batch_size=16)
    for i, batch in enumerate(loader):
        check_batch(batch, data, fanouts, replace, input_nodes[16 * i:16 * (i + 1)])
        assert torch.equal(batch.input_id, torch.arange(16 * i, 16 * i + batch.batch_size))
    assert sampler.calls == 3


def test_neighbor_loader_takes_it_and_runs_reproduce():
    data = graph()
    runs = [batches(NeighborLoader(data, [4, 3], batch_size=20, neighbor_sampler=NeighborSampler(data, [4, 3], seed=7)))
            for _ in range(2)]
    for a, b in zip(*runs):
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    runs = []
    for _ in range(2):
        torch.manual_seed(3)  # the default seed is drawn from torch's generator
        runs.append(batches(NodeLoader(data, node_sampler=NeighborSampler(data, [4, 3]), batch_size=20)))
    assert all(torch.equal(x, y) for a, b in zip(*runs) for x, y in zip(a, b))
    other = batches(NodeLoader(data, node_sampler=NeighborSampler(data, [4, 3], seed=8), batch_size=20))
    assert any(not torch.equal(a[2], b[2]) for a, b in zip(runs[0], other))


def test_dataloader_workers_with_shared_memory():
    """Batches in two worker processes keep the contract and repeat run to run (worker w keys its
    calls by w); the CPU path's host arrays view the graph's shared storage, not the storage that
    share_memory_() replaced."""
    data = graph()
    runs = []
    for _ in range(2):
        sampler = NeighborSampler(data, [3, 2], share_memory=True, seed=0)
        indptr = sampler.graph.rels[0].csr.indptr
        assert indptr.is_shared() and np.shares_memory(sampler.graph.rels[0].host()[0], indptr.numpy())
        runs.append(list(NodeLoader(data, node_sampler=sampler, batch_size=15, num_workers=2)))
        for i, b in enumerate(runs[-1]):
            check_batch(b, data, [3, 2], False, torch.arange(15 * i, 15 * (i + 1)))
    assert all(torch.equal(a.e_id, b.e_id) for a, b in zip(*runs))


@settings(max_examples=30)
@given(e=tst.edge_lists(min_nodes=1, max_nodes=30, max_edges=150), replace=st.booleans(),
       fanouts=st.lists(st.sampled_from([-1, 0, 1, 2, 3]), min_size=1, max_size=3), seed=st.integers(0, 2**64 - 1),
       data=st.data())
def test_hypothesis_graphs(e, replace, fanouts, seed, data):
    g = Data(x=torch.arange(e.num_src), edge_index=torch.stack([e.src, e.dst]).long(), num_nodes=e.num_src,
             edge_attr=torch.arange(e.src.numel()) * 10)
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, e.num_src - 1), min_size=1, max_size=8, unique=True)))
    loader = NodeLoader(g, node_sampler=NeighborSampler(g, fanouts, replace=replace, seed=seed), input_nodes=seeds,
                        batch_size=seeds.numel())
    check_batch(loader(torch.arange(seeds.numel())), g, fanouts, replace, seeds)


def test_duplicated_seeds_each_get_their_in_edges():
    data = graph()
    b = NodeLoader(data, node_sampler=NeighborSampler(data, [3], seed=0), input_nodes=torch.tensor([7, 7, 2]),
                   batch_size=3)(torch.arange(3))
    assert b.n_id[:3].tolist() == [7, 7, 2] and b.batch_size == 3
    assert torch.equal(data.edge_index[:, b.e_id], b.n_id[b.edge_index])
    got = torch.bincount(b.edge_index[1], minlength=3)
    assert got[0] == got[1] == min(3, int((data.edge_index[1] == 7).sum())) > 0


def test_full_fanout_is_the_k_hop_subgraph_and_the_model_agrees():
    data = graph(n=80, e=300, seed=4)
    seeds = torch.tensor([3, 17, 42])
    batch = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds, batch_size=3,
                                     neighbor_sampler=NeighborSampler(data, [-1, -1], seed=0))))
    subset = k_hop_subgraph(seeds, 2, data.edge_index, num_nodes=data.num_nodes)[0]
    assert sorted(batch.n_id.tolist()) == subset.tolist()
    torch.manual_seed(0)
    convs = torch.nn.ModuleList([GraphConv(4, 8), GraphConv(8, 2)])

    def model(x, edge_index, w):
        return convs[1](convs[0](x, edge_index, w).relu(), edge_index, w)
    full = model(data.x, data.edge_index, data.edge_attr[:, 0])[seeds]
    assert torch.allclose(model(batch.x, batch.edge_index, batch.edge_attr[:, 0])[:3], full, atol=1e-5)


def test_training_smoke_sage_loss_decreases():
    """A 2-layer PyG SAGEConv model trained through NodeLoader on a two-community graph."""
    g = torch.Generator().manual_seed(0)
    n = 200
    y = torch.arange(n) % 2
    src, dst = torch.randint(0, n, (2, 1600), generator=g)
    keep = (y[src] == y[dst]) | (torch.rand(1600, generator=g) < 0.1)
    data = Data(x=torch.randn(n, 8, generator=g) + y[:, None] * 0.5, y=y,
                edge_index=torch.stack([src[keep], dst[keep]]), num_nodes=n)
    torch.manual_seed(0)
    convs = torch.nn.ModuleList([SAGEConv(8, 16), SAGEConv(16, 2)])
    opt = torch.optim.Adam(convs.parameters(), lr=0.02)
    loader = NodeLoader(data, node_sampler=NeighborSampler(data, [5, 5], seed=0), batch_size=50, shuffle=True)
    losses = []
    for _ in range(4):
        total = 0.0
        for b in loader:
            out = convs[1](convs[0](b.x, b.edge_index).relu(), b.edge_index)[:b.batch_size]
            loss = torch.nn.functional.cross_entropy(out, b.y[:b.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total)
    assert losses[-1] < 0.8 * losses[0], losses


def test_bidirectional_subgraphs_are_undirected():
    data = graph()
    sampler = NeighborSampler(data, [3, 3], subgraph_type="bidirectional", seed=0)
    for b in NodeLoader(data, node_sampler=sampler, batch_size=20):
        assert is_undirected(b.edge_index)
        ends = set(map(tuple, data.edge_index.t().tolist()))
        assert all((u, v) in ends or (v, u) in ends for u, v in b.n_id[b.edge_index].t().tolist())


# ------------------------------------------------------------------------------- disjoint
def check_disjoint(b, data, fanouts, seeds, replace=False):
    """PyG's disjoint batch: seed i starts subgraph i (``batch``), every edge stays inside one
    subgraph, a subgraph lists each node once, and each subgraph is what sampling its seed alone
    gives by the hop rule (each node first reached at hop k-1 in it: wanted(...) in-edges)."""
    n_id, ei, e_id, batch = b.n_id, b.edge_index, b.e_id, b.batch
    bs = seeds.numel()
    assert torch.equal(n_id[:bs], seeds) and torch.equal(batch[:bs], torch.arange(bs))
    assert torch.equal(data.edge_index[:, e_id], n_id[ei]) and torch.equal(b.x, data.x[n_id])
    assert torch.equal(batch[ei[0]], batch[ei[1]])  # subgraphs share no edge, hence no node
    keys = batch * data.num_nodes + n_id
    assert keys.unique().numel() == keys.numel()
    in_deg = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
    assert check_hops(n_id, ei[0], ei[1], e_id, b.num_sampled_nodes, b.num_sampled_edges, fanouts, replace,
                      in_deg) == sum(b.num_sampled_nodes[:-1])


@pytest.mark.parametrize("replace", [False, True])
def test_disjoint_batches_are_one_subgraph_per_seed(replace):
    data = graph()
    seeds = torch.tensor([3, 3, 17, 42, 7, 0])  # a repeated seed: two subgraphs
    loader = NeighborLoader(data, [3, 2], input_nodes=seeds, batch_size=6, disjoint=True,
                            neighbor_sampler=NeighborSampler(data, [3, 2], disjoint=True, replace=replace, seed=2))
    b = next(iter(loader))
    check_disjoint(b, data, [3, 2], seeds, replace)
    shared = next(iter(NodeLoader(data, node_sampler=NeighborSampler(data, [3, 2], seed=2), input_nodes=seeds,
                                  batch_size=6)))
    assert b.n_id.numel() > shared.n_id.numel()  # nodes reached from several seeds appear once per seed


def test_disjoint_full_fanout_gives_each_seed_its_k_hop_subgraph():
    data = graph(n=80, e=300, seed=4)
    seeds = torch.tensor([3, 17, 42, 17])
    b = next(iter(NodeLoader(data, node_sampler=NeighborSampler(data, [-1, -1], disjoint=True, seed=0),
                             input_nodes=seeds, batch_size=4)))
    check_disjoint(b, data, [-1, -1], seeds)
    for i, s in enumerate(seeds.tolist()):
        subset = k_hop_subgraph(s, 2, data.edge_index, num_nodes=data.num_nodes)[0]
        assert sorted(b.n_id[b.batch == i].tolist()) == subset.tolist()


def test_disjoint_hetero_and_links_follow_pygs_layout():
    h = hetero(2)
    b = next(iter(NeighborLoader(h, [2, 2], input_nodes=("author", torch.tensor([1, 1, 4])), batch_size=3,
                                 neighbor_sampler=NeighborSampler(h, [2, 2], disjoint=True, seed=0))))
    assert torch.equal(b["author"].batch[:3], torch.arange(3)) and torch.equal(b["author"].n_id[:3], torch.tensor([1, 1, 4]))
    for (src, rel, dst) in h.edge_types:
        ei = b[src, rel, dst].edge_index
        assert torch.equal(b[src].batch[ei[0]], b[dst].batch[ei[1]])
    data = graph()
    pos = data.edge_index[:, 40:50]
    lb = next(iter(LinkNeighborLoader(data, [3, 2], edge_label_index=pos, batch_size=10, disjoint=True,
                                      neg_sampling="binary",
                                      neighbor_sampler=NeighborSampler(data, [3, 2], disjoint=True, seed=0))))
    assert torch.equal(lb.n_id[lb.edge_label_index[:, :10]], pos)
    pairs = lb.batch[lb.edge_label_index]  # PyG: an edge's two endpoints form one subgraph
    assert torch.equal(pairs[0], pairs[1]) and torch.equal(lb.batch[lb.edge_index[0]], lb.batch[lb.edge_index[1]])


# ------------------------------------------------------------------------------- temporal
def timed_graph(seed=0, n=60, e=400):
    data = graph(n, e, seed)
    g = torch.Generator().manual_seed(seed + 1)
    data.time = torch.randint(0, 20, (n,), generator=g)            # node-level
    data.edge_time = torch.randint(0, 20, (e,), generator=g)       # edge-level
    return data


def entry_times(data, time_attr, e_id):
    return data.time[data.edge_index[0, e_id]] if time_attr == "time" else data.edge_time[e_id]


@pytest.mark.parametrize("time_attr", ["time", "edge_time"])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("replace", [False, True])
def test_temporal_batches_take_only_edges_up_to_their_seeds_time(time_attr, strategy, replace):
    """PyG's temporal rule (pyg-lib's): subgraph b draws only in-edges whose time (the source node's,
    or the edge's) is at most seed b's time; per node min(fanout, allowed) of them (replace: fanout
    where any is allowed); ``last``: the allowed ones of greatest time."""
    data = timed_graph()
    seeds = torch.arange(0, 50, 3)
    seed_time = torch.randint(5, 20, (seeds.numel(),), generator=torch.Generator().manual_seed(3))
    kw = dict(input_time=seed_time) if time_attr == "edge_time" else {}
    b = next(iter(loader.NeighborLoader(data, [3, 2], input_nodes=seeds, batch_size=seeds.numel(), time_attr=time_attr,
                                 temporal_strategy=strategy, replace=replace, seed=0, **kw)))
    limit = seed_time if time_attr == "edge_time" else data.time[seeds]
    n_id, (row, col), e_id, batch = b.n_id, b.edge_index, b.e_id, b.batch
    assert torch.equal(n_id[:seeds.numel()], seeds) and torch.equal(batch[row], batch[col])
    assert torch.equal(data.edge_index[:, e_id], n_id[b.edge_index])
    times = entry_times(data, time_attr, e_id)
    assert (times <= limit[batch[col]]).all() and e_id.numel() > 0
    fanouts = {0: 3, 1: 2}
    hop_of_node = torch.repeat_interleave(torch.arange(len(b.num_sampled_nodes)), torch.tensor(b.num_sampled_nodes))
    for v in range(n_id.numel() - b.num_sampled_nodes[-1]):  # every node whose in-edges were drawn
        allowed = ((data.edge_index[1] == n_id[v]) & (entry_times(data, time_attr, torch.arange(data.num_edges))
                                                       <= limit[batch[v]])).nonzero().flatten()
        mine = e_id[col == v]
        f = fanouts[int(hop_of_node[v])]
        want = (f if allowed.numel() else 0) if replace and strategy == "uniform" else min(f, allowed.numel())
        assert mine.numel() == want, (v, mine, allowed)
        assert set(mine.tolist()) <= set(allowed.tolist())
        if strategy == "last":  # the latest allowed times, as many as taken
            top = entry_times(data, time_attr, allowed).sort(descending=True).values[:want]
            assert torch.equal(entry_times(data, time_attr, mine).sort(descending=True).values, top)


def test_temporal_uniform_draws_every_allowed_edge_alike():
    ei = torch.tensor([[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]])
    data = Data(edge_index=ei, num_nodes=7, edge_time=torch.tensor([1, 2, 3, 9, 9, 2]))
    sampler = NeighborSampler(data, [2], time_attr="edge_time", seed=4)
    counts = torch.zeros(6)
    runs = 1200
    for _ in range(runs):
        out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0]), time=torch.tensor([5])))
        counts[out.edge] += 1
    assert counts[3] == counts[4] == 0  # after the seed's time
    share = counts[[0, 1, 2, 5]] / (2 * runs)  # 2 of the 4 allowed edges each call: 1/4 each
    assert (share - 0.25).abs().max() < 0.05, share


def test_temporal_hetero_and_links_follow_pygs_layout():
    h = hetero(3)
    g = torch.Generator().manual_seed(0)
    h["paper"].time = torch.randint(0, 10, (h["paper"].num_nodes,), generator=g)  # authors carry no time
    b = next(iter(loader.NeighborLoader(h, [2, 2], input_nodes=("paper", torch.arange(6)), batch_size=6, time_attr="time",
                                 seed=0)))
    limit = h["paper"].time[:6]
    for (src, rel, dst) in h.edge_types:
        row, col = b[src, rel, dst].edge_index
        assert torch.equal(b[src].batch[row], b[dst].batch[col])
        if src == "paper":
            assert (h["paper"].time[b[src].n_id[row]] <= limit[b[dst].batch[col]]).all()
    data = timed_graph(1)
    pos = data.edge_index[:, :12]
    t = torch.full((12,), 10)
    lb = next(iter(loader.LinkNeighborLoader(data, [3, 2], edge_label_index=pos, edge_label_time=t, time_attr="edge_time",
                                      batch_size=12, neg_sampling="binary", seed=0)))
    assert torch.equal(lb.n_id[lb.edge_label_index[:, :12]], pos)
    assert (data.edge_time[lb.e_id] <= 10).all() and torch.equal(lb.batch[lb.edge_index[0]], lb.batch[lb.edge_index[1]])


def test_temporal_seed_times_are_checked():
    data = timed_graph()
    with pytest.raises(ValueError, match="seed times for edge-level temporal sampling"):
        next(iter(loader.NeighborLoader(data, [2], time_attr="edge_time", batch_size=4, seed=0)))
    with pytest.raises(ValueError, match="conflicting 'input_time'"):
        loader.NeighborLoader(data, [2], input_time=torch.zeros(data.num_nodes), batch_size=4)


# ------------------------------------------------------------------------------- heterographs
def hetero(seed=0) -> HeteroData:
    g = torch.Generator().manual_seed(seed)
    h = HeteroData()
    h["paper"].x, h["author"].x = torch.arange(40), torch.arange(100, 125)
    for (s, rel, d), e in ((("paper", "cites", "paper"), 160), (("author", "writes", "paper"), 90),
                           (("paper", "rev_writes", "author"), 90)):
        ns, nd = h[s].num_nodes, h[d].num_nodes
        h[s, rel, d].edge_index = torch.stack([torch.randint(0, ns - 3, (e,), generator=g),
                                               torch.randint(0, nd - 3, (e,), generator=g)])
        h[s, rel, d].edge_attr = torch.randn(e, 2, generator=g)
    return h


@pytest.mark.parametrize("replace", [False, True])
def test_hetero_batches_follow_pygs_contract_per_edge_type(replace):
    h = hetero()
    fan = {("paper", "cites", "paper"): [2, 1], ("author", "writes", "paper"): [-1, 3],
           ("paper", "rev_writes", "author"): [1, 2]}
    seeds = torch.arange(0, 40, 3)
    loader = NodeLoader(h, node_sampler=NeighborSampler(h, fan, replace=replace, seed=2),
                        input_nodes=("paper", seeds), batch_size=7)
    for i, b in enumerate(loader):
        assert b["paper"].batch_size == min(7, seeds.numel() - 7 * i)
        assert torch.equal(b["paper"].n_id[:b["paper"].batch_size], seeds[7 * i:7 * (i + 1)])
        for nt in h.node_types:
            assert torch.equal(b[nt].x, h[nt].x[b[nt].n_id]) and sum(b[nt].num_sampled_nodes) == b[nt].num_nodes
        for et in h.edge_types:
            s, _, d = et
            row, col = b[et].edge_index
            e_id = b[et].e_id
            assert torch.equal(h[et].edge_index[:, e_id], torch.stack([b[s].n_id[row], b[d].n_id[col]]))
            assert torch.equal(b[et].edge_attr, h[et].edge_attr[e_id])
            in_deg = torch.bincount(h[et].edge_index[1], minlength=h[d].num_nodes)
            check_hops(b[d].n_id, row, col, e_id, b[d].num_sampled_nodes, b[et].num_sampled_edges, fan[et],
                       replace, in_deg, src_ids=b[s].n_id)
        for nt in h.node_types:  # hop k+1's nodes of a type: sources of hop k (any relation) not seen before
            n1 = 0
            for k in range(2):
                n1 += b[nt].num_sampled_nodes[k]
                srcs = set()
                for et in (et for et in h.edge_types if et[0] == nt):
                    e0 = sum(b[et].num_sampled_edges[:k])
                    srcs |= set(b[nt].n_id[b[et].edge_index[0, e0:e0 + b[et].num_sampled_edges[k]]].tolist())
                new = srcs - set(b[nt].n_id[:n1].tolist())
                assert sorted(new) == b[nt].n_id[n1:n1 + b[nt].num_sampled_nodes[k + 1]].tolist()


def test_hetero_list_fanouts_apply_to_every_edge_type():
    h = hetero(1)
    b = next(iter(NeighborLoader(h, [2, 2], input_nodes=("author", torch.arange(5)), batch_size=5,
                                 neighbor_sampler=NeighborSampler(h, [2, 2], seed=0))))
    assert torch.equal(b["author"].n_id[:5], torch.arange(5)) and b["author"].batch_size == 5
    assert b["paper", "rev_writes", "author"].num_sampled_edges[0] > 0


# ------------------------------------------------------------------------------------- links
@pytest.mark.parametrize("neg", ["binary", "triplet"])
def test_link_loader_maps_seed_edges_back(neg):
    data = graph()
    pos = data.edge_index[:, :30]
    loader = LinkNeighborLoader(data, [3, 2], edge_label_index=pos, batch_size=10, neg_sampling=neg,
                                neighbor_sampler=NeighborSampler(data, [3, 2], seed=0))
    for b in loader:
        assert torch.equal(data.edge_index[:, b.e_id], b.n_id[b.edge_index])
        want = pos[:, b.input_id]
        if neg == "binary":
            assert torch.equal(b.n_id[b.edge_label_index[:, :10]], want)
            assert b.edge_label.tolist() == [1.0] * 10 + [0.0] * 10
        else:
            assert torch.equal(b.n_id[b.src_index], want[0]) and torch.equal(b.n_id[b.dst_pos_index], want[1])
            assert b.dst_neg_index.numel() == 10


# --------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(num_neighbors=5), ValueError, "num_neighbors to be a list of ints"),
    (dict(num_neighbors=["a"]), ValueError, r"num_neighbors\[0\]"),
    (dict(num_neighbors=[2.0]), ValueError, r"num_neighbors\[0\]"),
    (dict(num_neighbors=[-2]), ValueError, r"num_neighbors\[0\]"),
    (dict(num_neighbors={("v", "to", "v"): [1]}), ValueError, "homogeneous"),
    (dict(disjoint=1), ValueError, "disjoint to be a bool"),
    (dict(subgraph_type="induced", disjoint=True), ValueError, "'disjoint' sampling not supported"),  # PyG's
    (dict(subgraph_type="sideways"), ValueError, "subgraph_type"),
    (dict(time_attr="t"), ValueError, "time_attr 't' to name one time per node or one per edge"),
    (dict(time_attr="x"), ValueError, r"node times 'x' as a 1-D tensor"),
    (dict(time_attr="t", temporal_strategy="first"), ValueError, "temporal_strategy"),
    (dict(time_attr="edge_attr", weight_attr="edge_attr"), NotImplementedError, "temporal and weighted"),
    (dict(weight_attr="w"), ValueError, r"edge attribute data\.w"),
    (dict(sample_direction="backward"), NotImplementedError, "forward"),
    (dict(replace="yes"), ValueError, "replace to be a bool"),
])
def test_bad_arguments_are_refused_at_construction(kwargs, error, match):
    kwargs = {"num_neighbors": [2], **kwargs}
    with pytest.raises(error, match=match):
        NeighborSampler(graph(), **kwargs)


def test_bad_graphs_and_seeds_are_refused_before_sampling():
    data = graph()
    with pytest.raises(ValueError, match=r"destinations in \[0, 30\)"):
        NeighborSampler(Data(edge_index=data.edge_index, num_nodes=30), [2])
    sampler = NeighborSampler(data, [2], seed=0)
    with pytest.raises(ValueError, match=r"seed nodes in \[0, 60\) \(got values in \[0, 60\]\)"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0, 60])))
    with pytest.raises(ValueError, match="1-D integer tensor"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0.5])))
    with pytest.raises(ValueError, match=r"seed nodes in \[0, 60\)"):
        next(iter(NodeLoader(data, node_sampler=sampler, input_nodes=torch.tensor([70]), batch_size=1)))
    assert sampler.calls == 0
    h = hetero()
    with pytest.raises(ValueError, match="Not all edge types"):
        NeighborSampler(h, {("paper", "likes", "paper"): [1]})
    hs = NeighborSampler(h, [1], seed=0)
    with pytest.raises(ValueError, match="seed node types among"):
        hs.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0]), input_type="venue"))
    with pytest.raises(ValueError, match=r"of type 'author' in \[0, 25\)"):
        hs.sample_from_nodes(NodeSamplerInput(None, torch.tensor([25]), input_type="author"))
    assert hs.calls == 0


# ----------------------------------------------------------------------------------- weighted
def weighted_graph(n=60, e=400) -> Data:
    data = graph(n, e)
    w = torch.rand(e, generator=torch.Generator().manual_seed(1))
    w[::3] = 0  # never sampled
    data.w = w
    return data


@pytest.mark.parametrize("replace", [False, True])
def test_weighted_hops_take_only_positive_edges_as_many_as_the_rule_says(replace):
    data = weighted_graph()
    positive = data.w > 0
    in_pos = torch.bincount(data.edge_index[1][positive], minlength=data.num_nodes)
    loader = NodeLoader(data, node_sampler=NeighborSampler(data, [3, 2], replace=replace, weight_attr="w", seed=4),
                        batch_size=20)
    for b in loader:
        assert bool(positive[b.e_id].all())
        assert torch.equal(data.edge_index[:, b.e_id], b.n_id[b.edge_index])  # real edges of the graph
        n0 = 0
        for k, f in enumerate([3, 2]):  # per hop: min(positive in-edges, fanout), or fanout with replacement
            n1 = n0 + b.num_sampled_nodes[k]
            c = b.edge_index[1][sum(b.num_sampled_edges[:k]):sum(b.num_sampled_edges[:k + 1])]
            got = torch.bincount(c - n0, minlength=n1 - n0)
            p = in_pos[b.n_id[n0:n1]]
            assert torch.equal(got, torch.where(p > 0, f, 0) if replace else p.clamp(max=f))
            n0 = n1


def test_weighted_draws_follow_the_weights():
    """Node 0's in-edges from 1..4 weigh 1, 1, 1, 7: one draw takes the heavy one 70% of the time."""
    data = Data(edge_index=torch.tensor([[1, 2, 3, 4], [0, 0, 0, 0]]), num_nodes=5,
                w=torch.tensor([1.0, 1.0, 1.0, 7.0]))
    sampler = NeighborSampler(data, [1], weight_attr="w", seed=0)
    heavy = sum(int(sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0]))).edge[0]) == 3
                for _ in range(2000))
    assert abs(heavy / 2000 - 0.7) < 0.04, heavy  # 4 standard deviations


@pytest.mark.interpreter
@pytest.mark.parametrize("replace", [False, True])
def test_weighted_device_pipeline_gives_the_cpu_paths_batches(replace):
    data, h = weighted_graph(n=40, e=200), hetero()
    for et in h.edge_types:
        h[et].w = torch.rand(h[et].num_edges, generator=torch.Generator().manual_seed(len(et[1])))
    out = {}
    for name in ("native", "triton"):
        with dgl_accel.use_backend(name):
            out[name] = (sample_all(data, replace=replace, weight_attr="w"),
                         [(b["paper"].n_id, b["author"].n_id, b["cites"].e_id, b["writes"].e_id)
                          for b in NodeLoader(h, node_sampler=NeighborSampler(h, [2, 2], replace=replace,
                                                                              weight_attr="w", seed=1),
                                              input_nodes=("paper", torch.arange(30)), batch_size=10)])
    assert same(out["native"][0], out["triton"][0]) and same(out["native"][1], out["triton"][1])


def test_weighted_sampling_refuses_what_it_cannot_weigh():
    h = hetero()
    h["paper", "cites", "paper"].w = torch.ones(160)
    with pytest.raises(ValueError, match=r"data\[\('author', 'writes', 'paper'\)\]\.w"):
        NeighborSampler(h, [2], weight_attr="w")
    data = graph()
    data.w = -torch.ones(data.num_edges)
    with pytest.raises(ValueError, match="non-negative"):
        NeighborSampler(data, [2], weight_attr="w")
    data.w = torch.ones(data.num_edges - 1)
    with pytest.raises(ValueError, match="one value per edge"):
        NeighborSampler(data, [2], weight_attr="w")
    from torch_geometric.testing import MyFeatureStore, MyGraphStore
    fs, gs = MyFeatureStore(), MyGraphStore()
    gs.put_edge_index(data.edge_index, edge_type=None, layout="coo", size=(60, 60))
    with pytest.raises(NotImplementedError, match="FeatureStore, GraphStore"):
        NeighborSampler((fs, gs), [2], weight_attr="w")


# ------------------------------------------------------------------------------------ devices
def sample_all(data, **kw):
    return [(b.n_id, b.edge_index, b.e_id, b.num_sampled_edges)
            for b in NodeLoader(data, node_sampler=NeighborSampler(data, [3, -1], seed=5, **kw), batch_size=25)]


def same(a, b):
    return all(torch.equal(x.cpu(), y.cpu()) if isinstance(x, torch.Tensor) else x == y
               for p, q in zip(a, b) for x, y in zip(p, q)) and len(a) == len(b)


@pytest.mark.interpreter
@pytest.mark.parametrize("replace", [False, True])
def test_device_pipeline_gives_the_cpu_paths_batches(replace):
    """The Triton path (the device pipeline of a CUDA graph, its kernels interpreted here);
    ``replace`` also samples disjoint subgraphs (one case each), and temporal ones below."""
    data = graph(n=40, e=200)
    with dgl_accel.use_backend("native"):
        cpu = sample_all(data, replace=replace, disjoint=replace)
    dgl_accel.reset_stats()
    with dgl_accel.use_backend("triton"):
        dev = sample_all(data, replace=replace, disjoint=replace)
    assert same(cpu, dev)
    assert dgl_accel.stats()["neighbor_choice"] == {"triton-interpreter": 4}  # 2 batches x 2 hops
    data = timed_graph(2, n=40, e=200)
    temporal = {}
    for backend in ("native", "triton"):
        with dgl_accel.use_backend(backend):
            temporal[backend] = [(b.n_id, b.edge_index, b.e_id, b.batch) for b in NodeLoader(
                data, node_sampler=NeighborSampler(data, [3, -1], time_attr="time", replace=replace, seed=5),
                batch_size=25)]
    assert same(temporal["native"], temporal["triton"])
    assert dgl_accel.stats()["neighbor_choice_temporal"] == {"native-cpu": 4, "triton-interpreter": 4}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_samples_on_the_device_as_the_cpu_does():
    data = graph(n=400, e=4000)
    cpu = sample_all(data)
    cuda = sample_all(data.to("cuda"))
    assert cuda[0][0].is_cuda and cuda[0][1].is_cuda and same(cpu, cuda)


# a fresh process by necessity: about 4 s on 2 cores (torch imported), a quick test still
def test_import_of_the_package_does_not_load_torch_geometric():
    code = ("import sys, dgl_accel.pyg as p; assert 'torch_geometric' not in sys.modules; "
            "assert p.NeighborSampler.__module__ == 'dgl_accel.pyg.sampler'")
    subprocess.run([sys.executable, "-c", code], check=True)
