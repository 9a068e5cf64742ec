"""Random-walk kernels: DeepWalk / weighted / restart walks and node2vec, one walk per lane.

They reproduce the CPU path of ``dgl_accel/core/sampling/walks*.py`` decision for decision: the same
Philox counters (``offset = (walk_id << 32) | block``, ``tl.randint4x`` word k = lane k, see that
module's docstring), the same integer pick ``(word * n) >> 32``, the same float64 targets searched
in the same weight table (``_Weights.key``: row + per-row cdf), and node2vec's rejection sampler
with the same envelope tables (``_n2v_envelope``), thresholds and exact fallback.  The neighbour
test "is (t, x) an edge" is a binary search in t's CSR row (rows are sorted by destination, so it
answers exactly what the CPU path's edge hash set answers).

* ``_random_walk_kernel``: BLOCK_W walks per program, a loop over steps; K = 1 word per step, or
  2 with restart (word j = s*K + k at block j // 4, lane j % 4; k = 1 terminates the walk iff
  ``word < thresh[s]``); a walk stops at a dead end (degree 0) and its trace stays -1.
* ``_node2vec_step_kernel`` (one launch per step): step 0 first-order from block 0 lane 0; step s >= 1 runs up to
  MAX_TRIALS rejection trials (trial t: block ``(s << 12) | (t >> 1)``, lanes 2*(t&1), 2*(t&1)+1),
  then the exact fallback (block ``(s << 12) | 4095`` lane 0) for walks still rejected.
* ``_mdrw_kernel``: GraphSAINT's frontier sampler (``multi_dimensional_random_walk``), one
  program per instance; step s uses block ``(1 << 31) | s``, lane 0 (slot), lane 1 (neighbour).
"""
import triton
import triton.language as tl

from .registry import Specialisation

_INV_TWO32 = tl.constexpr(2.3283064365386963e-10)  # 2^-32, exact


@triton.jit
def _word(r0, r1, r2, r3, lane):
    """Lane ``lane`` (scalar or per-walk, 0..3) of a Philox block as a non-negative int64."""
    r = tl.where(lane == 0, r0, tl.where(lane == 1, r1, tl.where(lane == 2, r2, r3)))
    return r.to(tl.int64) & 0xFFFFFFFF


@triton.jit
def _upper_bound(key_ptr, lo, hi, target, mask, iters):
    """First position in [lo, hi) whose key exceeds ``target`` (``hi`` if none): the in-row part of
    ``torch.searchsorted(key, target, right=True)`` (keys of earlier rows are <= target)."""
    for _ in range(iters):
        open_ = lo < hi
        mid = (lo + hi) >> 1
        k = tl.load(key_ptr + mid, mask=mask & open_, other=0.0)
        right = k > target
        hi = tl.where(open_ & right, mid, hi)
        lo = tl.where(open_ & (~right), mid + 1, lo)
    return lo


@triton.jit
def _first_order(key_ptr, cur, st, deg, word, mask, search_iters, WEIGHTED: tl.constexpr):
    """CSR position of the out-edge of ``cur`` picked by ``word`` (``_choose`` in walks.py)."""
    if WEIGHTED:
        target = cur.to(tl.float64) + word.to(tl.float64) * _INV_TWO32
        pos = _upper_bound(key_ptr, st, st + deg, target, mask, search_iters)
        return tl.minimum(pos, st + deg - 1)
    else:
        return st + ((word * deg) >> 32)


