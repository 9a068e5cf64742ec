"""The max/min aggregation's kernel (``kernels/extrema.py``) on the report's device against the
core's pure-torch loop (``extrema_reference``): values and args exactly, since the result is one of
the messages, computed in fp32 (fp64) on every path.  One check per registered variant and more:
fp32/fp16/bf16/fp64 x int32/int64 ids x copy_u, copy_e, u_mul_e, u_add_e x both feature tiles,
max and min in turn.  The backward is torch code on the saved arg (the core lane tests it)."""
from __future__ import annotations

import torch

from ..core.aggregation.views import TensorGraph
from ..core.csr import Structure
from ..core.extrema import aggregate_extrema, extrema_reference
from .graphs import Graph

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
WIDTHS = (8, 40)  # one per feature tile of kernels/extrema.py (TILES)
OPS = ("copy_u", "copy_e", "u_mul_e", "u_add_e")


def on_cpu(rows: Structure) -> Structure:
    """A CSR view's copy on the CPU, for the references (shared with the attention checks)."""
    return Structure(indptr=rows.indptr.cpu(), indices=rows.indices.cpu(), eids=rows.eids.cpu(),
                     num_rows=rows.num_rows, num_cols=rows.num_cols, device=torch.device("cpu"))


def _check(views, rows, op, reduce, ufeat, efeat, device, case) -> None:
    on_device = [None if t is None else t.to(device) for t in (ufeat, efeat)]
    with torch.no_grad():
        out, arg = aggregate_extrema(views, op, reduce, *on_device, return_arg=True)
    ref_out, ref_arg = extrema_reference(rows, op, reduce, ufeat, efeat)
    assert torch.equal(out.cpu(), ref_out), f"values differ: {case}"
    assert torch.equal(arg.cpu(), ref_arg), f"args differ: {case}"


def run(checks, g: Graph, device, tiny: bool) -> None:
    gen = torch.Generator().manual_seed(7)
    step = 0
    src, dst, num_dst, name = g.src, g.dst, g.num_nodes, g.name
    if tiny:  # the interpreter pays per program: the in-edges of 8 destinations, as a block
        keep = dst < 8
        src, dst, num_dst, name = src[keep], dst[keep], min(8, num_dst), f"{g.name} (8 dst)"
    for dtype in DTYPES:
        for idtype in (torch.int32, torch.int64):
            views = TensorGraph(src.to(device=device, dtype=idtype), dst.to(device=device, dtype=idtype),
                                num_src=g.num_nodes, num_dst=num_dst)
            rows = on_cpu(views.csr("in"))
            for op in OPS[:1] + OPS[2:] if tiny else OPS:  # tiny: no copy_e (copy_u's variant of the kernel)
                for width in WIDTHS:
                    step += 1
                    reduce = "max" if step % 2 else "min"
                    x = torch.randn(g.num_nodes, width, generator=gen).to(dtype)
                    w = torch.rand(views.num_edges, width if step % 3 else 1, generator=gen).add_(0.5).to(dtype)
                    ufeat, efeat = (None, torch.randn(views.num_edges, width, generator=gen).to(dtype)) \
                        if op == "copy_e" else (x, None if op == "copy_u" else w)
                    case = f"{name} {str(idtype)[6:]} {str(dtype)[6:]} {op} {reduce} F={width}"
                    args = (views, rows, op, reduce, ufeat, efeat, device, case)
                    checks.run("extrema", case, lambda args=args: _check(*args))
