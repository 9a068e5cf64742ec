"""Generalized SDDMM: one value per edge from node or edge operands, DGL's ``gsddmm``.

``_sddmm_kernel`` (add, sub, mul, div, copy_lhs, copy_rhs): a program owns BLOCK_E edges (edge-id
order) x BLOCK_F output features.  Each operand's row is the edge's source (target u), its
destination (v) or the edge itself (e); the feature offsets of both operands come from per-feature
offset tables when the shapes broadcast (``BCAST``, built on the host from DGL's broadcasting rule),
else they equal the output feature.  ``_sddmm_dot_kernel``: a program owns BLOCK_E edges and one
output feature and sums lhs * rhs over the last dimension in chunks of BLOCK_K.  ``_segment_sum_kernel``
(the backward's scatter): per CSR row, the sum of per-edge values over its entries, without atomics.

Math in fp32 (fp64 for fp64 inputs); edge and row addresses in int64.
"""
import triton
import triton.language as tl

from .registry import Specialisation

OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")  # OP constexpr = index here
TARGETS = ("u", "e", "v")                                   # LHS_T / RHS_T constexpr = index here


@triton.jit
def _rows(src_ptr, dst_ptr, e, e_mask, T: tl.constexpr):
    """The operand row of each edge: its source (T=0), the edge itself (T=1) or its destination (T=2)."""
    if T == 0:
        return tl.load(src_ptr + e, mask=e_mask, other=0).to(tl.int64)
    elif T == 2:
        return tl.load(dst_ptr + e, mask=e_mask, other=0).to(tl.int64)
    else:
        return e


@triton.jit
def _offsets(off_ptr, f, f_mask, BCAST: tl.constexpr):
    if BCAST:
        return tl.load(off_ptr + f, mask=f_mask, other=0).to(tl.int64)
    else:
        return f.to(tl.int64)