@triton.jit(do_not_specialize=["num_walks", "seed"])  # per call: one variant
def _random_walk_kernel(nodes_ptr, start_ptr, deg_ptr, indices_ptr, eids_ptr, key_ptr, thresh_ptr,
                        trace_ptr, eout_ptr, num_walks: tl.int64, length, seed: tl.int64, search_iters,
                        WEIGHTED: tl.constexpr, RESTART: tl.constexpr, RETURN_EIDS: tl.constexpr,
                        BLOCK_W: tl.constexpr):
    w = tl.program_id(0).to(tl.int64) * BLOCK_W + tl.arange(0, BLOCK_W)
    alive = w < num_walks
    cur = tl.load(nodes_ptr + w, mask=alive, other=0)
    row = w * (length + 1)  # trace row start; column 0 (the start node) is written by the launcher
    erow = w * length
    for s in range(length):
        if RESTART:
            j = s * 2
        else:
            j = s
        r0, r1, r2, r3 = tl.randint4x(seed, (w << 32) | (j >> 2))
        cw = _word(r0, r1, r2, r3, j & 3)
        if RESTART:
            # j is even, so word j + 1 sits in the same block; terminate iff word < thresh[s]
            # (thresh 0: never, 2^32: always).
            alive = alive & (_word(r0, r1, r2, r3, (j + 1) & 3) >= tl.load(thresh_ptr + s))
        deg = tl.load(deg_ptr + cur, mask=alive, other=0)
        alive = alive & (deg > 0)
        st = tl.load(start_ptr + cur, mask=alive, other=0)
        e = _first_order(key_ptr, cur, st, deg, cw, alive, search_iters, WEIGHTED)
        cur = tl.load(indices_ptr + e, mask=alive, other=0)
        tl.store(trace_ptr + row + s + 1, cur, mask=alive)
        if RETURN_EIDS:
            tl.store(eout_ptr + erow + s, tl.load(eids_ptr + e, mask=alive, other=0), mask=alive)


@triton.jit
def _is_edge(start_ptr, rowdeg_ptr, indices_ptr, a, b, mask, nb_iters):
    """Whether a -> b is an edge: lower bound of b in a's (sorted) CSR row."""
    lo = tl.load(start_ptr + a, mask=mask, other=0)
    end = lo + tl.load(rowdeg_ptr + a, mask=mask, other=0)
    hi = end
    for _ in range(nb_iters):
        open_ = lo < hi
        mid = (lo + hi) >> 1
        v = tl.load(indices_ptr + mid, mask=mask & open_, other=0)
        less = v < b
        lo = tl.where(open_ & less, mid + 1, lo)
        hi = tl.where(open_ & (~less), mid, hi)
    hit = mask & (lo < end)
    return hit & (tl.load(indices_ptr + lo, mask=hit, other=-1) == b)


