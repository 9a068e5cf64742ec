"""The attention kernels (``kernels/attention.py``) on the report's device against the core's
pure-torch references (``core/attention/reference.py``) under the FlashAttention rule
(``assert_matches_reference``: fp64 reference on CPU, plain torch in the case's dtype).  Edge softmax
forward and backward (``_edge_softmax_fwd_kernel`` / ``_edge_softmax_bwd_kernel``) and the fused GAT
forward and backward (``_gat_fwd_kernel``, ``_gat_bwd_dst_kernel``, ``_gat_bwd_src_kernel``):
fp32/fp16/bf16/fp64 x int32/int64 ids x every tile (softmax: one head and several, GAT: both feature
tiles), gradients through ``torch.autograd.grad`` so the backward kernels launch."""
from __future__ import annotations

import torch

from ..core.aggregation.views import TensorGraph
from ..core.attention.edge_softmax import edge_softmax
from ..core.attention.gat import gat_attention
from ..core.attention.reference import ref_edge_softmax, ref_gat
from ..testing.tolerances import assert_matches_reference
from .correctness_extrema import on_cpu
from .graphs import Graph

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
SLOPE = 0.2
# heads: 1 -> softmax tile (64, 1), more -> (32, 8) (softmax_tile); 10 > 8: two head blocks
SOFTMAX_HEADS = (1, 3)
SOFTMAX_HEADS_FULL = (1, 3, 10)
# (heads, head dim): dim <= 16 -> BLOCK_D 16, else 64 (gat_feature_tile); 70 > 64: two feature blocks
GAT_SHAPES = ((2, 4), (1, 24))
GAT_SHAPES_FULL = ((2, 4), (1, 24), (3, 70))


def _grads(fn, inputs, gout):
    """(output, grads of every input) of ``fn(*inputs)`` for the upstream gradient ``gout``."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    with torch.enable_grad():
        out = fn(*leaves)
        grads = torch.autograd.grad(out, leaves, gout)
    return (out.detach(), *grads)


def _check_softmax(views, rows, score, gout, device, case) -> None:
    got = _grads(lambda s: edge_softmax(views.csr("in"), s), [score.to(device)], gout.to(device))
    got = tuple(t.cpu() for t in got)
    assert_matches_reference(got, lambda s, g: _grads(lambda x: ref_edge_softmax(rows, x), [s], g),
                             score, gout, msg=f"edge_softmax {case}")


def _check_gat(views, in_csr, feat, el, er, gout, device, case) -> None:
    on_device = [t.to(device) for t in (feat, el, er)]
    got = _grads(lambda f, a, b: gat_attention(views, f, a, b, SLOPE), on_device, gout.to(device))
    got = tuple(t.cpu() for t in got)
    assert_matches_reference(got, lambda f, a, b, g: _grads(lambda *u: ref_gat(in_csr, *u, SLOPE), [f, a, b], g),
                             feat, el, er, gout, msg=f"gat {case}")


def run(checks, g: Graph, device, tiny: bool) -> None:
    gen = torch.Generator().manual_seed(11)
    src, dst, num_dst, name = g.src, g.dst, g.num_nodes, g.name
    if tiny:  # the interpreter pays per program: the in-edges of 8 destinations, as a block
        keep = dst < 8
        src, dst, num_dst, name = src[keep], dst[keep], min(8, num_dst), f"{g.name} (8 dst)"
    num_src = g.num_nodes
    for dtype in DTYPES:
        for idtype in (torch.int32, torch.int64):
            views = TensorGraph(src.to(device=device, dtype=idtype), dst.to(device=device, dtype=idtype),
                                num_src=num_src, num_dst=num_dst)
            rows = on_cpu(views.csr("in"))
            for heads in SOFTMAX_HEADS if tiny else SOFTMAX_HEADS_FULL:
                score = torch.randn(views.num_edges, heads, generator=gen).mul_(2).to(dtype)
                gout = torch.randn(views.num_edges, heads, generator=gen).to(dtype)
                case = f"{name} {str(idtype)[6:]} {str(dtype)[6:]} H={heads}"
                args = (views, rows, score, gout, device, case)
                checks.run("edge_softmax", case, lambda args=args: _check_softmax(*args))
            for heads, dim in GAT_SHAPES if tiny else GAT_SHAPES_FULL:
                feat = torch.randn(num_src, heads, dim, generator=gen).to(dtype)
                el = torch.randn(num_src, heads, generator=gen).to(dtype)
                er = torch.randn(num_dst, heads, generator=gen).to(dtype)
                gout = torch.randn(num_dst, heads, dim, generator=gen).to(dtype)
                case = f"{name} {str(idtype)[6:]} {str(dtype)[6:]} H={heads} D={dim}"
                args = (views, rows, feat, el, er, gout, device, case)
                checks.run("gat", case, lambda args=args: _check_gat(*args))
