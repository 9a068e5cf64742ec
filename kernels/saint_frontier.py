"""GraphSAINT's frontier sampler (multi-dimensional random walk) on the Dashboard of Zeng et al.,
IPDPS'19 (Alg. 2/3): one program per subgraph instance (inter-subgraph parallelism), its lanes
probing the dashboard and compacting it together (intra-subgraph parallelism).

Per instance, in global scratch memory:

* ``db``    [phys_cap] int64 pins: ``(tag << 20) | slot`` (slot = frontier position, tag = the
            step that put the slot's current vertex there, 0 for roots).  Frontier vertex u in
            slot s owns min(deg(u), clip) consecutive pins;
* ``ftag``  [m] the slot's current tag: a pin is live iff ``ftag[pin & 0xFFFFF] == pin >> 20``, so
            popping u invalidates all its pins with one store (the paper rewrites them to -1);
* ``fvert`` [m] the slot's vertex; ``vis`` [ceil(N/32)] int32 visited bitmap; ``out`` [n] the
            sampled vertices in discovery order (roots first).

Step ``step`` (counter base ``(inst << 40) | (step << 12)``):
1. probe: probe q (q = 0, 1, ...) reads word q % 4 of Philox block ``base | q // 4`` and looks at
   pin ``(word * tail) >> 32``; the first live probe (smallest q) pops its slot.  BLOCK lanes test
   BLOCK probes at once; after PROBES_MAX probes without a live pin the step takes the k-th live
   pin in dashboard order, k = (word1 * live) >> 32 with word1 of block ``base | 4095`` (exact,
   same distribution);
2. u's replacement v = a uniform out-neighbour of u: word0 of block ``base | 4095``;
3. tag/vertex update, visited bitmap, ``out``;
4. cleanup when the pins of v do not fit below the logical capacity ``cap``: stable compaction of
   the live pins by a block-wise scan; then ``cap`` doubles while eta_q * (tail + deg_c(v)) >
   cap * 1024 (eta_q = round(eta * 1024));
5. append deg_c(v) pins of v at the tail.

``cap`` starts at ``cap0`` (doubled while eta_q * live0 > cap * 1024).  The logical capacity is
what the CPU path (dgl_accel/core/sampling/saint/frontier_cpu.py) uses, so both produce the same samples; the
physical ``phys_cap`` only bounds memory: an instance whose ``cap`` would exceed it stops with
status 1 and the launcher reruns it with more scratch.

``tl.debug_barrier()`` (bar.sync) orders the lanes' global stores before other lanes' loads of
the same positions (appended pins, in-place compaction).
"""
import triton
import triton.language as tl

from .registry import Specialisation

PROBES_MAX = 1024  # probes before the exact fallback (a multiple of every BLOCK used)
NB_BLOCK = 4095    # Philox block of a step holding the neighbour word (0) and the fallback word (1)
_NB = tl.constexpr(NB_BLOCK)


