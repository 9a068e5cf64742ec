"""``dgl_accel.pyg.graph``: a graph's core views built once and reused by every layer and call with
the same ``edge_index``; a new build when the tensor changes in place (its ``_version``), never a
stale answer; entries bounded (LRU) and dropped with their tensor; inference tensors converted on
every call; caches filled in inference mode serve training afterwards."""
import copy
import gc

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402

import dgl_accel.pyg  # noqa: E402
from dgl_accel.pyg import graph  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402


def model(cls=pyg_nn.SAGEConv, layers=3):
    torch.manual_seed(0)
    theirs = torch.nn.ModuleList([cls(4, 4) for _ in range(layers)])
    ours = copy.deepcopy(theirs)
    dgl_accel.pyg.swap(ours)
    return theirs, ours


def run(layers, x, ei):
    for conv in layers:
        x = conv(x, ei).tanh()
    return x


@pytest.fixture
def cache(monkeypatch):
    """A fresh cache for the test (the module's CACHE is replaced)."""
    fresh = graph.EdgeIndexCache(capacity=graph.CAPACITY)
    monkeypatch.setattr(graph, "CACHE", fresh)
    return fresh


def test_every_layer_and_call_reuses_one_build(cache):
    theirs, ours = model()
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    x = tst.randn((4, 4), torch.float32, 0)
    for _ in range(3):
        assert_close(run(ours, x, ei), run(theirs, x, ei))
    assert cache.builds == 1 and len(cache) == 1
    views = graph.edges_of(ei).views(4, 4, homogeneous=True)
    assert "in_csr" in views._cache  # the core's CSR view lives on the cached graph


def test_gcn_normalisation_is_derived_once_per_graph(cache):
    theirs, ours = model(pyg_nn.GCNConv)
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    x = tst.randn((4, 4), torch.float32, 0)
    for _ in range(2):
        assert_close(run(ours, x, ei), run(theirs, x, ei))
    assert cache.builds == 2  # the graph and its gcn_norm graph (self-loops), once each


def test_an_in_place_change_of_edge_index_is_seen(cache):
    theirs, ours = model()
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    x = tst.randn((4, 4), torch.float32, 0)
    before = run(ours, x, ei)
    ei[1, 0] = 2  # same storage, new version
    ei[0, 4] = 1
    after = run(ours, x, ei)
    assert_close(after, run(theirs, x, ei))
    assert not torch.allclose(before, after)
    assert cache.builds == 2


def test_a_view_of_the_same_storage_hits_and_a_copy_builds(cache):
    ours = model(layers=1)[1][0]
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    x = tst.randn((3, 4), torch.float32, 0)
    ours(x, ei)
    ours(x, ei.view(2, 3))  # another tensor object over the same storage: the same key
    assert cache.builds == 1
    ours(x, ei.clone())
    assert cache.builds == 2


def test_entries_are_bounded_and_dropped_with_their_tensor():
    cache = graph.EdgeIndexCache(capacity=3)
    kept = [torch.tensor([[0, 1], [1, k % 2]]) for k in range(5)]
    for ei in kept:
        cache.get(ei)
    assert len(cache) == 3 and cache.builds == 5  # LRU: the two oldest are gone
    cache.get(kept[-1])
    assert cache.builds == 5  # the newest is still there
    del kept[-1], ei  # (the loop variable held it too)
    gc.collect()
    assert len(cache) == 2  # its tensor was collected: the entry went with it


def test_cached_views_do_not_keep_the_graph_alive(cache):
    ours = model(layers=1)[1][0]
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    ours(tst.randn((3, 4), torch.float32, 0), ei)
    assert len(cache) == 1
    del ei
    gc.collect()
    assert len(cache) == 0


def test_inference_mode(cache):
    theirs, ours = model(pyg_nn.GCNConv, layers=2)
    x = tst.randn((4, 4), torch.float32, 0)
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    with torch.inference_mode():
        assert_close(run(ours, x, ei), run(theirs, x, ei))  # a normal tensor: cached, as normal tensors
        frozen = ei.clone()  # an inference tensor: no version counter, converted on every call
        builds = cache.builds
        run(ours, x, frozen)
        run(ours, x, frozen)
        assert cache.builds == builds + 8  # per layer and call: the graph and its gcn_norm graph
    xg = x.clone().requires_grad_()
    run(ours, xg, ei).sum().backward()  # the caches filled in inference mode serve autograd
    assert xg.grad is not None


def test_a_new_graph_reads_its_id_range_once_not_per_view(cache):
    """The id range read when a graph is converted serves every view built on it: building the core
    graph reads nothing more from the device (each read is a sync on a GPU)."""
    from dgl_accel.testing.host_reads import HostReads
    ei = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
    with HostReads() as reads:
        edges = graph.edges_of(ei)
    assert reads.events == ["tolist"]
    with HostReads() as reads:
        views = edges.views(4, 4, homogeneous=True)
        edges.views(4, 5, homogeneous=False)
    assert reads.events == [] and (views.num_src, views.num_dst) == (4, 4)


def test_the_core_graph_still_refuses_ids_outside_a_known_range():
    from dgl_accel.core.aggregation.views import TensorGraph
    src, dst = torch.tensor([0, 5]), torch.tensor([1, 2])
    with pytest.raises(ValueError, match="source ids in \\[0, 4\\).*up to 5"):
        TensorGraph(src, dst, num_nodes=4, id_range=(0, 5, 2))
