"""The head-wise aggregation's kernel (``kernels/headwise.py``: DGL's ``u_mul_e`` with broadcast edge
weights, [E, H, 1] on [N, H, D], and ``copy_e``; sum and mean) on the report's device against the
core's pure-torch reference (``headwise_reference``: torch broadcasting and autograd) under the
FlashAttention rule, output and gradients through ``torch.autograd.grad`` (u_mul_e's feature gradient
is the kernel again on the out-CSR, its weight gradient the SDDMM dot): fp32/fp16/bf16/fp64 x
int32/int64 ids x copy_e and u_mul_e x both feature tiles, sum and mean in turn."""
from __future__ import annotations

import torch

from ..core.aggregation.views import TensorGraph
from ..core.headwise.function import aggregate_headwise
from ..core.headwise.paths import headwise_reference
from ..testing.tolerances import assert_matches_reference
from .correctness_attention import grads_of, tiny_block
from .graphs import Graph

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# (heads, head length): H * D = 8 -> the (32, 16) tile, 40 -> (8, 64) (headwise.feature_tile, as extrema's)
SHAPES = ((2, 4), (4, 10))


def _check(views, src, dst, op, reduce, ufeat, efeat, gout, device, case) -> None:
    inputs = [t for t in (ufeat, efeat) if t is not None]

    def ours(*t):
        return aggregate_headwise(views, op, reduce, *((None,) if op == "copy_e" else ()), *t)

    def ref(*t):
        return headwise_reference(src, dst, views.num_dst, op, reduce, *((None,) if op == "copy_e" else ()), *t)

    got = grads_of(ours, [t.to(device) for t in inputs], gout.to(device))
    got = tuple(t.cpu() for t in got)
    assert_matches_reference(got, lambda *t: grads_of(ref, t[:-1], t[-1]), *inputs, gout, msg=f"headwise {case}")


def run(checks, g: Graph, device, tiny: bool) -> None:
    gen = torch.Generator().manual_seed(17)
    src, dst, num_dst, name = tiny_block(g, tiny)
    step = 0
    for dtype in DTYPES:
        for idtype in (torch.int32, torch.int64):
            views = TensorGraph(src.to(device=device, dtype=idtype), dst.to(device=device, dtype=idtype),
                                num_src=g.num_nodes, num_dst=num_dst)
            src_ids, dst_ids = (t.long().cpu() for t in views.edges_by_id())
            for op in ("copy_e", "u_mul_e"):
                for heads, dim in SHAPES:
                    step += 1
                    reduce = "sum" if step % 2 else "mean"
                    if op == "copy_e":
                        ufeat, efeat = None, torch.randn(views.num_edges, heads * dim, generator=gen).to(dtype)
                        gout = torch.randn(num_dst, heads * dim, generator=gen).to(dtype)
                    else:  # weights away from 0, as the u_div_e callers invert them
                        ufeat = torch.randn(g.num_nodes, heads, dim, generator=gen).to(dtype)
                        efeat = torch.rand(views.num_edges, heads, 1, generator=gen).add_(0.5).to(dtype)
                        gout = torch.randn(num_dst, heads, dim, generator=gen).to(dtype)
                    case = f"{name} {str(idtype)[6:]} {str(dtype)[6:]} {op} {reduce} H={heads} D={dim}"
                    args = (views, src_ids, dst_ids, op, reduce, ufeat, efeat, gout, device, case)
                    checks.run("headwise", case, lambda args=args: _check(*args))
