"""``dgl_accel.pyg.swap`` / ``unswap``: reversible class swaps inside any module (Sequential, PyG's
``BasicGNN`` models, ``HeteroConv``), state_dict keys and values unchanged both ways, the report of
what was swapped and what was left alone and why; a training step of a swapped PyG model equals
PyG's; the drop-ins built directly have PyG's parameters; ``import dgl_accel.pyg`` does not load
torch_geometric until a name is used."""
import copy
import subprocess
import sys

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from torch_geometric.nn import models  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.pyg.swapping import SWAPS  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402

EI = torch.tensor([[0, 1, 2, 3, 4, 4, 0, 2], [1, 2, 0, 0, 1, 2, 2, 2]])


class Own(pyg_nn.SAGEConv):
    """A user's subclass: swap must keep it (its forward may be the user's)."""


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gcn = pyg_nn.GCNConv(4, 8)
        self.sage = pyg_nn.SAGEConv(8, 8, aggr="max")
        self.gin = pyg_nn.GINConv(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), train_eps=True)
        self.gat = pyg_nn.GATConv(8, 4, heads=2)
        self.gatv2 = pyg_nn.GATv2Conv(8, 8, heads=2, concat=False, share_weights=True)
        self.graph = pyg_nn.GraphConv(8, 8, aggr="mean")
        self.cheb = pyg_nn.ChebConv(8, 8, K=2)  # no drop-in
        self.own = Own(8, 3)

    def forward(self, x, ei):
        for conv in (self.gcn, self.sage, self.gin, self.gat, self.gatv2, self.graph):
            x = conv(x, ei).relu()
        return self.own(self.cheb(x, ei), ei)


def test_swap_and_unswap_round_trip():
    torch.manual_seed(0)
    model = Model()
    x = tst.randn((5, 4), torch.float32, 0)
    want, state = model(x, EI), copy.deepcopy(model.state_dict())
    report = dgl_accel.pyg.swap(model)
    assert [name for name, _, _ in report.swapped] == ["gcn", "sage", "gin", "gat", "gatv2", "graph"]
    assert report.kept == [("cheb", "ChebConv: no dgl-accel drop-in; it runs PyG's own forward"),
                           ("own", f"{__name__}.Own subclasses a torch_geometric.nn layer "
                                   f"(it may override forward itself)")]
    assert "swapped 6 module(s)" in str(report) and "kept cheb" in str(report)
    assert all(type(getattr(model, n)) is SWAPS[type(getattr(Model(), n))] for n, _, _ in report.swapped)
    assert_close(model(x, EI), want)
    assert model.state_dict().keys() == state.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert dgl_accel.pyg.swap(model).swapped == []  # idempotent
    back = dgl_accel.pyg.unswap(model)
    assert [row[2] for row in back.swapped] == [row[1] for row in report.swapped]  # each layer its PyG class
    assert type(model.gcn) is pyg_nn.GCNConv and back.kept == []
    assert_close(model(x, EI), want)


def test_state_dicts_load_both_ways():
    torch.manual_seed(0)
    theirs, other = Model(), Model()
    dgl_accel.pyg.swap(other)
    other.load_state_dict(theirs.state_dict())  # PyG's weights into the swapped model
    x = tst.randn((5, 4), torch.float32, 1)
    assert_close(other(x, EI), theirs(x, EI))
    fresh = Model()
    fresh.load_state_dict(other.state_dict())  # and back
    assert_close(fresh(x, EI), theirs(x, EI))


@pytest.mark.parametrize("make", [
    lambda: models.GCN(4, 16, 2, 3), lambda: models.GraphSAGE(4, 16, 2, 3), lambda: models.GIN(4, 16, 2, 3),
    lambda: models.GAT(4, 16, 2, 3, heads=2), lambda: models.GAT(4, 16, 2, 3, v2=True, heads=2)],
    ids=["GCN", "GraphSAGE", "GIN", "GAT", "GATv2"])
