"""Neighbour-grouped generalized SpMM (GNNAdvisor, OSDI'21), forward and the pieces of backward.

Each destination row's in-neighbour list is split into groups of at most ``gs`` neighbours.  A
program owns a tile of BLOCK_G groups x a tile of BLOCK_F features and walks the groups' edges in
lock-step (the loop runs to the longest group of the tile, at most ``gs``), so a hub row of 10^5
neighbours becomes many short, equally sized pieces of work instead of one straggler program.

Partial sums of rows split across groups are combined either
* atomically (``ATOMIC``): each group adds its partial into a zero-initialised fp32 buffer, or
* deterministically: each group writes its partial to its own slot, then ``_segment_reduce_kernel``
  sums a row's partials in group order, so results are bit-identical run to run.

Messages: ``copy_u`` (x[u]) or ``u_mul_e`` (x[u] * w[e], w scalar or per feature).  Degree
normalisation is fused: an optional per-source factor multiplies each message (GCN's left norm)
and an optional per-destination factor multiplies the row (GCN's right norm, mean's 1/deg).
Row pointers, group starts and all address arithmetic are int64 (no 2^24 / 2^31 precision loss).
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit(do_not_specialize=["num_groups"])  # per graph (each minibatch's): one variant, not one per num_groups % 16
def _gspmm_grouped_fwd_kernel(group_row_ptr, group_start_ptr, group_len_ptr,
                              indices_ptr, eids_ptr, feat_ptr, efeat_ptr,
                              src_scale_ptr, dst_scale_ptr, out_ptr,
                              num_groups: tl.int64, num_feats, stride_feat, stride_efeat, stride_out,
                              BLOCK_G: tl.constexpr, BLOCK_F: tl.constexpr,
                              HAS_EFEAT: tl.constexpr, EFEAT_PER_FEAT: tl.constexpr,
                              HAS_SRC_SCALE: tl.constexpr, HAS_DST_SCALE: tl.constexpr,
                              ATOMIC: tl.constexpr, ACC_FP64: tl.constexpr):
    acc_dtype = tl.float64 if ACC_FP64 else tl.float32  # fp32 accumulation for fp32/fp16/bf16
    grp = tl.program_id(0).to(tl.int64) * BLOCK_G + tl.arange(0, BLOCK_G)
    g_mask = grp < num_groups
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = f < num_feats
    start = tl.load(group_start_ptr + grp, mask=g_mask, other=0)
    length = tl.load(group_len_ptr + grp, mask=g_mask, other=0)
    acc = tl.zeros((BLOCK_G, BLOCK_F), dtype=acc_dtype)
    e = start  # walk the groups' edges by increment: keeps one 64-bit induction value per group
    for j in range(0, tl.max(length, axis=0)):
        e_mask = j < length
        src = tl.load(indices_ptr + e, mask=e_mask, other=0).to(tl.int64)
        m2 = e_mask[:, None] & f_mask[None, :]
        msg = tl.load(feat_ptr + src[:, None] * stride_feat + f[None, :], mask=m2, other=0.0).to(acc_dtype)
        if HAS_SRC_SCALE:
            msg = msg * tl.load(src_scale_ptr + src, mask=e_mask, other=0.0).to(acc_dtype)[:, None]
        if HAS_EFEAT:
            eid = tl.load(eids_ptr + e, mask=e_mask, other=0).to(tl.int64)
            if EFEAT_PER_FEAT:
                w = tl.load(efeat_ptr + eid[:, None] * stride_efeat + f[None, :], mask=m2, other=0.0)
                msg = msg * w.to(acc_dtype)
            else:
                w = tl.load(efeat_ptr + eid * stride_efeat, mask=e_mask, other=0.0)
                msg = msg * w.to(acc_dtype)[:, None]
        acc += msg
        e += 1
    row = tl.load(group_row_ptr + grp, mask=g_mask, other=0)
    if HAS_DST_SCALE:
        acc = acc * tl.load(dst_scale_ptr + row, mask=g_mask, other=0.0).to(acc_dtype)[:, None]
    out_mask = g_mask[:, None] & f_mask[None, :]
    if ATOMIC:
        tl.atomic_add(out_ptr + row[:, None] * stride_out + f[None, :], acc, mask=out_mask, sem="relaxed")
    else:  # one slot per group; _segment_reduce_kernel combines them in order
        tl.store(out_ptr + grp[:, None] * stride_out + f[None, :], acc, mask=out_mask)


@triton.jit
def _segment_reduce_kernel(row_group_ptr, row_group2_ptr, partial_ptr, dst_scale_ptr, out_ptr,
                           num_feats, stride_partial, stride_out,
                           BLOCK_F: tl.constexpr, HAS_DST_SCALE: tl.constexpr, ACC_FP64: tl.constexpr,
                           TWO_PARTS: tl.constexpr):
    """out[r] = dst_scale[r] * sum of partial[g] for r's groups, in group order (deterministic).
    ``TWO_PARTS``: the row's edges ran as two launches (a locality split, ``core/aggregation/locality.py``)
    whose partials share the buffer; ``row_group2_ptr`` points at the second launch's slots, after the first's."""
    acc_dtype = tl.float64 if ACC_FP64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = f < num_feats
    first = tl.load(row_group_ptr + r)
    last = tl.load(row_group_ptr + r + 1)
    acc = tl.zeros((BLOCK_F,), dtype=acc_dtype)
    for g in range(first, last):
        acc += tl.load(partial_ptr + g * stride_partial + f, mask=f_mask, other=0.0).to(acc_dtype)
    if TWO_PARTS:
        for g in range(tl.load(row_group2_ptr + r), tl.load(row_group2_ptr + r + 1)):
            acc += tl.load(partial_ptr + g * stride_partial + f, mask=f_mask, other=0.0).to(acc_dtype)
    if HAS_DST_SCALE:
        acc = acc * tl.load(dst_scale_ptr + r).to(acc_dtype)
    tl.store(out_ptr + r * stride_out + f, acc.to(out_ptr.dtype.element_ty), mask=f_mask)


@triton.jit(do_not_specialize=["num_edges"])  # per graph: one variant whatever the edge count
def _sddmm_grad_efeat_kernel(src_ptr, dst_ptr, feat_ptr, grad_ptr, src_scale_ptr, dst_scale_ptr, out_ptr,
                             num_edges: tl.int64, num_feats, stride_feat, stride_grad, stride_out,
                             BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr, PER_FEAT: tl.constexpr,
                             HAS_SRC_SCALE: tl.constexpr, HAS_DST_SCALE: tl.constexpr,
                             ACC_FP64: tl.constexpr):
    """Gradient of u_mul_e w.r.t. the edge weights, edges in edge-id order:
    scalar w: out[e] = s_u s_v <x[u], grad[v]>;  per-feature w: out[e, f] = s_u s_v x[u, f] grad[v, f]."""
    acc_dtype = tl.float64 if ACC_FP64 else tl.float32
    e = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    e_mask = e < num_edges
    u = tl.load(src_ptr + e, mask=e_mask, other=0).to(tl.int64)
    v = tl.load(dst_ptr + e, mask=e_mask, other=0).to(tl.int64)
    scale = tl.full((BLOCK_E,), 1.0, dtype=acc_dtype)
    if HAS_SRC_SCALE:
        scale = scale * tl.load(src_scale_ptr + u, mask=e_mask, other=0.0).to(acc_dtype)
    if HAS_DST_SCALE:
        scale = scale * tl.load(dst_scale_ptr + v, mask=e_mask, other=0.0).to(acc_dtype)
    if PER_FEAT:
        f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        m2 = e_mask[:, None] & (f < num_feats)[None, :]
        x = tl.load(feat_ptr + u[:, None] * stride_feat + f[None, :], mask=m2, other=0.0).to(acc_dtype)
        gv = tl.load(grad_ptr + v[:, None] * stride_grad + f[None, :], mask=m2, other=0.0).to(acc_dtype)
        val = x * gv * scale[:, None]
        tl.store(out_ptr + e[:, None] * stride_out + f[None, :], val.to(out_ptr.dtype.element_ty), mask=m2)
    else:
        dot = tl.zeros((BLOCK_E,), dtype=acc_dtype)
        for f0 in range(0, num_feats, BLOCK_F):
            f = f0 + tl.arange(0, BLOCK_F)
            m2 = e_mask[:, None] & (f < num_feats)[None, :]
            x = tl.load(feat_ptr + u[:, None] * stride_feat + f[None, :], mask=m2, other=0.0).to(acc_dtype)
            gv = tl.load(grad_ptr + v[:, None] * stride_grad + f[None, :], mask=m2, other=0.0).to(acc_dtype)
            dot += tl.sum(x * gv, axis=1)
        tl.store(out_ptr + e * stride_out, (dot * scale).to(out_ptr.dtype.element_ty), mask=e_mask)


# ------------------------------------------------------------------ launch configuration
BLOCK_G = 16                      # groups per program
FEATURE_TILES = (16, 32, 64, 128)  # BLOCK_F values the launcher may pick


def num_warps_for(block_g: int, block_f: int) -> int:
    """About 256 tile elements per warp (8 per thread).  Fewer elements per thread made ptxas
    spill a few bytes in some variants (seen for 16x32 tiles on 4 warps in the AOT table)."""
    return max(1, min(8, (block_g * block_f) // 256))


def fwd_maxnreg(bf16: bool, idx64: bool, efeat: bool, per_feat: bool, src_scale: bool, atomic: bool) -> int | None:
    """Register cap of ``_gspmm_grouped_fwd_kernel``: 128 for bf16 features with int64 ids, one
    weight per edge, the source scale, atomic (triton 3.6's ptxas stopped at its 96-register target
    on sm_90 and spilled 8 bytes, tiles 16-64); None elsewhere (ptxas's default)."""
    return 128 if bf16 and idx64 and efeat and not per_feat and src_scale and atomic else None


def fwd_num_warps(block_f: int, efeat: bool, src_scale: bool, dst_scale: bool, atomic: bool) -> int:
    """Warps of ``_gspmm_grouped_fwd_kernel`` (``dst_scale``: its HAS_DST_SCALE): :func:`num_warps_for`'s,
    doubled for mean's backward (copy_u, the source scale alone, atomic: SAGEConv's mean run on the
    transposed view).  At the usual choice ptxas (triton 3.5.1) stopped at 80 registers on sm_80 and
    spilled 8-16 bytes on tiles 32 (fp32, int32 ids, 2 warps), 64 (fp32, int32, 4) and 128 (every
    dtype and id type, 8); with twice the warps every dtype, id type and tile fits on sm_80 and sm_90
    (at most 56 registers)."""
    warps = num_warps_for(BLOCK_G, block_f)
    if not efeat and src_scale and not dst_scale and atomic:
        return min(16, 2 * warps)
    return warps


def edge_grad_num_warps(per_feat: bool, fp64: bool) -> int:
    """Warps of ``_sddmm_grad_efeat_kernel`` (32 x 64 tiles).  The fp64 dot (``PER_FEAT=False``) keeps
    two 32 x 64 fp64 tiles live: at 4 warps ptxas spilled 256 / 128 bytes on sm_80 / sm_90 (255
    registers); at 8 it fits (162 / 172).  Every other variant fits at 4."""
    return 8 if fp64 and not per_feat else 4


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16")
_IDX = ("i32", "i64")


def _acc(t: str) -> str:
    """The accumulation type (scales, atomic buffer and partials): fp64 for fp64, else fp32."""
    return "fp64" if t == "fp64" else "fp32"


# (source scale given, destination scale given) per normalisation a launch carries: "both" GCN's
# norm="both"; "none" plain sum (norm="none"); "dst" mean's forward (1/deg of the destination); "src"
# mean's backward (the transposed view's source scale is the forward's 1/deg)
_SCALES = {"both": (True, True), "none": (False, False), "dst": (False, True), "src": (True, False)}


def _scale_ptr(t: str, given: bool) -> str:
    """A given scale is in the accumulation type; an absent one's pointer is the launcher's dummy,
    the feature tensor, so it takes the feature type."""
    return f"*{_acc(t) if given else t}"


def _fwd(t, idx, efeat, per_feat, atomic, block_f, scales="both"):
    """``scales``: which degree scales the launch is given (:data:`_SCALES`)."""
    src, dst = _SCALES[scales]
    sig = {"group_row_ptr": "*i64", "group_start_ptr": "*i64", "group_len_ptr": "*i32",
           "indices_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "feat_ptr": f"*{t}", "efeat_ptr": f"*{t}",
           "src_scale_ptr": _scale_ptr(t, src), "dst_scale_ptr": _scale_ptr(t, dst),
           "out_ptr": f"*{_acc(t)}",
           "num_groups": "i64", "num_feats": "i32", "stride_feat": "i64", "stride_efeat": "i64",
           "stride_out": "i64"}
    consts = {"BLOCK_G": BLOCK_G, "BLOCK_F": block_f, "HAS_EFEAT": efeat, "EFEAT_PER_FEAT": per_feat,
              # the deterministic path leaves the destination scale to _segment_reduce_kernel
              "HAS_SRC_SCALE": src, "HAS_DST_SCALE": dst and atomic, "ATOMIC": atomic,
              "ACC_FP64": t == "fp64"}
    sig.update({k: "constexpr" for k in consts})
    return Specialisation("gspmm_grouped", "_gspmm_grouped_fwd_kernel", sig, consts,
                          num_warps=fwd_num_warps(block_f, efeat, src, dst and atomic, atomic),
                          maxnreg=fwd_maxnreg(t == "bf16", idx == "i64", efeat, per_feat, src, atomic))


def _reduce(t, block_f, dst=True, two_parts=False):
    """``dst``: the destination scale is given (the reduce applies it); ``two_parts``: a locality split's."""
    consts = {"BLOCK_F": block_f, "HAS_DST_SCALE": dst, "ACC_FP64": t == "fp64", "TWO_PARTS": two_parts}
    sig = {"row_group_ptr": "*i64", "row_group2_ptr": "*i64", "partial_ptr": f"*{_acc(t)}",
           "dst_scale_ptr": _scale_ptr(t, dst),
           "out_ptr": f"*{t}", "num_feats": "i32", "stride_partial": "i64", "stride_out": "i64"}
    sig.update({k: "constexpr" for k in consts})
    # launched with one row per program: the warps of a 1 x BLOCK_F tile (launchers.gspmm_forward)
    return Specialisation("gspmm_grouped", "_segment_reduce_kernel", sig, consts,
                          num_warps=num_warps_for(1, block_f))


def _sddmm(t, idx, per_feat, scales="both"):
    """``scales``: the forward's degree scales (:data:`_SCALES`)."""
    src, dst = _SCALES[scales]
    consts = {"BLOCK_E": 32, "BLOCK_F": 64, "PER_FEAT": per_feat, "HAS_SRC_SCALE": src,
              "HAS_DST_SCALE": dst, "ACC_FP64": t == "fp64"}
    sig = {"src_ptr": f"*{idx}", "dst_ptr": f"*{idx}", "feat_ptr": f"*{t}", "grad_ptr": f"*{t}",
           "src_scale_ptr": _scale_ptr(t, src), "dst_scale_ptr": _scale_ptr(t, dst), "out_ptr": f"*{t}",
           "num_edges": "i64", "num_feats": "i32", "stride_feat": "i64", "stride_grad": "i64",
           "stride_out": "i64"}
    sig.update({k: "constexpr" for k in consts})
    return Specialisation("gspmm_grouped", "_sddmm_grad_efeat_kernel", sig, consts,
                          num_warps=edge_grad_num_warps(per_feat, t == "fp64"))


_EFEAT = ((False, False), (True, False), (True, True))  # (HAS_EFEAT, EFEAT_PER_FEAT): copy_u, w [E, 1], w [E, F]
# fp64 (ACC_FP64: fp64 scales, buffer and partials) where the report's fp64 checks launch it: F=24
# (tile 32) on int64 ids, GCN-normalised; (dtype, id type, feature tile)
_FP64 = (("fp64", "i64", 32),)


def _unique(specs):
    """``specs`` without repeats, first occurrences in order.  In fp32 a given scale and the dummy
    share a type, so some combinations coincide: mean's deterministic forward is the plain sum's,
    its deterministic backward is GCN's."""
    seen, out = set(), []
    for s in specs:
        key = (s.kernel, tuple(s.signature.items()), tuple(s.constexprs.items()), s.num_warps, s.num_stages)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


SPECIALISATIONS = _unique(
    [_fwd(t, idx, efeat, per_feat, atomic, bf)
     for t in _DT for idx in _IDX
     for efeat, per_feat in _EFEAT
     for atomic in (True, False) for bf in FEATURE_TILES]
    + [_fwd(t, idx, efeat, per_feat, atomic, bf)
       for t, idx, bf in _FP64 for efeat, per_feat in _EFEAT for atomic in (True, False)]
    # plain copy_u-sum in fp64 (no scales, atomic into the fp64 buffer); the other dtypes' is in the list below
    + [_fwd(t, idx, False, False, True, bf, scales="none") for t, idx, bf in _FP64]
    # norm="none" sum and mean aggregation (copy_u, w [E, 1] and w [E, F], both combines) on every tile
    # (SAGEConv's mean and update_all(copy_u, sum) run at any width): plain sum forward and backward
    # ("none"), mean's forward ("dst") and backward ("src"); its atomic copy_u-sum is also what the
    # group-size autotuner's timer (launchers.time_grouped_forward) launches for every dtype and width
    + [_fwd(t, idx, efeat, per_feat, atomic, bf, scales=s) for s in ("none", "dst", "src")
       for t in _DT for idx in _IDX for efeat, per_feat in _EFEAT for atomic in (True, False)
       for bf in FEATURE_TILES]
    # the deterministic combine, of one launch and of a locality split's two (hot and cold edges)
    + [_reduce(t, bf, two_parts=two) for t in _DT for bf in FEATURE_TILES for two in (False, True)]
    + [_reduce(t, bf, two_parts=two) for t, _, bf in _FP64 for two in (False, True)]
    # deterministic plain sum (fwd, bwd) and mean's backward
    + [_reduce(t, bf, dst=False, two_parts=two) for t in _DT for bf in FEATURE_TILES for two in (False, True)]
    + [_sddmm(t, idx, pf) for t in _DT for idx in _IDX for pf in (False, True)]
    + [_sddmm(t, idx, pf) for t, idx, _ in _FP64 for pf in (False, True)]  # its BLOCK_F is 64 at any width
    # w [E, 1]'s and w [E, F]'s gradient of plain sum ("none") and mean ("dst"), the norm="none" u_mul_e backward
    + [_sddmm(t, idx, pf, scales=s) for s in ("none", "dst") for t in _DT for idx in _IDX for pf in (False, True)]
)
