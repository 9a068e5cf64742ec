"""The PyG drop-ins' inputs beyond a plain ``edge_index``: ``torch.sparse`` adjacencies (CSR, COO)
with their values, int32 ids; what goes to PyG's forward and is counted in ``dgl_accel.stats()``
(with PyG's numbers); bad input rejected before any kernel runs with PyG's exception type and a
message that says what was expected and how to fix it; the user's tensors never modified."""
import copy

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.testing import tensors as tst  # noqa: E402
from dgl_accel.testing.tolerances import assert_close  # noqa: E402

pytestmark = pytest.mark.filterwarnings(  # PyG's and torch's notes on the sparse inputs PyG's own modules get
    "ignore:Converting sparse tensor to CSR:UserWarning", "ignore:Sparse CSR tensor support is in beta:UserWarning",
    "ignore:Sparse invariant checks are implicitly disabled:UserWarning")

EI = torch.tensor([[0, 1, 2, 3, 4, 4, 0, 2, 2], [1, 2, 0, 0, 1, 2, 2, 2, 4]])
N = 5


def build(cls, *args, **kwargs):
    torch.manual_seed(0)
    theirs = cls(*args, **kwargs)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = copy.deepcopy(theirs)
    dgl_accel.pyg.swap(ours)
    return theirs, ours


def x_of(rows=N, cols=4, seed=0):
    return tst.randn((rows, cols), torch.float32, seed)


def pyg_stats():
    return {op: paths for op, paths in dgl_accel.stats().items() if op.startswith("pyg.")}


def core_ran() -> bool:
    return any(not op.startswith("pyg.") for op in dgl_accel.stats())


# ---------------------------------------------------------------------------------------------- sparse
SPARSE = {"csr": lambda ei, w: to_torch_csr_tensor(ei, w, size=(N, N)).t().to_sparse_csr(),
          "coo": lambda ei, w: to_torch_coo_tensor(ei.flip(0), w, size=(N, N))}


@pytest.mark.parametrize("layout", sorted(SPARSE))
@pytest.mark.parametrize("conv", ["gcn", "gcn_plain", "sage", "sage_sum", "gin"])
def test_sparse_adjacency_with_values(conv, layout):
    """adj_t (rows = targets) with non-unit values, as PyG's spmm weights them."""
    w = torch.rand(EI.shape[1]) + 0.5
    adj_t = SPARSE[layout](EI, w)
    if conv.startswith("gcn"):
        theirs, ours = build(pyg_nn.GCNConv, 4, 3, normalize=conv == "gcn")
    elif conv.startswith("sage"):
        theirs, ours = build(pyg_nn.SAGEConv, 4, 3, aggr="sum" if conv == "sage_sum" else "mean")
    else:
        theirs, ours = build(pyg_nn.GINConv, torch.nn.Linear(4, 3))
    x0, x1 = x_of().requires_grad_(), x_of().requires_grad_()
    want, got = theirs(x0, adj_t), ours(x1, adj_t)
    assert_close(got, want)
    cot = tst.randn(tuple(want.shape), torch.float32, 1)
    assert_close(torch.autograd.grad((got * cot).sum(), x1)[0], torch.autograd.grad((want * cot).sum(), x0)[0])
    assert not pyg_stats() and core_ran()


def test_int32_ids_give_the_int64_result():
    for cls, args in ((pyg_nn.GCNConv, (4, 3)), (pyg_nn.SAGEConv, (4, 3)), (pyg_nn.GATConv, (4, 3))):
        _, ours = build(cls, *args)
        assert_close(ours(x_of(), EI.int()), ours(x_of(), EI))


# ---------------------------------------------------------------------------------------------- fallbacks
def _hooked():
    theirs, ours = build(pyg_nn.SAGEConv, 4, 3)
    for m in (theirs, ours):
        m.register_propagate_forward_hook(lambda module, inputs, out: out * 2)
    return theirs, ours, (x_of(), EI)


