"""The core's ops under ``torch.autocast`` (``dgl_accel.core.autocast``): the dense product and the fused
attention ops run in the autocast dtype, as ``nn.Linear`` and ``scaled_dot_product_attention`` do, on
both paths; each gradient comes back in its input's dtype; fp64 calls and calls outside autocast keep
their dtypes; aggregations run in the dtype they are given."""
import pytest
import torch

from dgl_accel.core.aggregation.function import aggregate
from dgl_accel.core.aggregation.views import TensorGraph
from dgl_accel.core.attention.dot import dot_attention
from dgl_accel.core.attention.gat import gat_attention, gat_layer
from dgl_accel.core.attention.gatv2 import gatv2_attention
from dgl_accel.core.autocast import autocast_dtype
from dgl_accel.core.dense import dense

BF16 = torch.bfloat16


def _graph():
    gen = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, 12, (40,), generator=gen), torch.randint(0, 12, (40,), generator=gen)
    return TensorGraph(src, dst, num_nodes=12)


def _leaves(*shapes, dtype=torch.float32):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(s, generator=gen, dtype=dtype).requires_grad_() for s in shapes]


OPS = {  # name -> (leaf shapes, op on (graph, *leaves))
    "dense": ([(12, 6), (6, 4), (4,)], lambda g, x, w, b: dense(x, w, b, True)),
    "gat_attention": ([(12, 2, 3), (12, 2), (12, 2)], lambda g, f, el, er: gat_attention(g, f, el, er)),
    "gat_attention-attn": ([(12, 2, 3), (1, 2, 3), (1, 2, 3)], lambda g, f, al, ar: gat_attention(g, f, attn=(al, ar))),
    "gat_layer": ([(12, 5), (6, 5), (1, 2, 3), (1, 2, 3), (6,)], lambda g, *t: gat_layer(g, *t)),
    "gatv2_attention": ([(12, 2, 3), (12, 2, 3), (2, 3)], lambda g, *t: gatv2_attention(g, *t)),
    "dot_attention": ([(12, 2, 3), (12, 2, 3), (12, 2, 4)], lambda g, *t: dot_attention(g, *t)),
}


@pytest.mark.parametrize("name", list(OPS))
def test_op_runs_in_autocast_dtype(name, path):
    shapes, op = OPS[name]
    g, leaves = _graph(), _leaves(*shapes)
    with torch.autocast("cpu", dtype=BF16):
        out = op(g, *leaves)
    assert out.dtype == BF16, f"{name} on {path}: output {out.dtype}"
    out.float().sum().backward()
    for t in leaves:
        assert t.grad is not None and t.grad.dtype == torch.float32 and torch.isfinite(t.grad).all()
    plain = op(g, *(t.detach().to(BF16) for t in leaves))  # the op called on bf16 inputs directly
    assert torch.equal(out.detach(), plain), f"{name}: autocast's cast is not the op in bf16"


@pytest.mark.parametrize("name", list(OPS))
def test_fp64_and_no_autocast_keep_dtypes(name):
    shapes, op = OPS[name]
    g = _graph()
    with torch.autocast("cpu", dtype=BF16):
        assert op(g, *_leaves(*shapes, dtype=torch.float64)).dtype == torch.float64
    assert op(g, *_leaves(*shapes)).dtype == torch.float32


def test_aggregation_keeps_its_input_dtype():
    g, (x,) = _graph(), _leaves((12, 4))
    with torch.autocast("cpu", dtype=BF16):
        assert aggregate(g, "copy_u", "sum", x).dtype == torch.float32
        assert aggregate(g, "copy_u", "sum", x.to(BF16)).dtype == BF16


def test_autocast_dtype_reads_the_device():
    assert autocast_dtype("cpu") is None
    with torch.autocast("cpu", dtype=BF16):
        assert autocast_dtype("cpu") is BF16 and autocast_dtype("cuda") is None
    with torch.autocast("cpu", dtype=BF16, enabled=False):
        assert autocast_dtype("cpu") is None
