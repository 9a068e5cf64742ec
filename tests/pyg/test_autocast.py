"""The PyG drop-ins under CPU bf16 autocast (issue 45): each swapped conv against PyG's under the same
``torch.autocast("cpu", dtype=torch.bfloat16)``, called first under autocast and after an fp32 step,
forward and backward (``dgl_accel.testing.autocast``: at most twice PyG's bf16 error against fp64, in the
output, the input gradient and every parameter gradient; gradients in their leaves' dtypes); on the
default CPU path and, where numba is there, with the compiled loops forced on.  Homogeneous graphs, and
a bipartite pair for the attention convs (PyG's projections, then the core's attention)."""

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.nn as pyg_nn  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.pyg  # noqa: E402
from dgl_accel.core.jit import runtime  # noqa: E402
from dgl_accel.testing.autocast import assert_autocast_matches  # noqa: E402
from dgl_accel.testing.cpu_loops import forced_jit  # noqa: E402
from tests.pyg.test_convs import swapped, uniform  # noqa: E402

IN, N = 24, 60
CONVS = {
    "GCNConv": lambda: pyg_nn.GCNConv(IN, 8),
    "SAGEConv": lambda: pyg_nn.SAGEConv(IN, 8),
    "GINConv": lambda: pyg_nn.GINConv(torch.nn.Linear(IN, 8), train_eps=True),
    "GATConv": lambda: pyg_nn.GATConv(IN, 4, heads=3),
    "GATConv-pair": lambda: pyg_nn.GATConv((IN, IN), 4, heads=3, add_self_loops=False),
    "GATv2Conv": lambda: pyg_nn.GATv2Conv(IN, 4, heads=3),
}
JIT = [False] + ([True] if runtime.enabled() else [])


@pytest.mark.parametrize("jit", JIT, ids=["default-path", "compiled-loops"][: len(JIT)])
@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "after-fp32"])
@pytest.mark.parametrize("name", list(CONVS))
def test_conv_under_autocast(name, warm, jit):
    torch.manual_seed(0)
    theirs = CONVS[name]()
    ours = swapped(uniform(theirs))
    gen = torch.Generator().manual_seed(1)
    edge_index = torch.randint(0, N, (2, 400), generator=gen)
    x = torch.randn(N, IN, generator=gen)
    if name.endswith("-pair"):
        x = {"src": x, "dst": torch.randn(N // 2, IN, generator=gen)}
        edge_index = edge_index[:, edge_index[1] < N // 2]

        def call(m, h):
            return m((h["src"], h["dst"]), edge_index)
    else:
        def call(m, h):
            return m(h, edge_index)
    with forced_jit(jit):
        dgl_accel.reset_stats()
        assert_autocast_matches(theirs, ours, call, x, warm, where=name)
        stats = dgl_accel.stats()
    assert stats and not any(label.startswith("fallthrough") for labels in stats.values() for label in labels), stats