def _explained():
    theirs, ours = build(pyg_nn.GINConv, torch.nn.Linear(4, 3))
    ours = copy.deepcopy(ours)  # compiles our class's propagate template after PyG's (the order that hid explain)
    for m in (theirs, ours):
        m.explain, m._edge_mask = True, torch.full((EI.shape[1],), 0.5)
    return theirs, ours, (x_of(), EI)


FALLBACKS = {  # name -> (theirs, ours, args), the layer and the reason stats() shows
    "gcn_max": (lambda: build(pyg_nn.GCNConv, 4, 3, aggr="max") + ((x_of(), EI),), "GCNConv", "aggr 'max'"),
    "sage_list": (lambda: build(pyg_nn.SAGEConv, 4, 3, aggr=["mean", "max"]) + ((x_of(), EI),), "SAGEConv",
                  "aggr ['mean', 'max']"),
    "sage_static": (lambda: build(pyg_nn.SAGEConv, 4, 3) + ((tst.randn((2, N, 4), torch.float32, 0), EI),),
                    "SAGEConv", "features of shape [2, 5, 4] (not [num_nodes, channels])"),
    "sage_hook": (_hooked, "SAGEConv", "message passing hooks"),
    "gin_explain": (_explained, "GINConv", "explain mode"),
    "gcn_decomposed": (lambda: build(pyg_nn.GCNConv, 4, 4, decomposed_layers=2) + ((x_of(), EI),), "GCNConv",
                       "decomposed_layers > 1"),
    "gcn_weight_dtype": (lambda: build(pyg_nn.GCNConv, 4, 3) + ((x_of(), EI, torch.rand(9, dtype=torch.float64)),),
                         "GCNConv", "edge_weight of another dtype than the features"),
    "gcn_weight_2d": (lambda: build(pyg_nn.GCNConv, 4, 3) + ((x_of(), EI, torch.rand(9, 1)),), "GCNConv",
                      "edge_weight of shape [9, 1]"),
    "gin_flow": (lambda: build(pyg_nn.GINConv, torch.nn.Linear(4, 3), flow="target_to_source") + ((x_of(), EI),),
                 "GINConv", "flow 'target_to_source'"),
    "gin_sparse_max": (lambda: build(pyg_nn.GINConv, torch.nn.Linear(4, 3), aggr="max")
                       + ((x_of(), SPARSE["csr"](EI, None)),), "GINConv", "max over a sparse adjacency"),
    "gat_edge_attr": (lambda: build(pyg_nn.GATConv, 4, 3, edge_dim=2)
                      + ((x_of(), EI, tst.randn((EI.shape[1], 2), torch.float32, 1)),), "GATConv", "edge_attr"),
    "gat_sparse": (lambda: build(pyg_nn.GATConv, 4, 3) + ((x_of(), SPARSE["csr"](EI, None)),), "GATConv",
                   "torch.sparse adjacency"),
    "gat_edge_index_type": (lambda: build(pyg_nn.GATConv, 4, 3)
                            + ((x_of(), torch_geometric.EdgeIndex(EI, sparse_size=(N, N))),), "GATConv",
                            "EdgeIndex input"),
    "gatv2_dropout": (lambda: build(pyg_nn.GATv2Conv, 4, 3, dropout=0.5) + ((x_of(), EI),), "GATv2Conv",
                      "attention dropout while training"),
    "gat_no_targets": (lambda: build(pyg_nn.GATConv, 4, 3) + (((x_of(), None), EI),), "GATConv",
                       "a pair without target features"),
}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_what_goes_to_pyg_is_counted_and_gives_pygs_numbers(case):
    make, layer, reason = FALLBACKS[case]
    theirs, ours, args = make()
    torch.manual_seed(1)
    want = theirs(*args)
    dgl_accel.reset_stats()
    torch.manual_seed(1)
    got = ours(*args)
    assert_close(got, want)
    assert pyg_stats() == {f"pyg.{layer}": {f"fallthrough: {reason}": 1}}
    assert not core_ran()