def test_a_training_step_of_pygs_models(make):
    """PyG's BasicGNN models, swapped: the loss and the parameters after an SGD step equal PyG's (Adam's first
    step is lr * sign(grad): it would turn rounding in a near-zero gradient into lr)."""
    torch.manual_seed(0)
    theirs = make()
    ours = copy.deepcopy(theirs)
    assert len(dgl_accel.pyg.swap(ours).swapped) == 2
    x, y = tst.randn((5, 4), torch.float32, 2), torch.tensor([0, 1, 2, 0, 1])
    for m in (theirs, ours):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        loss = torch.nn.functional.cross_entropy(m(x, EI), y)
        loss.backward()
        opt.step()
        m.loss = loss.detach()
    assert_close(ours.loss, theirs.loss)
    for (k, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert_close(a, b, msg=k)
    assert not [op for op in dgl_accel.stats() if op.startswith("pyg.")]


def test_inside_heteroconv():
    conv = pyg_nn.HeteroConv({("a", "to", "b"): pyg_nn.SAGEConv((4, 4), 3), ("b", "to", "a"): pyg_nn.GATConv((4, 4), 3,
                                                                                                       add_self_loops=False)})
    theirs = copy.deepcopy(conv)
    report = dgl_accel.pyg.swap(conv)
    assert len(report.swapped) == 2
    x = {"a": tst.randn((5, 4), torch.float32, 3), "b": tst.randn((3, 4), torch.float32, 4)}
    ei = {("a", "to", "b"): torch.tensor([[0, 1, 4], [0, 2, 2]]), ("b", "to", "a"): torch.tensor([[0, 2], [4, 1]])}
    got, want = conv(x, ei), theirs(x, ei)
    for k in want:
        assert_close(got[k], want[k], msg=k)


def test_built_directly_like_pygs():
    for ours_cls, theirs_cls in ((dgl_accel.pyg.GCNConv, pyg_nn.GCNConv), (dgl_accel.pyg.GATv2Conv, pyg_nn.GATv2Conv)):
        torch.manual_seed(0)
        theirs = theirs_cls(4, 3)
        torch.manual_seed(0)
        ours = ours_cls(4, 3)
        assert isinstance(ours, theirs_cls) and repr(ours) == repr(theirs)
        assert ours.state_dict().keys() == theirs.state_dict().keys()
        x = tst.randn((5, 4), torch.float32, 5)
        assert_close(ours(x, EI), theirs(x, EI))


def test_bad_model():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        dgl_accel.pyg.swap("model")


# a fresh process by necessity: about 4 s on 2 cores (torch and PyG imported), a quick test still
def test_importing_the_package_does_not_load_torch_geometric():
    code = ("import sys, dgl_accel, dgl_accel.pyg\n"
            "assert 'torch_geometric' not in sys.modules\n"
            "assert callable(dgl_accel.pyg.swap) and callable(dgl_accel.pyg.unswap)\n"
            "assert 'torch_geometric' in sys.modules\n"
            "import dgl_accel.pyg.swapping\n"
            "assert callable(dgl_accel.pyg.swap)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


FALLBACK_FIRST = """
import torch
import dgl_accel
from dgl_accel.pyg import nn as ours
x, ei = torch.randn(5, 4), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])
edge_attr = torch.randn(5, 3)
layers = {"GCNConv": (ours.GCNConv(4, 2), (x, ei), {"decomposed_layers": 2}),
          "SAGEConv": (ours.SAGEConv(4, 2, aggr="std"), (x, ei), {}),
          "GINConv": (ours.GINConv(torch.nn.Linear(4, 2), aggr="std"), (x, ei), {}),
          "GATConv": (ours.GATConv(4, 2, edge_dim=3), (x, ei, edge_attr), {}),
          "GATv2Conv": (ours.GATv2Conv(4, 2, edge_dim=3), (x, ei, edge_attr), {})}
for name, (layer, args, attrs) in layers.items():
    for key, value in attrs.items():
        setattr(layer, key, value)
    assert layer(*args).shape == (5, 2), name
stats = dgl_accel.stats()
assert all(any(k.startswith("fallthrough") for k in stats[f"pyg.{n}"]) for n in layers), stats
fresh = ours.SAGEConv(4, 2)  # scripted before any PyG SAGEConv exists: PyG's templates get built
assert torch.allclose(torch.jit.script(fresh)(x, ei), fresh(x, ei), atol=1e-6)
"""


# a fresh process by necessity: about 5 s on 2 cores (torch and PyG imported), a quick test still
def test_fallbacks_run_where_no_pyg_layer_was_built_first():
    # PyG builds a layer's propagate (GAT: edge_updater) template from its class source, cached by
    # class name, which ours share: in a fresh process where only our classes were ever built, each
    # fallback to PyG's own forward must still find PyG's call arguments (inputs.call_types)
    subprocess.run([sys.executable, "-c", FALLBACK_FIRST], check=True, timeout=120)


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv"])  # (PyG's own GATConv does not script)
def test_torch_jit_script_compiles_pyg_forward_on_shared_parameters(name):
    x, ei = torch.randn(5, 4), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])
    layer = getattr(dgl_accel.pyg.nn, name)(4, 2)
    scripted = torch.jit.script(layer)
    assert_close(scripted(x, ei), layer(x, ei), torch.float32)
    with torch.no_grad():
        next(layer.parameters()).add_(1.0)  # the scripted twin shares the layer's parameters
    assert_close(scripted(x, ei), layer(x, ei), torch.float32)
    assert type(layer) is getattr(dgl_accel.pyg.nn, name)  # the layer itself keeps our class
