"""Max/min aggregation over CSR rows with the arg of every result (gspmm's reduce ``max``/``min``).

A program owns one row r of the in-CSR (a destination) and a tile of BLOCK_F features; it walks the
row's entries in chunks of BLOCK_E.  Entry k (CSR position) carries the message

* OP == 0 (copy):  x[col_k, f]           (copy_u: col = indices[k]; copy_e: the launcher passes eids)
* OP == 1 (mul):   x[col_k, f] * w[eids[k], f or 0]
* OP == 2 (add):   x[col_k, f] + w[eids[k], f or 0]

computed in fp32 (fp64 for fp64 inputs).  ``negate`` turns min into max (min(m) = -max(-m), exact
in floating point), so one kernel serves both.  Per feature the result is the largest message and
``arg[r, f]`` = the FIRST CSR position that carries it (ties resolved in CSR order, whatever the
chunk size); rows without entries store ``fill`` and arg -1.  Every chunk's maximum merges into the
running one only when strictly larger, so an earlier position keeps a tie; the first chunk is always
taken, so a row whose messages are all -inf still records a real arg.  NaN messages: unspecified.
Row pointers, positions and all address arithmetic are int64.
"""
import triton
import triton.language as tl

from .registry import Specialisation

OPS = {"copy": 0, "mul": 1, "add": 2}
NUM_WARPS = 4
# (BLOCK_E, BLOCK_F): narrow features take more entries per chunk; each tile is 512 values.
TILES = ((32, 16), (8, 64))


def feature_tile(num_feat: int) -> tuple[int, int]:
    """(BLOCK_E, BLOCK_F) for ``num_feat`` features per row."""
    return TILES[0] if num_feat <= TILES[0][1] else TILES[1]


@triton.jit
def row_tile(indptr_ptr, num_feat, BLOCK_F: tl.constexpr):
    """(row r, its BLOCK_F features f and their mask, r's entries [start, end)) of this program: grid
    (rows, feature tiles).  Shared with ``headwise.py``."""
    r = tl.program_id(0).to(tl.int64)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = f < num_feat
    start = tl.load(indptr_ptr + r)
    end = tl.load(indptr_ptr + r + 1)
    return r, f, f_mask, start, end


@triton.jit
def gather_rows(cols_ptr, x_ptr, k0, end, f, f_mask, num_feat, BLOCK_E: tl.constexpr):
    """(positions k of the chunk of BLOCK_E entries from k0, their mask, the tile's mask,
    x[cols[k], f] in the accumulation dtype: fp32, fp64 for fp64 x).  Shared with ``headwise.py``."""
    acc_dtype = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    k = k0 + tl.arange(0, BLOCK_E)
    e_mask = k < end
    m2 = e_mask[:, None] & f_mask[None, :]
    col = tl.load(cols_ptr + k, mask=e_mask, other=0).to(tl.int64)
    x = tl.load(x_ptr + col[:, None] * num_feat + f[None, :], mask=m2, other=0.0).to(acc_dtype)
    return k, e_mask, m2, x


@triton.jit
def _extrema_fwd_kernel(indptr_ptr, cols_ptr, eids_ptr, x_ptr, w_ptr, out_ptr, arg_ptr, num_feat, w_width,
                        negate, fill, OP: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    acc_dtype = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    r, f, f_mask, start, end = row_tile(indptr_ptr, num_feat, BLOCK_F)
    f_w = tl.where(w_width == 1, 0, f)  # one weight per edge, or one per feature
    best = tl.full((BLOCK_F,), float("-inf"), acc_dtype)
    arg = tl.full((BLOCK_F,), -1, tl.int64)
    for k0 in range(start, end, BLOCK_E):
        k, e_mask, m2, x = gather_rows(cols_ptr, x_ptr, k0, end, f, f_mask, num_feat, BLOCK_E)
        if OP != 0:
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            w = tl.load(w_ptr + eid[:, None] * w_width + f_w[None, :], mask=m2, other=0.0).to(acc_dtype)
            if OP == 1:
                x = x * w
            else:
                x = x + w
        x = tl.where(negate != 0, -x, x)
        x = tl.where(m2, x, float("-inf"))
        cmax = tl.max(x, axis=0)
        # the first position of the chunk that carries its maximum (end: none, e.g. NaN messages)
        ck = tl.min(tl.where(m2 & (x == cmax[None, :]), k[:, None], end), axis=0)
        take = ((cmax > best) | (arg < 0)) & (ck < end)
        best = tl.where(take, cmax, best)
        arg = tl.where(take, ck, arg)
    val = tl.where(negate != 0, -best, best)
    val = tl.where(arg >= 0, val, fill)
    offs = r * num_feat + f
    tl.store(out_ptr + offs, val.to(out_ptr.dtype.element_ty), mask=f_mask)
    tl.store(arg_ptr + offs, arg, mask=f_mask)


_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")


def _spec(t: str, idx: str, op: int, tile: tuple[int, int]) -> Specialisation:
    sig = {"indptr_ptr": "*i64", "cols_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "x_ptr": f"*{t}", "w_ptr": f"*{t}",
           "out_ptr": f"*{t}", "arg_ptr": "*i64", "num_feat": "i32", "w_width": "i32", "negate": "i32",
           "fill": "fp32", "OP": "constexpr", "BLOCK_E": "constexpr", "BLOCK_F": "constexpr"}
    return Specialisation("extrema", "_extrema_fwd_kernel", sig,
                          {"OP": op, "BLOCK_E": tile[0], "BLOCK_F": tile[1]}, num_warps=NUM_WARPS)


SPECIALISATIONS = [_spec(t, idx, op, tile) for t in _DT for idx in _IDX for op in OPS.values() for tile in TILES]
