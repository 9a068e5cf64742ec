"""``gsddmm``'s kernels (``kernels/sddmm.py``) on the report's device against the core's pure-torch
reference (``ref_gsddmm``, autograd for the gradients) under the test suite's rule
(:func:`~dgl_accel.testing.tolerances.assert_matches_reference`: fp64 and same-dtype references on
CPU).  One check per registered variant: fp32/fp16/bf16/fp64 x int32/int64 ids x every registered
(op, lhs target, rhs target, BCAST, tile) of ``_sddmm_kernel`` and ``_sddmm_dot_kernel``, with
operand shapes that make the launcher select exactly that variant, forward and backward on the
Triton path; the backward's scatter onto source and destination rows launches
``_segment_sum_kernel`` at both feature tiles (widths <= 16 and > 16)."""
from __future__ import annotations

import torch

from ..core.aggregation.views import TensorGraph
from ..core.backend import use_backend
from ..core.sddmm.checks import broadcast_feat_shape
from ..core.sddmm.function import gsddmm
from ..core.sddmm.reference import ref_gsddmm
from ..testing.tolerances import assert_matches_reference
from .graphs import Graph

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

# (op, lhs target, rhs target, lhs feature shape, rhs feature shape) per registered variant of
# kernels/sddmm.py (_ELEMENTWISE, _DOT): equal shapes give BCAST=False, the tile follows from the
# output features (tile: <= 4, <= 32, more; dot_tile: reduced length <= 8, more).
CASES = (
    ("add", "u", "v", (4,), (4,)),                 # BCAST=False, TILES[0] (4 features); grads: segment tile 0
    ("sub", "v", "u", (2, 8), (1, 8)),             # BCAST=True, TILES[1] (16)
    ("mul", "u", "e", (5, 8), (1, 8)),             # BCAST=True, TILES[2] (40); grad lhs: segment tile 1 (40)
    ("div", "e", "v", (16,), (16,)),               # BCAST=False, TILES[1] (16)
    ("copy_lhs", "u", "v", (24,), None),           # BCAST=False, TILES[1] (24); segment tile 1 (24)
    ("copy_rhs", "u", "e", None, (40,)),           # BCAST=False, TILES[2] (40)
    ("dot", "u", "v", (2, 8), (2, 8)),             # BCAST=False, DOT_TILES[0] (reduces 8)
    ("dot", "e", "u", (2, 16), (1, 16)),           # BCAST=True, DOT_TILES[1] (reduces 16)
)


def _rows(target: str, num_src: int, num_dst: int, num_edges: int) -> int:
    return {"u": num_src, "v": num_dst, "e": num_edges}[target]


def _draw(gen, rows: int, shape, dtype, positive: bool = False):
    if shape is None:
        return None
    x = torch.randn((rows,) + shape, generator=gen)
    return (x.abs().add_(0.5) if positive else x).to(dtype)


def _reference(src, dst, op, lt, rt, lhs, rhs, gout):
    """(out, grad lhs, grad rhs) of ``ref_gsddmm`` for the operands used, in their dtype."""
    inputs = [t.detach().requires_grad_(True) for t in (lhs, rhs) if t is not None]
    it = iter(inputs)
    lhs, rhs = (None if t is None else next(it) for t in (lhs, rhs))
    with torch.enable_grad():
        out = ref_gsddmm(src, dst, op, lhs, rhs, lt, rt)
        grads = torch.autograd.grad(out, inputs, gout)
    return (out.detach(), *grads)


def _ours(views, op, lt, rt, lhs, rhs, gout, device):
    on_device = [None if t is None else t.detach().to(device).requires_grad_(True) for t in (lhs, rhs)]
    inputs = [t for t in on_device if t is not None]
    with use_backend("triton"), torch.enable_grad():
        out = gsddmm(views, op, *on_device, lt, rt)
        grads = torch.autograd.grad(out, inputs, gout.to(device))
    return tuple(t.detach().cpu() for t in (out, *grads))


def _check(views, src, dst, op, lt, rt, lhs, rhs, gout, device, case) -> None:
    ours = _ours(views, op, lt, rt, lhs, rhs, gout, device)
    assert_matches_reference(ours, _reference, src, dst, op, lt, rt, lhs, rhs, gout, msg=case)


def run(checks, g: Graph, device, tiny: bool) -> None:
    gen = torch.Generator().manual_seed(11)
    src, dst, num_src, num_dst, name = g.src.cpu(), g.dst.cpu(), g.num_nodes, g.num_nodes, g.name
    if tiny:  # the interpreter pays per program: the in-edges of 8 destinations, sources relabelled
        keep = dst < 8
        src, dst = src[keep], dst[keep]
        uniq, src = torch.unique(src, return_inverse=True)
        num_src, num_dst, name = int(uniq.numel()), min(8, g.num_nodes), f"{g.name} (8 dst)"
    num_edges = int(src.numel())
    for dtype in DTYPES:
        for idtype in (torch.int32, torch.int64):
            views = TensorGraph(src.to(device=device, dtype=idtype), dst.to(device=device, dtype=idtype),
                                num_src=num_src, num_dst=num_dst)
            for op, lt, rt, lshape, rshape in CASES:
                lhs = _draw(gen, _rows(lt, num_src, num_dst, num_edges), lshape, dtype)
                rhs = _draw(gen, _rows(rt, num_src, num_dst, num_edges), rshape, dtype, positive=op == "div")
                feat = broadcast_feat_shape(op, lshape, rshape) if lshape and rshape else lshape or rshape
                gout = torch.randn((num_edges,) + feat, generator=gen).to(dtype)
                case = (f"{name} {str(idtype)[6:]} {str(dtype)[6:]} {lt}_{op}_{rt} "
                        f"{list(lshape or [])} x {list(rshape or [])}")
                args = (views, src, dst, op, lt, rt, lhs, rhs, gout, device, case)
                checks.run("sddmm", case, lambda args=args: _check(*args))
