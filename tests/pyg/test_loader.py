"""``dgl_accel.pyg.NeighborLoader`` / ``LinkNeighborLoader``: PyG 2.8's signatures (a user changes only
the import), the loader's own arguments reach our sampler (PyG builds its sampler from them too),
the batches are our sampler's in PyG's loader and follow PyG's contract, PyG's argument checks and
the sampler's refusals come when the loader is built (disjoint and temporal batches: test_sampler.py;
induced ones: test_sampler_induced.py)."""
import inspect

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.loader as pyg_loader  # noqa: E402
import torch_geometric.transforms as T  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402
from torch_geometric.sampler.base import SubgraphType  # noqa: E402

import dgl_accel.pyg  # noqa: E402
from dgl_accel.pyg.loader import LinkNeighborLoader, NeighborLoader  # noqa: E402
from dgl_accel.pyg.sampler import NeighborSampler  # noqa: E402
from tests.pyg.test_sampler import batches, check_batch, graph, hetero  # noqa: E402

PAIRS = [(NeighborLoader, pyg_loader.NeighborLoader), (LinkNeighborLoader, pyg_loader.LinkNeighborLoader)]


@pytest.mark.parametrize("ours, theirs", PAIRS, ids=["NeighborLoader", "LinkNeighborLoader"])
def test_signature_takes_every_parameter_of_pygs_in_its_order_with_its_defaults(ours, theirs):
    mine, pygs = inspect.signature(ours.__init__).parameters, inspect.signature(theirs.__init__).parameters
    positional = [n for n, p in pygs.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [n for n, p in mine.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == positional
    for name, p in pygs.items():
        assert name in mine, name
        assert mine[name].default == p.default, name
    assert mine["seed"].kind is inspect.Parameter.KEYWORD_ONLY
    assert issubclass(ours, theirs)  # batches, transforms, workers: PyG's loader code
    assert getattr(dgl_accel.pyg, ours.__name__) is ours and ours.__name__ in dir(dgl_accel.pyg)


def test_neighbor_loader_batches_are_our_samplers_in_pygs_loader():
    data = graph()
    seeds = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(1))[:40]
    loader = NeighborLoader(data, [4, 3], input_nodes=seeds, batch_size=16, seed=7)
    assert isinstance(loader.node_sampler, NeighborSampler)
    for i, batch in enumerate(loader):
        check_batch(batch, data, [4, 3], False, seeds[16 * i:16 * (i + 1)])
    fresh = NeighborLoader(data, [4, 3], input_nodes=seeds, batch_size=16, seed=7)
    same = NodeLoader(data, node_sampler=NeighborSampler(data, [4, 3], seed=7), input_nodes=seeds, batch_size=16)
    assert all(torch.equal(x, y) for a, b in zip(batches(fresh), batches(same)) for x, y in zip(a, b))
    torch.manual_seed(5)  # no seed: drawn from torch's generator, so manual_seed reproduces the batches
    first = batches(NeighborLoader(data, [4, 3], batch_size=20))
    torch.manual_seed(5)
    assert all(torch.equal(x, y) for a, b in zip(first, batches(NeighborLoader(data, [4, 3], batch_size=20)))
               for x, y in zip(a, b))


@pytest.mark.parametrize("replace", [False, True])
def test_the_loaders_arguments_reach_the_sampler(replace):
    data = graph()
    data.w = torch.rand(data.num_edges)
    loader = NeighborLoader(data, [3, 2], replace=replace, subgraph_type="bidirectional", weight_attr="w",
                            batch_size=10, seed=0, transform=T.Constant(2.0))
    sampler = loader.node_sampler
    assert sampler.replace is replace and sampler.subgraph_type == SubgraphType.bidirectional
    induced = SubgraphType.induced
    assert NeighborLoader(data, [2], subgraph_type="induced", batch_size=2).node_sampler.subgraph_type == induced
    assert LinkNeighborLoader(data, [2], subgraph_type="induced", batch_size=2).link_sampler.subgraph_type == induced
    assert sampler.weight_attr == "w" and sampler.num_neighbors.values == [3, 2]
    batch = next(iter(loader))
    assert torch.equal(batch.x[:, -1], torch.full((batch.num_nodes,), 2.0))  # the loader's transform ran
    mine = NeighborSampler(data, [1])
    assert NeighborLoader(data, [5, 5], neighbor_sampler=mine, batch_size=4).node_sampler is mine  # as PyG


def test_hetero_batches_with_input_nodes_of_a_type():
    h = hetero(1)
    b = next(iter(NeighborLoader(h, [2, 2], input_nodes=("author", torch.arange(5)), batch_size=5, seed=0)))
    assert torch.equal(b["author"].n_id[:5], torch.arange(5)) and b["author"].batch_size == 5
    for rel in h.edge_types:
        e_id = b[rel].e_id
        src, dst = rel[0], rel[2]
        assert torch.equal(h[rel].edge_index[:, e_id], torch.stack([b[src].n_id[b[rel].edge_index[0]],
                                                                   b[dst].n_id[b[rel].edge_index[1]]]))


@pytest.mark.parametrize("neg", ["binary", "triplet"])
def test_link_neighbor_loader_samples_around_the_seed_edges(neg):
    data = graph()
    pos = data.edge_index[:, :30]
    loader = LinkNeighborLoader(data, [3, 2], edge_label_index=pos, batch_size=10, neg_sampling=neg, seed=0)
    assert isinstance(loader.link_sampler, NeighborSampler)
    for b in loader:
        assert torch.equal(data.edge_index[:, b.e_id], b.n_id[b.edge_index])
        want = pos[:, b.input_id]
        if neg == "binary":
            assert torch.equal(b.n_id[b.edge_label_index[:, :10]], want)
        else:
            assert torch.equal(b.n_id[b.src_index], want[0]) and torch.equal(b.n_id[b.dst_pos_index], want[1])


@pytest.mark.parametrize("make, error, match", [
    (lambda d: NeighborLoader(d, [2], input_time=torch.zeros(d.num_nodes)), ValueError, "conflicting 'input_time'"),
    (lambda d: LinkNeighborLoader(d, [2], edge_label_time=torch.zeros(3)), ValueError, "conflicting 'edge_label_time'"),
    (lambda d: NeighborLoader(d, [2], disjoint=1), ValueError, "disjoint to be a bool"),
    (lambda d: NeighborLoader(d, [2], subgraph_type="induced", disjoint=True), ValueError,
     "'disjoint' sampling not supported for neighbor sampling with `subgraph_type='induced'`"),
    (lambda d: LinkNeighborLoader(d, [2], time_attr="t", edge_label_time=torch.zeros(3)), ValueError,
     "time_attr 't' to name one time per node or one per edge"),
    (lambda d: NeighborLoader(d, 2), ValueError, "num_neighbors to be a list of ints"),
], ids=["input_time", "edge_label_time", "disjoint", "induced-disjoint", "temporal", "fanouts"])
def test_pygs_checks_and_the_samplers_refusals_come_at_construction(make, error, match):
    with pytest.raises(error, match=match):
        make(graph())