@triton.jit(do_not_specialize=["m", "seed"])  # per call: one variant
def _frontier_kernel(indptr_ptr, indices_ptr, roots_ptr, inst_ptr, db_ptr, ftag_ptr, fvert_ptr, vis_ptr, out_ptr,
                     count_ptr, status_ptr, m: tl.int64, n, max_steps, cap0, phys_cap, vis_words, clip, eta_q,
                     seed: tl.int64,
                     BLOCK: tl.constexpr, PROBES: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    inst = tl.load(inst_ptr + pid).to(tl.int64)
    db = db_ptr + pid * phys_cap
    ftag = ftag_ptr + pid * m
    fvert = fvert_ptr + pid * m
    vis = vis_ptr + pid * vis_words
    out = out_ptr + pid * n
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    one32 = tl.full((), 1, tl.int32)

    # Roots: slot j holds roots[j] (tag 0) and its clipped-degree pins, in slot order.
    tail = pid * 0
    for j in range(0, m):
        r = tl.load(roots_ptr + pid * m + j).to(tl.int64)
        tl.store(fvert + j, r)
        tl.store(ftag + j, 0)
        tl.store(out + j, r)
        word = tl.load(vis + (r >> 5))
        tl.store(vis + (r >> 5), word | (one32 << (r & 31).to(tl.int32)))
        d = tl.minimum(tl.load(indptr_ptr + r + 1) - tl.load(indptr_ptr + r), clip)
        for c in range(0, d, BLOCK):
            pos = tail + c + lanes
            tl.store(db + pos, j + lanes * 0, mask=(c + lanes < d) & (pos < phys_cap))
        tail += d
    live = tail
    cap = cap0 + pid * 0
    while eta_q * tail > cap * 1024:
        cap = cap * 2
    status = tl.where(cap > phys_cap, 1, 0).to(tl.int64)
    cnt = m + pid * 0
    step = pid * 0
    tl.debug_barrier()
    go = (cnt < n) & (live > 0) & (step < max_steps) & (status == 0)
    while go:
        base = (inst << 40) | (step << 12)
        n0, n1, n2, n3 = tl.randint4x(seed, base | (_NB + lanes * 0))
        nb0 = tl.max(n0.to(tl.int64) & 0xFFFFFFFF)
        nb1 = tl.max(n1.to(tl.int64) & 0xFFFFFFFF)
        # 1. probe BLOCK dashboard positions at a time; the smallest live probe index wins.
        hit = pid * 0 - 1
        p = pid * 0
        while (hit < 0) & (p < PROBES):
            q = p + lanes
            r0, r1, r2, r3 = tl.randint4x(seed, base | (q >> 2))
            ln = q & 3
            w = tl.where(ln == 0, r0, tl.where(ln == 1, r1, tl.where(ln == 2, r2, r3)))
            w = w.to(tl.int64) & 0xFFFFFFFF
            pin = tl.load(db + ((w * tail) >> 32))
            ok = tl.load(ftag + (pin & 0xFFFFF)) == (pin >> 20)
            first = tl.min(tl.where(ok, lanes, BLOCK))
            chosen = tl.sum(tl.where(lanes == first, pin, 0))
            hit = tl.where(first < BLOCK, chosen, hit)
            p += BLOCK
        if hit < 0:
            # Exact fallback: the k-th live pin in dashboard order.
            k = (nb1 * live) >> 32
            seen = pid * 0
            for c in range(0, tail, BLOCK):
                idx = c + lanes
                msk = idx < tail
                pin = tl.load(db + idx, mask=msk, other=0)
                ok = msk & (tl.load(ftag + (pin & 0xFFFFF), mask=msk, other=-1) == (pin >> 20))
                rank = seen + tl.cumsum(ok.to(tl.int64), 0) - 1
                hit = tl.maximum(hit, tl.max(tl.where(ok & (rank == k), pin, -1)))
                seen += tl.sum(ok.to(tl.int64))
        slot = hit & 0xFFFFF
        u = tl.load(fvert + slot)
        us = tl.load(indptr_ptr + u)
        du = tl.load(indptr_ptr + u + 1) - us
        # 2. uniform out-neighbour of u (u has pins, so deg(u) >= 1)
        v = tl.load(indices_ptr + us + ((nb0 * du) >> 32)).to(tl.int64)
        dv = tl.minimum(tl.load(indptr_ptr + v + 1) - tl.load(indptr_ptr + v), clip)
        # 3. v takes u's slot: one tag store invalidates all of u's pins
        tl.store(ftag + slot, step + 1)
        tl.store(fvert + slot, v)
        live = live - tl.minimum(du, clip) + dv
        word = tl.load(vis + (v >> 5))
        bit = one32 << (v & 31).to(tl.int32)
        if (word & bit) == 0:
            tl.store(vis + (v >> 5), word | bit)
            tl.store(out + cnt, v)
            cnt += 1
        tl.debug_barrier()
        # 4. periodic cleanup: compact the live pins (block-wise scan, in place)
        if tail + dv > cap:
            new_tail = pid * 0
            for c in range(0, tail, BLOCK):
                idx = c + lanes
                msk = idx < tail
                pin = tl.load(db + idx, mask=msk, other=0)
                ok = msk & (tl.load(ftag + (pin & 0xFFFFF), mask=msk, other=-1) == (pin >> 20))
                pos = new_tail + tl.cumsum(ok.to(tl.int64), 0) - 1
                tl.debug_barrier()  # every lane has read this block before any lane overwrites it
                tl.store(db + pos, pin, mask=ok)
                new_tail += tl.sum(ok.to(tl.int64))
            tail = new_tail
            while eta_q * (tail + dv) > cap * 1024:
                cap = cap * 2
            if cap > phys_cap:
                status = status * 0 + 1
        # 5. append v's pins
        if status == 0:
            pin_v = ((step + 1) << 20) | slot
            for c in range(0, dv, BLOCK):
                tl.store(db + tail + c + lanes, pin_v + lanes * 0, mask=c + lanes < dv)
            tail += dv
        tl.debug_barrier()
        step += 1
        go = (cnt < n) & (live > 0) & (step < max_steps) & (status == 0)
    tl.store(count_ptr + pid, cnt)
    tl.store(status_ptr + pid, status)


def block_for(device_is_cuda: bool) -> int:
    """Lanes per program: 128 probes per round on a GPU (4 warps); 32 under the interpreter,
    where every lane costs Python time."""
    return 128 if device_is_cuda else 32


_SIG = {"indptr_ptr": "*i64", "indices_ptr": "*i64", "roots_ptr": "*i64", "inst_ptr": "*i64", "db_ptr": "*i64",
        "ftag_ptr": "*i64", "fvert_ptr": "*i64", "vis_ptr": "*i32", "out_ptr": "*i64", "count_ptr": "*i64",
        "status_ptr": "*i64", "m": "i64", "n": "i64", "max_steps": "i64", "cap0": "i64", "phys_cap": "i64",
        "vis_words": "i64", "clip": "i64", "eta_q": "i64", "seed": "i64", "BLOCK": "constexpr",
        "PROBES": "constexpr"}

# BLOCK=128 / 4 warps is what CUDA launches; BLOCK=32 / 1 warp is the interpreter's variant,
# compiled here too so both stay valid GPU code.
SPECIALISATIONS = [
    Specialisation("saint_frontier", "_frontier_kernel", _SIG, {"BLOCK": blk, "PROBES": PROBES_MAX},
                   num_warps=nw, num_stages=1)
    for blk, nw in ((128, 4), (32, 1))
]
