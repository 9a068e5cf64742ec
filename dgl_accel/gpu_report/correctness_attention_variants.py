"""The fused dot-product attention (``kernels/dot.py``, ``dgl.nn.DotGatConv``'s op) and
GATv2 attention (``kernels/gatv2.py``) on the report's device against the cores' unfused
references (``ref_dot_attention``, ``ref_gatv2_attention``) under the FlashAttention rule.  Every case
asks for the attention too (``return_attention=True``: the ``*_attn_kernel``) and takes gradients of
both outputs through ``torch.autograd.grad`` (the ``*_bwd_dst_kernel`` and ``*_bwd_src_kernel``, with
the attention's gradient term on): fp32/fp16/bf16/fp64 x int32/int64 ids x both feature tiles of the
per-head kernels and every tile shape of the all-heads ones (``kernels/attention_{dot,gatv2}_heads.py``)."""
from __future__ import annotations

import math

import torch

from ..core.aggregation.views import TensorGraph
from ..core.attention.dot import dot_attention, ref_dot_attention
from ..core.attention.gatv2 import gatv2_attention, ref_gatv2_attention
from ..core.launch import kernel_module
from ..testing.tolerances import assert_matches_reference
from .correctness_attention import DTYPES, SLOPE, grads_of, tiny_block, tiny_heads
from .correctness_extrema import on_cpu
from .graphs import Graph

# (heads, key dim, value dim): one head, max(dims) <= 16 -> BLOCK_D 16, else 64
# (dot.feature_tile); 2-8 heads of few features: the all-heads kernels
# (kernels/dot_heads.py), one case per tile shape (attention_common.tiles)
DOT_SHAPES = ((1, 4, 3), (1, 24, 20), (3, 12, 16), (2, 20, 30), (8, 8, 6), (6, 16, 9))
DOT_SCALE = 0.7
# (heads, dim, attn's spread): one head, dim <= 16 -> BLOCK_D 16, else 64 (gatv2.feature_tile);
# 2-8 heads of few features: the all-heads kernels (kernels/gatv2_heads.py), one case per tile
# shape; the spread None: dgl.nn.GATv2Conv's initialisation (attn_std), 1.0: N(0, 1), peaked softmaxes
GATV2_SHAPES = ((1, 4, None), (1, 24, 1.0), (3, 12, None), (2, 20, None), (8, 8, None), (6, 16, None))


def attn_std(heads: int, dim: int) -> float:
    """The spread of ``dgl.nn.GATv2Conv``'s ``attn`` [1, H, D] at initialisation (xavier-normal, gain
    sqrt(2)).  The D = 24 case takes N(0, 1) instead: there the bf16 gradients once failed the rule
    (grad attn 9.9e-2 from fp64 against a bound of 4.2e-2), because the backward's row term
    <grad_out, out> was taken from the output rounded to bf16; it is now summed in fp32 from the
    recomputed attention (5.4e-3)."""
    return math.sqrt(2.0) * math.sqrt(2.0 / (heads * dim + dim))


def all_heads(heads: int, *dims: int) -> bool:
    """Whether the all-heads kernels take these heads and widths (a program per row whatever the
    heads: under ``tiny`` they keep every head)."""
    return kernel_module("gat_heads").tiles(heads, max(dims)) is not None


def _check(ours, ref, inputs, gouts, device, msg) -> None:
    """``ours`` on the device against ``ref`` (both (out, attention) of the inputs): outputs and the
    gradients of every input for the upstream gradients ``gouts`` of (out, attention)."""
    got = grads_of(ours, [t.to(device) for t in inputs], tuple(g.to(device) for g in gouts))
    got = tuple(t.cpu() for t in got)
    assert_matches_reference(got, lambda *t: grads_of(ref, t[:len(inputs)], t[len(inputs):]), *inputs, *gouts,
                             msg=msg)


def run(checks, g: Graph, device, tiny: bool) -> None:
    gen = torch.Generator().manual_seed(13)
    src, dst, num_dst, name = tiny_block(g, tiny, 4)  # four kernels a case: a smaller block under tiny
    num_src = g.num_nodes

    def randn(*shape, dtype):
        return torch.randn(*shape, generator=gen).to(dtype)

    for dtype in DTYPES:
        for idtype in (torch.int32, torch.int64):
            views = TensorGraph(src.to(device=device, dtype=idtype), dst.to(device=device, dtype=idtype),
                                num_src=num_src, num_dst=num_dst)
            rows, num_edges = on_cpu(views.csr("in")), views.num_edges
            tag = f"{name} {str(idtype)[6:]} {str(dtype)[6:]}"
            for heads, dk, dv in DOT_SHAPES:
                heads = heads if all_heads(heads, dk, dv) else tiny_heads(heads, dtype, tiny)
                inputs = (randn(num_dst, heads, dk, dtype=dtype), randn(num_src, heads, dk, dtype=dtype),
                          randn(num_src, heads, dv, dtype=dtype))
                gouts = (randn(num_dst, heads, dv, dtype=dtype), randn(num_edges, heads, dtype=dtype))
                case = f"{tag} H={heads} DK={dk} DV={dv}"
                checks.run("dot_attention", case, lambda inputs=inputs, gouts=gouts, views=views, rows=rows, case=case:
                           _check(lambda *t: dot_attention(views, *t, DOT_SCALE, return_attention=True),
                                  lambda *t: ref_dot_attention(rows, *t, DOT_SCALE), inputs, gouts, device,
                                  f"dot_attention {case}"))
            for heads, dim, spread in GATV2_SHAPES:
                heads = heads if all_heads(heads, dim) else tiny_heads(heads, dtype, tiny)
                spread = attn_std(heads, dim) if spread is None else spread
                attn = torch.randn(heads, dim, generator=gen).mul_(spread).to(dtype)
                inputs = (randn(num_src, heads, dim, dtype=dtype), randn(num_dst, heads, dim, dtype=dtype), attn)
                gouts = (randn(num_dst, heads, dim, dtype=dtype), randn(num_edges, heads, dtype=dtype))
                case = f"{tag} H={heads} D={dim}"
                checks.run("gatv2_attention", case, lambda inputs=inputs, gouts=gouts, views=views, rows=rows,
                           case=case: _check(lambda *t: gatv2_attention(views, *t, SLOPE, return_attention=True),
                                             lambda *t: ref_gatv2_attention(rows, *t, SLOPE), inputs, gouts,
                                             device, f"gatv2_attention {case}"))
