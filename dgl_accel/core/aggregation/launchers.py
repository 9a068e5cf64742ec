"""Triton launchers of the aggregation op (kernels in ``kernels/gspmm_grouped.py``).

``_gspmm_grouped_fwd_kernel`` / ``_segment_reduce_kernel`` -> :func:`gspmm_forward`;
``_sddmm_grad_efeat_kernel`` -> :func:`edge_grad_forward`.  Kernel constants come from the kernel
module through ``kernel_constants``, which loads it in this process's Triton mode.
"""
from __future__ import annotations

import torch

from ..csr import Structure
from ..groups import Groups
from ..launch import kernel_module, triton_kernel
from .scales import acc_dtype


def feature_tile(num_feats: int) -> int:
    """The kernel's BLOCK_F for ``num_feats`` features: the smallest tile that covers them."""
    tiles = kernel_module("gspmm_grouped").FEATURE_TILES
    return next((t for t in tiles if t >= num_feats), tiles[-1])


def gspmm_forward(parts: list[tuple[Structure, Groups]], ufeat: torch.Tensor, efeat: torch.Tensor | None,
                  src_scale: torch.Tensor | None, dst_scale: torch.Tensor | None,
                  deterministic: bool) -> torch.Tensor:
    """Launch the grouped kernel(s): out[r] = dst_scale[r] * sum_k src_scale[u_k] * x[u_k] (* w[e_k])
    over row r's CSR entries k.  ``parts``: one ``(Structure, Groups)``, or a locality split's two
    (its hot and cold edges, :mod:`.locality`: the same rows, the edges shared out), each run as one
    launch into the same buffer.  ``efeat`` is [E, 1] or [E, F], indexed by edge id."""
    consts = kernel_module("gspmm_grouped")
    if ufeat.stride(-1) != 1:
        ufeat = ufeat.contiguous()  # rows may be strided; the feature tile needs unit column stride
    rows, num_feats, device = parts[0][0].num_rows, ufeat.shape[1], ufeat.device
    acc = acc_dtype(ufeat.dtype)
    num_groups = [groups.num_groups for _, groups in parts]
    if rows == 0 or num_feats == 0 or sum(num_groups) == 0:
        return torch.zeros((rows, num_feats), dtype=ufeat.dtype, device=device)
    block_g = consts.BLOCK_G
    block_f = feature_tile(num_feats)
    dummy = ufeat  # never dereferenced when its flag is off
    has_e = efeat is not None
    efeat = efeat.contiguous() if has_e else dummy
    per_feat = has_e and efeat.shape[1] > 1
    src_s = src_scale if src_scale is not None else dummy
    dst_s = dst_scale if dst_scale is not None else dummy
    kernel = triton_kernel("gspmm_grouped", "_gspmm_grouped_fwd_kernel", device)
    common = dict(BLOCK_G=block_g, BLOCK_F=block_f, HAS_EFEAT=has_e, EFEAT_PER_FEAT=per_feat,
                  HAS_SRC_SCALE=src_scale is not None, ACC_FP64=acc == torch.float64)

    def launch(structure, groups, out, atomic: bool) -> None:
        if groups.num_groups == 0:
            return
        has_dst = atomic and dst_scale is not None  # the deterministic path scales in the reduce
        cap = consts.fwd_maxnreg(ufeat.dtype == torch.bfloat16, structure.indices.dtype == torch.int64, has_e,
                                 per_feat, src_scale is not None, atomic)  # the registry's choice
        kernel[(-(-groups.num_groups // block_g), -(-num_feats // block_f))](
            groups.row, groups.start, groups.length, structure.indices, structure.eids, ufeat, efeat,
            src_s, dst_s, out, groups.num_groups, num_feats, ufeat.stride(0), efeat.stride(0) if has_e else 0,
            out.stride(0), HAS_DST_SCALE=has_dst, ATOMIC=atomic,
            num_warps=consts.fwd_num_warps(block_f, has_e, src_scale is not None, has_dst, atomic),
            **({"maxnreg": cap} if cap else {}), **common)
    if not deterministic:
        buf = torch.zeros((rows, num_feats), dtype=acc, device=device)
        for structure, groups in parts:
            launch(structure, groups, buf, True)
        return buf.to(ufeat.dtype)
    # one slot per group, the parts' slots one after the other; the reduce sums a row's in order
    partial = torch.empty((sum(num_groups), num_feats), dtype=acc, device=device)
    for (structure, groups), offset in zip(parts, (0, num_groups[0])):
        launch(structure, groups, partial[offset:], False)
    two = len(parts) == 2
    second = parts[1][1].row_ptr + num_groups[0] if two else parts[0][1].row_ptr
    out = torch.empty((rows, num_feats), dtype=ufeat.dtype, device=device)
    reduce = triton_kernel("gspmm_grouped", "_segment_reduce_kernel", device)
    reduce[(rows, -(-num_feats // block_f))](
        parts[0][1].row_ptr, second, partial, dst_s, out, num_feats, partial.stride(0), out.stride(0),
        BLOCK_F=block_f, HAS_DST_SCALE=dst_scale is not None, ACC_FP64=acc == torch.float64, TWO_PARTS=two,
        num_warps=consts.num_warps_for(1, block_f))
    return out


def edge_grad_forward(src: torch.Tensor, dst: torch.Tensor, ufeat: torch.Tensor, grad_out: torch.Tensor,
                      src_scale, dst_scale, per_feat: bool, out_dtype: torch.dtype) -> torch.Tensor:
    """Launch the SDDMM kernel: gradient of u_mul_e w.r.t. w, edges in edge-id order."""
    ufeat, grad_out = ufeat.contiguous(), grad_out.contiguous()
    num_edges, num_feats = src.numel(), ufeat.shape[1]
    out = torch.empty((num_edges, num_feats if per_feat else 1), dtype=out_dtype, device=ufeat.device)
    if num_edges == 0:
        return out
    block_e, block_f = 32, 64
    dummy = ufeat
    fp64 = acc_dtype(ufeat.dtype) == torch.float64
    kernel = triton_kernel("gspmm_grouped", "_sddmm_grad_efeat_kernel", ufeat.device)
    grid = (-(-num_edges // block_e), -(-num_feats // block_f) if per_feat else 1)
    kernel[grid](src, dst, ufeat, grad_out,
                 src_scale if src_scale is not None else dummy, dst_scale if dst_scale is not None else dummy,
                 out, num_edges, num_feats, ufeat.stride(0), grad_out.stride(0), out.stride(0),
                 BLOCK_E=block_e, BLOCK_F=block_f, PER_FEAT=per_feat, HAS_SRC_SCALE=src_scale is not None,
                 HAS_DST_SCALE=dst_scale is not None, ACC_FP64=fp64,
                 num_warps=kernel_module("gspmm_grouped").edge_grad_num_warps(per_feat, fp64))
    return out


def time_grouped_forward(views, feat_dim: int, dtype: torch.dtype, gs: int, repeats: int = 3) -> float:
    """Seconds for one grouped copy_u-sum forward with group size ``gs`` on the graph's CUDA device:
    the timer the group-size autotuner calls once per candidate and (graph, width, dtype)."""
    x = torch.randn(views.num_src, feat_dim, device=views.device).to(dtype)
    parts = [(views.csr("in"), views.groups("in", gs))]
    gspmm_forward(parts, x, None, None, None, False)  # compile outside the timer
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        gspmm_forward(parts, x, None, None, None, False)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / repeats
