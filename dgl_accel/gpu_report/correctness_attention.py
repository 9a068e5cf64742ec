"""The attention kernels (``kernels/edge_softmax.py``, ``kernels/gat.py``) on the report's device against the core's
pure-torch references (``core/attention/reference.py``) under the FlashAttention rule
(``assert_matches_reference``: fp64 reference on CPU, plain torch in the case's dtype).  Edge softmax
forward and backward (``_edge_softmax_fwd_kernel`` / ``_edge_softmax_bwd_kernel``) and the fused GAT
forward and backward (``_gat_fwd_kernel``, ``_gat_bwd_dst_kernel``, ``_gat_bwd_src_kernel``, and
``kernels/gat_heads.py``'s all-heads twins): fp32/fp16/bf16/fp64 x int32/int64 ids x every
tile (softmax: one head and several, GAT: both per-head feature tiles and every all-heads tile shape,
without and with attention dropout: ``DROPOUT`` on, against the reference composition with the
same counter-based mask, ``core/attention/dropout.py``), gradients through ``torch.autograd.grad`` so
the backward kernels launch.  :func:`grads_of` and :func:`tiny_block` serve the dot-product,
GATv2 and head-wise checks too (:mod:`.correctness_attention_variants`)."""
from __future__ import annotations

import torch

from ..core.aggregation.views import TensorGraph
from ..core.attention.dropout import make_dropout
from ..core.attention.edge_softmax import edge_softmax
from ..core.attention.gat import gat_attention
from ..core.attention.reference import ref_edge_softmax, ref_gat
from ..core.launch import kernel_module
from ..testing.tolerances import assert_matches_reference
from .correctness_extrema import on_cpu
from .graphs import Graph

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
SLOPE = 0.2
# heads: 1 -> softmax tile (64, 1), more -> (32, 8) (edge_softmax.tile); 10 > 8: two head blocks
SOFTMAX_HEADS = (1, 3)
SOFTMAX_HEADS_FULL = (1, 3, 10)
# (heads, head dim): one head, or a row wider than attention_common.SHAPES: the per-head kernels,
# dim <= 16 -> BLOCK_D 16, else 64 (gat.feature_tile), 70 > 64: two feature blocks; 2-8 heads of
# few features: the all-heads kernels, one per tile shape (attention_common.tiles)
GAT_SHAPES = ((1, 4), (1, 24), (2, 4), (4, 32), (8, 8), (8, 16))
GAT_SHAPES_FULL = GAT_SHAPES + ((3, 70),)
DROPOUT, DROPOUT_SEED = 0.45, 2**40 + 2024  # a seed past 2^32: both words of the per-head keys matter


def grads_of(fn, inputs, gouts):
    """(outputs..., grads of every input) of ``fn(*inputs)`` (a tensor or a tuple of them) for the
    upstream gradients ``gouts`` (one tensor, or a tuple matching the outputs)."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    with torch.enable_grad():
        out = fn(*leaves)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        grads = torch.autograd.grad(outs, leaves, tuple(gouts) if isinstance(gouts, (tuple, list)) else (gouts,))
    return (*(o.detach() for o in outs), *grads)


def tiny_block(g: Graph, tiny: bool, num_dst: int = 8):
    """(src, dst, num_dst, name) of the attention and head-wise checks: ``g``, or under ``tiny`` the
    in-edges of its first ``num_dst`` destinations as a block (the interpreter pays per program)."""
    if not tiny:
        return g.src, g.dst, g.num_nodes, g.name
    keep = g.dst < num_dst
    return g.src[keep], g.dst[keep], min(num_dst, g.num_nodes), f"{g.name} ({num_dst} dst)"


def tiny_heads(heads: int, dtype, tiny: bool) -> int:
    """``heads``, or under ``tiny`` one head but in fp32: the interpreter pays per (row, head) program,
    and the per-head code is the same in every dtype (the core lane's tests cover several heads)."""
    return heads if not tiny or dtype == torch.float32 else 1


def _check_softmax(views, rows, score, gout, device, case) -> None:
    got = grads_of(lambda s: edge_softmax(views.csr("in"), s), [score.to(device)], gout.to(device))
    got = tuple(t.cpu() for t in got)
    assert_matches_reference(got, lambda s, g: grads_of(lambda x: ref_edge_softmax(rows, x), [s], g),
                             score, gout, msg=f"edge_softmax {case}")


def _check_gat(views, in_csr, feat, el, er, gout, device, case, dropout: float) -> None:
    """The fused op (``dropout`` > 0: with the attention dropout of ``DROPOUT_SEED``) against
    ``ref_gat`` with the reference mask's weights (keep / (1 - p) per edge id and head)."""
    on_device = [t.to(device) for t in (feat, el, er)]
    got = grads_of(lambda f, a, b: gat_attention(views, f, a, b, SLOPE, dropout=dropout, seed=DROPOUT_SEED),
                   on_device, gout.to(device))
    got = tuple(t.cpu() for t in got)
    drop = make_dropout(dropout, DROPOUT_SEED, feat.shape[1])
    weight = None if drop is None else drop.weights(torch.arange(in_csr.num_edges), torch.float64)
    assert_matches_reference(got, lambda f, a, b, g: grads_of(lambda *u: ref_gat(in_csr, *u, SLOPE, weight),
                                                              [f, a, b], g),
                             feat, el, er, gout, msg=f"gat {case}")


def run(checks, g: Graph, device, tiny: bool) -> None:
    all_heads = kernel_module("gat_heads")
    gen = torch.Generator().manual_seed(11)
    src, dst, num_dst, name = tiny_block(g, tiny)
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
                for dropout in (0.0, DROPOUT):  # the kernels' DROPOUT=False and DROPOUT=True variants
                    # one mask key per head; the all-heads kernels run a program per row whatever the heads
                    h = tiny_heads(heads, dtype, tiny) if dropout and not all_heads.tiles(heads, dim) else heads
                    case = (f"{name} {str(idtype)[6:]} {str(dtype)[6:]} H={h} D={dim}"
                            f"{f' dropout={dropout}' if dropout else ''}")
                    args = (views, rows, *(t[:, :h].contiguous() for t in (feat, el, er, gout)), device, case,
                            dropout)
                    checks.run("gat", case, lambda args=args: _check_gat(*args))
