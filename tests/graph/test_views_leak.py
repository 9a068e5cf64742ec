"""Training through our ops must not keep graphs alive.  Autograd holds the op's graph views until
backward; a strong graph reference there closes a cycle through the C++ autograd graph (graph ->
frames -> output -> grad_fn -> ctx -> views -> graph) that Python's collector cannot break, and
DGL makes a new graph object every layer call, so every training step leaked one with its
features (found training shaDow-GNN: 5 GB in minutes).  ``DGLGraphViews`` holds the graph weakly."""
import gc

import dgl
import dgl.function as fn
import pytest
import torch

import dgl_accel
from dgl_accel.graph import structure


def _graphs_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, dgl.DGLGraph))


def _update_all(g, h):
    with g.local_scope():
        g.ndata["h"] = h
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "a"))
        return g.ndata["a"]


MODULES = {
    "update_all copy_u sum": lambda: None,
    "GraphConv": lambda: dgl_accel.nn.GraphConv(8, 8),
    "GATConv": lambda: dgl_accel.nn.GATConv(8, 4, num_heads=2, attn_drop=0.3),
    "GATv2Conv": lambda: dgl_accel.nn.GATv2Conv(8, 4, num_heads=2),
    "DotGatConv": lambda: dgl_accel.nn.DotGatConv(8, 4, num_heads=2),
    "SAGEConv pool": lambda: dgl.nn.SAGEConv(8, 8, "pool"),
    "SAGEConv (ours)": lambda: dgl_accel.nn.SAGEConv(8, 8, "mean"),
    "EdgeConv": lambda: dgl.nn.EdgeConv(8, 8),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_training_steps_leave_no_graph_behind(name):
    g = dgl.add_self_loop(dgl.rand_graph(60, 300))
    module = MODULES[name]()
    h = torch.randn(60, 8, requires_grad=True)

    def step():
        with dgl_accel.enabled():
            out = _update_all(g, h) if module is None else module(g, h)
        out.pow(2).sum().backward()

    step()  # warm-up: the graph's own caches
    before = _graphs_alive()
    for _ in range(5):
        step()
    assert _graphs_alive() == before, f"{name}: graph objects kept alive by the steps"
    assert structure.cache_info()["graphs"] <= before