@triton.jit(do_not_specialize=["num_edges"])  # per graph (each minibatch's): one variant
def _sddmm_kernel(src_ptr, dst_ptr, lhs_ptr, rhs_ptr, loff_ptr, roff_ptr, out_ptr,
                  num_edges: tl.int64, out_len, lhs_len, rhs_len,
                  OP: tl.constexpr, LHS_T: tl.constexpr, RHS_T: tl.constexpr, BCAST: tl.constexpr,
                  BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    acc_dtype = tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32
    e = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    e_mask = e < num_edges
    f_mask = f < out_len
    m2 = e_mask[:, None] & f_mask[None, :]
    if OP != 5:  # every op but copy_rhs reads lhs
        lrow = _rows(src_ptr, dst_ptr, e, e_mask, LHS_T)
        lo = _offsets(loff_ptr, f, f_mask, BCAST)
        x = tl.load(lhs_ptr + lrow[:, None] * lhs_len + lo[None, :], mask=m2, other=0.0).to(acc_dtype)
    if OP != 4:  # every op but copy_lhs reads rhs
        rrow = _rows(src_ptr, dst_ptr, e, e_mask, RHS_T)
        ro = _offsets(roff_ptr, f, f_mask, BCAST)
        y = tl.load(rhs_ptr + rrow[:, None] * rhs_len + ro[None, :], mask=m2, other=1.0).to(acc_dtype)
    if OP == 0:
        z = x + y
    elif OP == 1:
        z = x - y
    elif OP == 2:
        z = x * y
    elif OP == 3:
        z = x / y
    elif OP == 4:
        z = x
    else:
        z = y
    tl.store(out_ptr + e[:, None] * out_len + f[None, :], z.to(out_ptr.dtype.element_ty), mask=m2)


@triton.jit(do_not_specialize=["num_edges"])
def _sddmm_dot_kernel(src_ptr, dst_ptr, lhs_ptr, rhs_ptr, loff_ptr, roff_ptr, out_ptr,
                      num_edges: tl.int64, out_len, lhs_len, rhs_len, red_len,
                      LHS_T: tl.constexpr, RHS_T: tl.constexpr, BCAST: tl.constexpr,
                      BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    """out[e, f] = sum over k < red_len of lhs[row_l(e), loff[f] + k] * rhs[row_r(e), roff[f] + k]."""
    acc_dtype = tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32
    e = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    f = tl.program_id(1).to(tl.int64)
    e_mask = e < num_edges
    lrow = _rows(src_ptr, dst_ptr, e, e_mask, LHS_T)
    rrow = _rows(src_ptr, dst_ptr, e, e_mask, RHS_T)
    if BCAST:
        lo = tl.load(loff_ptr + f).to(tl.int64)
        ro = tl.load(roff_ptr + f).to(tl.int64)
    else:
        lo = f * red_len
        ro = f * red_len
    lbase = lrow * lhs_len + lo
    rbase = rrow * rhs_len + ro
    acc = tl.zeros((BLOCK_E,), acc_dtype)
    for k0 in range(0, red_len, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        m2 = e_mask[:, None] & (k < red_len)[None, :]
        x = tl.load(lhs_ptr + lbase[:, None] + k[None, :], mask=m2, other=0.0).to(acc_dtype)
        y = tl.load(rhs_ptr + rbase[:, None] + k[None, :], mask=m2, other=0.0).to(acc_dtype)
        acc += tl.sum(x * y, axis=1)
    tl.store(out_ptr + e * out_len + f, acc.to(out_ptr.dtype.element_ty), mask=e_mask)


@triton.jit
def _segment_sum_kernel(indptr_ptr, eids_ptr, val_ptr, out_ptr, width,
                        BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    """out[r, f] = sum over the entries k of CSR row r of val[eids[k], f] (edge-id order values)."""
    acc_dtype = tl.float64 if val_ptr.dtype.element_ty == tl.float64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = f < width
    start = tl.load(indptr_ptr + r)
    end = tl.load(indptr_ptr + r + 1)
    acc = tl.zeros((BLOCK_F,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        k = k0 + tl.arange(0, BLOCK_E)
        k_mask = k < end
        eid = tl.load(eids_ptr + k, mask=k_mask, other=0).to(tl.int64)
        x = tl.load(val_ptr + eid[:, None] * width + f[None, :], mask=k_mask[:, None] & f_mask[None, :], other=0.0)
        acc += tl.sum(x.to(acc_dtype), axis=0)
    tl.store(out_ptr + r * width + f, acc.to(out_ptr.dtype.element_ty), mask=f_mask)


# ------------------------------------------------------------------ launch configuration
# (BLOCK_E, BLOCK_F): 1024-2048 elements per program, wide features get wide tiles (64 x 32 fp16
# tiles on 4 warps spilled 32 bytes with int64 ids in the AOT table).
TILES = ((256, 4), (32, 32), (16, 128))
DOT_TILES = ((128, 8), (32, 32))   # (BLOCK_E, BLOCK_K)
SEGMENT_TILES = ((32, 16), (16, 64))  # (BLOCK_E, BLOCK_F)
NUM_WARPS = 4


def tile(out_len: int) -> tuple[int, int]:
    return TILES[0] if out_len <= 4 else TILES[1] if out_len <= 32 else TILES[2]


def dot_tile(red_len: int) -> tuple[int, int]:
    return DOT_TILES[0] if red_len <= 8 else DOT_TILES[1]


def segment_tile(width: int) -> tuple[int, int]:
    return SEGMENT_TILES[0] if width <= 16 else SEGMENT_TILES[1]


# ------------------------------------------------------------------ AOT specialisations
_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")
# (op, lhs target, rhs target, BCAST, tile): every op, target and tile at least once.
_ELEMENTWISE = (("add", "u", "v", False, TILES[0]), ("sub", "v", "u", True, TILES[1]),
                ("mul", "u", "e", True, TILES[2]), ("div", "e", "v", False, TILES[1]),
                ("copy_lhs", "u", "v", False, TILES[1]), ("copy_rhs", "u", "e", False, TILES[2]))
# the backward of mul and dot (core/sddmm/function.py: the edge-shaped gradient times the other operand, lhs
# target e, broadcast where the forward's operands broadcast or the dot reduced), for the report's
# u_mul_e [5, 8] x [1, 8] (tile 2), u_dot_v [2, 8] x [2, 8] and e_dot_u [2, 16] x [1, 16] (tile 1)
_GRAD_MUL = (("mul", "e", "u", False, TILES[2]), ("mul", "e", "e", True, TILES[2]),
             ("mul", "e", "u", True, TILES[1]), ("mul", "e", "e", True, TILES[1]), ("mul", "e", "v", True, TILES[1]))
# the last row: head-wise u_mul_e's weight gradient, x[u] . grad[v] per head over more than 8 features
# (core/headwise/function.py _weight_grad; the report's H=4 D=10)
_DOT = (("u", "v", False, DOT_TILES[0]), ("e", "u", True, DOT_TILES[1]), ("u", "v", False, DOT_TILES[1]))


def _operands(t: str, idx: str) -> dict:
    return {"src_ptr": f"*{idx}", "dst_ptr": f"*{idx}", "lhs_ptr": f"*{t}", "rhs_ptr": f"*{t}",
            "loff_ptr": "*i32", "roff_ptr": "*i32", "out_ptr": f"*{t}",
            "num_edges": "i64", "out_len": "i32", "lhs_len": "i32", "rhs_len": "i32"}


def _elementwise(t, idx, op, lt, rt, bcast, blocks) -> Specialisation:
    consts = {"OP": OPS.index(op), "LHS_T": TARGETS.index(lt), "RHS_T": TARGETS.index(rt), "BCAST": bcast,
              "BLOCK_E": blocks[0], "BLOCK_F": blocks[1]}
    return Specialisation("sddmm", "_sddmm_kernel", {**_operands(t, idx), **{k: "constexpr" for k in consts}},
                          consts, num_warps=NUM_WARPS)


def _dot(t, idx, lt, rt, bcast, blocks) -> Specialisation:
    consts = {"LHS_T": TARGETS.index(lt), "RHS_T": TARGETS.index(rt), "BCAST": bcast,
              "BLOCK_E": blocks[0], "BLOCK_K": blocks[1]}
    sig = {**_operands(t, idx), "red_len": "i32", **{k: "constexpr" for k in consts}}
    return Specialisation("sddmm", "_sddmm_dot_kernel", sig, consts, num_warps=NUM_WARPS)


def _segment(t, idx, blocks) -> Specialisation:
    consts = {"BLOCK_E": blocks[0], "BLOCK_F": blocks[1]}
    sig = {"indptr_ptr": "*i64", "eids_ptr": f"*{idx}", "val_ptr": f"*{t}", "out_ptr": f"*{t}", "width": "i32",
           **{k: "constexpr" for k in consts}}
    return Specialisation("sddmm", "_segment_sum_kernel", sig, consts, num_warps=NUM_WARPS)


SPECIALISATIONS = (
    [_elementwise(t, idx, *v) for t in _DT for idx in _IDX for v in _ELEMENTWISE + _GRAD_MUL]
    + [_dot(t, idx, *v) for t in _DT for idx in _IDX for v in _DOT]
    + [_segment(t, idx, b) for t in _DT for idx in _IDX for b in SEGMENT_TILES]
)
