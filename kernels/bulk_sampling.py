"""Matrix-based bulk sampling kernels (Tripathy, Yelick, Buluc, MLSys'24): row-wise inverse
transform sampling (ITS) and the extraction of the sampled entries into blocks.

``_its_rows_kernel`` reproduces the specification in ``dgl_accel/core/sampling/bulk/its.py`` bit for
bit.  One program serves ``BLOCK_R`` rows, side by side in a [BLOCK_R, S_PAD] tile of picks:

* draw t of a row is word ``t % 4`` of ``philox4x32(key_row, (label_row << 24) + t // 4)``
  (``tl.randint4x`` with a per-row key: one Philox evaluation serves four draws);
* uniform rows: ``pick = start + (r * deg) >> 32``; weighted rows: ``x = before + floor((r * 2^-32)
  * total)`` and a binary search in the row's inclusive prefix sums (exact integer-valued float64,
  so the GPU, the interpreter and the CPU agree on every threshold) for the first entry above x;
* without replacement a pick already in the row's tile is rejected and drawing continues until
  every row of the program holds ``s`` distinct picks (rows handed to the kernel have more than
  ``s`` positive entries); with replacement draws ``0 .. s-1`` are stored in draw order.

The row prefix sums come from one ``torch.cumsum`` over all of P's weights (exact integers, so the
scan order does not matter); the kernel only reads them, so a row's prefix never has to fit on chip.

``_compact_kernel`` writes the picks of each row contiguously (CSR order); ``_relabel_kernel``
gathers each pick's column (source id) and maps it to its block-local id (dst nodes first, then new
sources in ascending id) from per-minibatch tables.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit(do_not_specialize=["n_rows", "s", "max_draws", "search_iters"])  # per call: one variant
def _its_rows_kernel(prefix_ptr, start_ptr, deg_ptr, key_ptr, label_ptr, before_ptr, total_ptr, out_ptr,
                     n_rows: tl.int64, s: tl.int64, max_draws: tl.int64, search_iters: tl.int64,
                     UNIFORM: tl.constexpr, REPLACE: tl.constexpr, BLOCK_R: tl.constexpr, S_PAD: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < n_rows
    st = tl.load(start_ptr + r, mask=rmask, other=0)
    d = tl.load(deg_ptr + r, mask=rmask, other=0)
    key = tl.load(key_ptr + r, mask=rmask, other=0)
    base = tl.load(label_ptr + r, mask=rmask, other=0) << 24
    if UNIFORM:
        before = tl.zeros((BLOCK_R,), tl.float64)
        total = tl.zeros((BLOCK_R,), tl.float64)
    else:
        before = tl.load(before_ptr + r, mask=rmask, other=0.0)
        total = tl.load(total_ptr + r, mask=rmask, other=0.0)
    cols = tl.arange(0, S_PAD)
    # picks as row-local int32 offsets (half the registers of positions); -1 = empty slot
    picks = tl.full((BLOCK_R, S_PAD), -1, tl.int32)
    cnt = tl.zeros((BLOCK_R,), tl.int32)
    need = tl.where(rmask, s, 0).to(tl.int32)
    t = 0
    if REPLACE:
        loop_end = s
    else:
        loop_end = max_draws
    while (t < loop_end) & (tl.max(need - cnt, axis=0) > 0):
        r0, r1, r2, r3 = tl.randint4x(key, base + (t >> 2))
        for q in range(4):  # a runtime loop: one copy of the search code, not four
            rq = tl.where(q == 0, r0, tl.where(q == 1, r1, tl.where(q == 2, r2, r3)))
            rq = rq.to(tl.int64) & 0xFFFFFFFF  # the uint32 draw as a non-negative int64
            if UNIFORM:
                p = (rq * d) >> 32
            else:
                u = rq.to(tl.float64) * 2.3283064365386963e-10  # 2^-32, exact
                x = before + (u * total).to(tl.int64).to(tl.float64)  # floor: u * total >= 0, < 2^53
                lo = st
                hi = st + d - 1
                for _ in range(search_iters):  # first position whose inclusive prefix exceeds x
                    open_ = lo < hi
                    mid = (lo + hi) >> 1
                    g = tl.load(prefix_ptr + mid, mask=rmask & open_, other=0.0)
                    right = g > x
                    hi = tl.where(open_ & right, mid, hi)
                    lo = tl.where(open_ & (~right), mid + 1, lo)
                p = lo - st
            p = p.to(tl.int32)
            live = cnt < need
            if REPLACE:
                take = live
            else:
                seen = tl.max(tl.where(picks == p[:, None], 1, 0), axis=1) > 0
                take = live & (~seen)
            picks = tl.where((cols[None, :] == cnt[:, None]) & take[:, None], p[:, None], picks)
            cnt += take.to(tl.int32)
        t += 4
    out = tl.where(picks >= 0, st[:, None] + picks.to(tl.int64), -1)
    tl.store(out_ptr + r[:, None] * S_PAD + cols[None, :], out, mask=rmask[:, None])


@triton.jit(do_not_specialize=["n_rows"])
def _compact_kernel(picks_ptr, offs_ptr, pos_out_ptr, n_rows: tl.int64, S_PAD: tl.constexpr, BLOCK_R: tl.constexpr):
    """Row i of the padded picks -> positions offs[i] .. offs[i+1]-1 of the flat (CSR) output."""
    i = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    imask = i < n_rows
    o = tl.load(offs_ptr + i, mask=imask, other=0)
    c = tl.load(offs_ptr + i + 1, mask=imask, other=0) - o
    j = tl.arange(0, S_PAD)
    m = imask[:, None] & (j[None, :] < c[:, None])
    p = tl.load(picks_ptr + i[:, None] * S_PAD + j[None, :], mask=m, other=0)
    tl.store(pos_out_ptr + o[:, None] + j[None, :], p, mask=m)


@triton.jit(do_not_specialize=["n_edges", "num_dst"])
def _relabel_kernel(pos_ptr, src_tab_ptr, dstpos_ptr, newrank_ptr, src_out_ptr, local_out_ptr, n_edges: tl.int64,
                    num_dst: tl.int64,
                    BLOCK: tl.constexpr):
    """Sampled entry -> its column (source id) and block-local source id: a dst node keeps its dst
    position, a new source gets num_dst + its rank among the new sources (ascending id)."""
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = e < n_edges
    u = tl.load(src_tab_ptr + tl.load(pos_ptr + e, mask=m, other=0), mask=m, other=0)
    dp = tl.load(dstpos_ptr + u, mask=m, other=-1)
    nr = tl.load(newrank_ptr + u, mask=m, other=0)
    tl.store(src_out_ptr + e, u, mask=m)
    tl.store(local_out_ptr + e, tl.where(dp >= 0, dp, num_dst + nr), mask=m)


ITS_TILE = 256        # picks per program: BLOCK_R rows x S_PAD slots, 2 per thread at 4 warps
COMPACT_BLOCK_R = 32
RELABEL_BLOCK = 1024


def s_pad(s: int) -> int:
    return max(2, 1 << max(0, int(s - 1).bit_length()))


def its_num_warps(uniform: bool) -> int:
    """4 warps for uniform rows; weighted rows (binary search state per draw) spill at 4 warps on
    sm_80/sm_90 and fit at 8 (measured with ``python -m dgl_accel.kernels.check``)."""
    return 4 if uniform else 8


def its_block_r(S: int) -> int:
    """Rows per program for S_PAD = S (their picks side by side in one tile)."""
    return max(1, ITS_TILE // S)


_ITS_SIG = {"prefix_ptr": "*fp64", "start_ptr": "*i64", "deg_ptr": "*i64", "key_ptr": "*i64", "label_ptr": "*i64",
            "before_ptr": "*fp64", "total_ptr": "*fp64", "out_ptr": "*i64", "n_rows": "i64", "s": "i64",
            "max_draws": "i64", "search_iters": "i64", "UNIFORM": "constexpr", "REPLACE": "constexpr",
            "BLOCK_R": "constexpr", "S_PAD": "constexpr"}

SPECIALISATIONS = [
    Specialisation("bulk_sampling", "_its_rows_kernel", _ITS_SIG,
                   {"UNIFORM": uni, "REPLACE": rep, "BLOCK_R": ITS_TILE // sp, "S_PAD": sp},
                   num_warps=its_num_warps(uni))
    for uni in (True, False) for rep in (True, False) for sp in (16, 64, 256)
] + [
    Specialisation("bulk_sampling", "_compact_kernel",
                   {"picks_ptr": "*i64", "offs_ptr": "*i64", "pos_out_ptr": "*i64", "n_rows": "i64",
                    "S_PAD": "constexpr", "BLOCK_R": "constexpr"},
                   {"S_PAD": sp, "BLOCK_R": COMPACT_BLOCK_R}, num_warps=4)
    for sp in (16, 64, 256)  # every S_PAD of _its_rows_kernel: compact_triton packs its picks (256: s=200)
] + [
    Specialisation("bulk_sampling", "_relabel_kernel",
                   {"pos_ptr": "*i64", "src_tab_ptr": "*i64", "dstpos_ptr": "*i64", "newrank_ptr": "*i64",
                    "src_out_ptr": "*i64", "local_out_ptr": "*i64", "n_edges": "i64", "num_dst": "i64",
                    "BLOCK": "constexpr"},
                   {"BLOCK": RELABEL_BLOCK}, num_warps=4)
]