def test_accelerated_calls_are_counted_by_the_core():
    _, gcn = build(pyg_nn.GCNConv, 4, 3)
    _, gat = build(pyg_nn.GATConv, 4, 3, heads=2)
    x = x_of().requires_grad_()
    (gcn(x, EI).sum() + gat(x, EI).sum()).backward()
    stats = dgl_accel.stats()
    assert stats["u_mul_e_sum"] == {"native-cpu": 1} and stats["u_mul_e_sum_backward"] == {"native-cpu": 1}
    assert stats["gat_attention"] == {"native-cpu": 1} and stats["gat_attention_backward"] == {"native-cpu": 1}
    assert not pyg_stats()


# ---------------------------------------------------------------------------------------------- bad input
BAD = {  # name -> (layer, args, PyG's exception type, words of our message)
    "gcn: edge_index [E, 2]": ("gcn", (x_of(), EI.t().contiguous()), ValueError, ["[2, num_edges]", "Fix"]),
    "gcn: negative id": ("gcn", (x_of(), EI - 1), IndexError, ["negative", "Fix"]),
    "float edge_index": ("sage", (x_of(), EI.float()), ValueError, ["integer type", "edge_index.long()"]),
    "edge_index [E, 2]": ("sage", (x_of(), EI.t().contiguous()), ValueError, ["[2, num_edges]", "Fix"]),
    "edge_index a list": ("gin", (x_of(), EI.tolist()), ValueError, ["integer tensor", "Fix"]),
    "source id too large": ("gat", (x_of(4), EI), IndexError, ["larger than 3", "Fix"]),
    "negative id": ("sage", (x_of(), EI - 1), IndexError, ["negative", "Fix"]),
    "size against features": ("sage", ((x_of(), x_of(3)), EI, (N, 4)), ValueError, ["expected size 4", "Fix"]),
    "size not a pair": ("gin", (x_of(), EI, 5), TypeError, ["'size'", "Fix"]),
    "edge_weight length": ("gcn", (x_of(), EI, torch.ones(3)), ValueError, ["[9]", "Fix"]),
    "edge_weight integer": ("gcn", (x_of(), EI, torch.ones(9, dtype=torch.int64)), ValueError, ["float", "Fix"]),
}
LAYERS = {"gcn": (pyg_nn.GCNConv, 4, 3), "sage": (pyg_nn.SAGEConv, 4, 3), "gat": (pyg_nn.GATConv, 4, 3),
          "gin": (pyg_nn.GINConv, torch.nn.Linear(4, 3))}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_gets_pygs_exception_type_and_a_fix(case):
    layer, args, error, words = BAD[case]
    theirs, ours = build(*LAYERS[layer])
    if not case.startswith(("gcn:", "edge_weight")):  # PyG's type (GCNConv's gcn_norm raises RuntimeErrors)
        with pytest.raises(error):
            theirs(*args)
    with pytest.raises(error) as info:
        ours(*args)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert not core_ran()  # nothing ran


def test_features_and_graph_on_different_devices():
    _, ours = build(pyg_nn.SAGEConv, 4, 3)
    with pytest.raises(ValueError, match="one device"):
        ours(x_of().to("meta"), EI)


def test_sparse_adjacency_of_the_wrong_shape():
    _, ours = build(pyg_nn.SAGEConv, 4, 3)
    with pytest.raises(ValueError, match=r"\[5, 6\]"):
        ours((x_of(6), x_of()), SPARSE["csr"](EI, None))


@pytest.mark.parametrize("conv", sorted(LAYERS) + ["gatv2"])
def test_the_users_tensors_are_not_modified(conv):
    make = LAYERS.get(conv, (pyg_nn.GATv2Conv, 4, 3))
    _, ours = build(*make)
    ei, x = EI.clone(), x_of().requires_grad_()
    ew = torch.rand(EI.shape[1], requires_grad=True) if conv == "gcn" else None
    saved = [(t, t.detach().clone(), t._version) for t in (ei, x, ew) if t is not None]
    out = ours(x, ei, ew) if ew is not None else ours(x, ei)
    out.square().sum().backward()
    for t, before, version in saved:
        assert torch.equal(t.detach(), before) and t._version == version