@triton.jit(do_not_specialize=["num_walks", "s", "seed"])  # one variant for every step and call
def _node2vec_step_kernel(trace_ptr, pos_ptr, start_ptr, deg_ptr, rowdeg_ptr, indices_ptr,
                          key_ptr, w_ptr, scale_ptr, alt_ptr, main_ptr,
                          num_walks: tl.int64, length, s: tl.int64, seed: tl.int64, search_iters, nb_iters, max_deg,
                          thr_t, thr_lo, thr_hi, nb_accepts, fparams_ptr,
                          WEIGHTED: tl.constexpr, BLOCK_W: tl.constexpr,
                          MAX_TRIALS: tl.constexpr):
    # One launch per step s (a walk's state lives in global memory between launches: trace
    # columns s - 1 and s, and pos[w, s - 1] = the CSR position of its last edge; the launcher
    # turns the positions pos [W, length] into edge ids).  A kernel looping over
    # the steps keeps that state and the loop-invariant addresses live across the trial loop,
    # which made ptxas spill.
    s64 = s.to(tl.int64)  # small ints arrive as i32: the counter arithmetic needs 64 bits
    w = tl.program_id(0).to(tl.int64) * BLOCK_W + tl.arange(0, BLOCK_W)
    row = trace_ptr + w * (length + 1) + s
    cur = tl.load(row, mask=w < num_walks, other=-1)
    alive = cur >= 0  # -1: the walk ended at an earlier dead end
    cur = tl.where(alive, cur, 0)
    deg = tl.load(deg_ptr + cur, mask=alive, other=0)
    alive = alive & (deg > 0)
    st = tl.load(start_ptr + cur, mask=alive, other=0)
    if s == 0:  # first-order first step: block 0, lane 0
        r0, r1, r2, r3 = tl.randint4x(seed, w << 32)
        e = _first_order(key_ptr, cur, st, deg, r0.to(tl.int64) & 0xFFFFFFFF, alive, search_iters, WEIGHTED)
        nxt = tl.load(indices_ptr + e, mask=alive, other=0)
    else:
        prev = tl.load(row - 1, mask=alive, other=0)
        pe = tl.load(pos_ptr + w * length + s - 1, mask=alive, other=0)
        sc = tl.load(scale_ptr + pe, mask=alive, other=0.0)
        alt = tl.load(alt_ptr + pe, mask=alive, other=0)
        if WEIGHTED:
            mn = tl.load(main_ptr + cur, mask=alive, other=1.0)
        else:
            # 1/c (then 1/p, 1/q) as float64 from memory: a Python float argument would be fp32 on
            # GPUs; each is loaded where it is used, to keep registers free in the trial loop
            inv_c = tl.load(fparams_ptr)
        e = tl.zeros((BLOCK_W,), tl.int64)
        nxt = tl.zeros((BLOCK_W,), tl.int64)
        pending = alive
        tp = 0
        while (tp < MAX_TRIALS // 2) & (tl.max(pending.to(tl.int32), axis=0) > 0):
            r0, r1, r2, r3 = tl.randint4x(seed, (w << 32) | ((s64 << 12) | tp))
            for h in tl.static_range(2):  # trial t = 2 * tp + h: lanes 2h (proposal), 2h + 1
                if h == 0:
                    wv = r0.to(tl.int64) & 0xFFFFFFFF
                    uv = r1.to(tl.int64) & 0xFFFFFFFF
                else:
                    wv = r2.to(tl.int64) & 0xFFFFFFFF
                    uv = r3.to(tl.int64) & 0xFFFFFFFF
                r = wv.to(tl.float64) * sc
                if WEIGHTED:
                    frac = tl.minimum(r / mn, 1.0 - 9.094947017729282e-13)  # 1 - 2^-40
                    pos = _upper_bound(key_ptr, st, st + deg, cur.to(tl.float64) + frac, pending,
                                       search_iters)
                    # row end: a live walk's weighted degree is its full degree
                    cand = tl.where(r < mn, tl.minimum(pos, st + deg - 1), alt)
                else:
                    jj = (r * inv_c).to(tl.int64)
                    cand = tl.where(jj < deg, st + jj, alt)
                x = tl.load(indices_ptr + cand, mask=pending, other=-1)
                is_t = x == prev
                acc = tl.where(is_t, uv < thr_t, uv < thr_lo)
                need = pending & (~is_t) & (uv >= thr_lo) & (uv < thr_hi)
                nb = _is_edge(start_ptr, rowdeg_ptr, indices_ptr, prev, x, need, nb_iters)
                acc = tl.where(need, nb == (nb_accepts != 0), acc)
                take = pending & acc
                e = tl.where(take, cand, e)
                nxt = tl.where(take, x, nxt)
                pending = pending & (~acc)
            tp += 1
        if tl.max(pending.to(tl.int32), axis=0) > 0:
            # Exact fallback: weigh cur's out-edges by bias (* weight), invert the cdf with u.
            rd = tl.load(rowdeg_ptr + cur, mask=pending, other=0)
            r0, r1, r2, r3 = tl.randint4x(seed, (w << 32) | ((s64 << 12) | 4095))
            u = (r0.to(tl.int64) & 0xFFFFFFFF).to(tl.float64) * _INV_TWO32
            inv_p = tl.load(fparams_ptr + 1)
            inv_q = tl.load(fparams_ptr + 2)
            tot = tl.zeros((BLOCK_W,), tl.float64)
            for k in range(max_deg):
                m = pending & (k < rd)
                xk = tl.load(indices_ptr + st + k, mask=m, other=-1)
                nbk = _is_edge(start_ptr, rowdeg_ptr, indices_ptr, prev, xk, m & (xk != prev), nb_iters)
                b = tl.where(xk == prev, inv_p, tl.where(nbk, 1.0, inv_q))
                if WEIGHTED:
                    b = b * tl.load(w_ptr + st + k, mask=m, other=0.0)
                tot += tl.where(m, b, 0.0)
            local = tl.zeros((BLOCK_W,), tl.float64)
            kk = rd - 1
            found = ~pending
            for k in range(max_deg):
                m = pending & (k < rd)
                xk = tl.load(indices_ptr + st + k, mask=m, other=-1)
                nbk = _is_edge(start_ptr, rowdeg_ptr, indices_ptr, prev, xk, m & (xk != prev), nb_iters)
                b = tl.where(xk == prev, inv_p, tl.where(nbk, 1.0, inv_q))
                if WEIGHTED:
                    b = b * tl.load(w_ptr + st + k, mask=m, other=0.0)
                local += tl.where(m, b, 0.0)
                # tot > 0 on pending lanes (bias > 0, row weight sum > 0); 1 keeps the rest finite
                keyk = tl.where(local >= tot, 1.0, local / tl.where(tot > 0, tot, 1.0))
                hit = m & (~found) & (keyk > u)
                kk = tl.where(hit, k, kk)
                found = found | hit
            e = tl.where(pending, st + kk, e)
            nxt = tl.where(pending, tl.load(indices_ptr + st + kk, mask=pending, other=0), nxt)
    tl.store(row + 1, nxt, mask=alive)
    tl.store(pos_ptr + w * length + s, e, mask=alive)


@triton.jit(do_not_specialize=["m", "seed"])  # per call: one variant
def _mdrw_kernel(frontier_ptr, fdeg_ptr, start_ptr, deg_ptr, indices_ptr, eids_ptr,
                 nodes_out_ptr, src_ptr, dst_ptr, eid_ptr, m: tl.int64, steps, walk_budget, seed: tl.int64,
                 BLOCK_M: tl.constexpr):
    """One program per instance of the frontier sampler.  The instance's frontier and its
    out-degrees live in scratch rows [m] (global memory, so any m fits); per step the program
    scans them in BLOCK_M chunks: the total degree, then the popped slot = number of inclusive
    prefix sums <= u (``searchsorted(cum, u, right=True)``; degrees are integers, so the sums
    are exact in any order and equal the CPU path's float64 cumsum)."""
    inst = tl.program_id(0).to(tl.int64)
    row = inst * m
    offs = tl.arange(0, BLOCK_M)
    for s in range(steps):
        tot = tl.zeros((), tl.int64)
        for c in range(0, m, BLOCK_M):
            fd = tl.load(fdeg_ptr + row + c + offs, mask=c + offs < m, other=0)
            tot += tl.sum(fd, axis=0)
        if tot > 0:  # an instance whose frontier has no out-edges stops (its outputs stay -1)
            # (inst << 32) | (1 << 31) | s, built in int64 (s is an i32 loop index)
            r0, r1, r2, r3 = tl.randint4x(seed, (inst << 32) + 2147483648 + s)
            u = (r0.to(tl.int64) & 0xFFFFFFFF).to(tl.float64) * _INV_TWO32 * tot.to(tl.float64)
            cnt = tl.zeros((), tl.int64)
            base = tl.zeros((), tl.int64)
            for c in range(0, m, BLOCK_M):
                ok = c + offs < m
                fd = tl.load(fdeg_ptr + row + c + offs, mask=ok, other=0)
                cs = tl.cumsum(fd, 0) + base
                cnt += tl.sum((ok & (cs.to(tl.float64) <= u)).to(tl.int64), axis=0)
                base += tl.sum(fd, axis=0)
            slot = tl.minimum(cnt, m - 1)
            src_v = tl.load(frontier_ptr + row + slot)
            e = tl.load(start_ptr + src_v) + (((r1.to(tl.int64) & 0xFFFFFFFF) * tl.load(deg_ptr + src_v)) >> 32)
            v = tl.load(indices_ptr + e)
            tl.store(frontier_ptr + row + slot, v)
            tl.store(fdeg_ptr + row + slot, tl.load(deg_ptr + v))
            tl.store(nodes_out_ptr + inst * walk_budget + m + s, v)
            tl.store(src_ptr + inst * steps + s, src_v)
            tl.store(dst_ptr + inst * steps + s, v)
            tl.store(eid_ptr + inst * steps + s, tl.load(eids_ptr + e))
            tl.debug_barrier()  # the next step's scan must see this step's frontier update


BLOCK_W = 128  # random walks per program: one lane per walk at 4 warps
# node2vec: one warp per program (32 walks).  The trial loop's early exit then needs only a warp
# reduction (no shared memory, no barrier) and a warp leaves as soon as its own walks accept;
# with 4 warps per program ptxas spilled a few bytes on sm_80/sm_90.
N2V_BLOCK_W = 32
N2V_WARPS = 1
MAX_TRIALS = 32  # node2vec rejection trials before the exact fallback (walks.py's _MAX_TRIALS)

_RW_SIG = {"nodes_ptr": "*i64", "start_ptr": "*i64", "deg_ptr": "*i64", "indices_ptr": "*i64",
           "eids_ptr": "*i64", "key_ptr": "*fp64", "thresh_ptr": "*i64", "trace_ptr": "*i64",
           "eout_ptr": "*i64", "num_walks": "i64", "length": "i64", "seed": "i64", "search_iters": "i64",
           "WEIGHTED": "constexpr", "RESTART": "constexpr", "RETURN_EIDS": "constexpr", "BLOCK_W": "constexpr"}

_N2V_SIG = {"trace_ptr": "*i64", "pos_ptr": "*i64", "start_ptr": "*i64", "deg_ptr": "*i64",
            "rowdeg_ptr": "*i64", "indices_ptr": "*i64", "key_ptr": "*fp64", "w_ptr": "*fp64",
            "scale_ptr": "*fp64", "alt_ptr": "*i64", "main_ptr": "*fp64",
            "num_walks": "i64", "length": "i64", "s": "i64", "seed": "i64", "search_iters": "i64",
            "nb_iters": "i64", "max_deg": "i64", "thr_t": "i64", "thr_lo": "i64", "thr_hi": "i64",
            "nb_accepts": "i64", "fparams_ptr": "*fp64",
            "WEIGHTED": "constexpr", "BLOCK_W": "constexpr", "MAX_TRIALS": "constexpr"}

SPECIALISATIONS = [
    Specialisation("walks", "_random_walk_kernel", _RW_SIG,
                   {"WEIGHTED": wt, "RESTART": rs, "RETURN_EIDS": re, "BLOCK_W": BLOCK_W}, num_warps=4)
    for wt in (False, True) for rs in (False, True) for re in (False, True)
] + [
    Specialisation("walks", "_node2vec_step_kernel", _N2V_SIG,
                   {"WEIGHTED": wt, "BLOCK_W": N2V_BLOCK_W, "MAX_TRIALS": MAX_TRIALS}, num_warps=N2V_WARPS)
    for wt in (False, True)
]

MDRW_BLOCK_M = 1024  # frontier slots scanned per chunk (GraphSAINT frontiers: m ~ 1000-3000)

SPECIALISATIONS += [
    Specialisation("walks", "_mdrw_kernel",
                   {"frontier_ptr": "*i64", "fdeg_ptr": "*i64", "start_ptr": "*i64", "deg_ptr": "*i64",
                    "indices_ptr": "*i64", "eids_ptr": "*i64", "nodes_out_ptr": "*i64", "src_ptr": "*i64",
                    "dst_ptr": "*i64", "eid_ptr": "*i64", "m": "i64", "steps": "i64", "walk_budget": "i64",
                    "seed": "i64", "BLOCK_M": "constexpr"},
                   {"BLOCK_M": MDRW_BLOCK_M}, num_warps=4)
]
