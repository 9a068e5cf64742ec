"""The CPU twin of the frontier family (``kernels/saint_frontier.py``): GraphSAINT's frontier
sampler with the parallel dashboard as numpy loops, one vectorised over instances
(:func:`frontier_cpu`) and one scalar per instance (:func:`frontier_one`), bit-identical to each
other and to the kernel (launcher :mod:`.launchers`).  The algorithm, the pin layout
and the Philox counters are in :mod:`.frontier`, the entry point.
"""
from __future__ import annotations

import numpy as np

from ..rng import philox4x32_np

__all__ = ["SLOT_BITS", "SLOT_MASK", "ETA_SCALE", "probe_dashboard", "frontier_cpu", "frontier_one"]

SLOT_BITS = 20
SLOT_MASK = (1 << SLOT_BITS) - 1
ETA_SCALE = 1024               # eta is used as round(eta * 1024) / 1024: integer-exact on every path
_PROBES_MAX = 1024             # = kernels.saint_frontier.PROBES_MAX
_NB_BLOCK = 4095               # = kernels.saint_frontier.NB_BLOCK
_PROBE_CHUNK = 32              # CPU: words precomputed per step (eight Philox blocks), and probes
                               # per round once they are used up
_FIRST_ROUND = 8               # CPU: probes per round within the precomputed words


def _grow(cap, need, eta_q):
    """Double ``cap`` (array) while eta * need > cap."""
    cap = cap.copy()
    small = eta_q * need > cap * ETA_SCALE
    while small.any():
        cap[small] *= 2
        small = eta_q * need > cap * ETA_SCALE
    return cap


def probe_dashboard(db: np.ndarray, tail: np.ndarray, ftag: np.ndarray, rows: np.ndarray, inst: np.ndarray,
                    step: int, seed: int, first_words: np.ndarray | None = None) -> np.ndarray:
    """One pop per row: probe DB positions ``(word * tail) >> 32`` in probe order
    (_PROBE_CHUNK per round) until a live pin (``ftag[row, pin & 0xFFFFF] == pin >> 20``) is hit.
    ``db`` [R, W] int64, ``tail``/``inst`` [R], ``ftag`` [R, m] (C-contiguous); ``rows`` selects
    the rows to pop; ``first_words`` [len(rows), _PROBE_CHUNK] optionally supplies the words of
    the first round (precomputed for many steps at once).  Returns the pins (-1 where 1024
    probes found none: the caller's exact fallback).  The Triton kernel probes the same
    positions in the same order."""
    return _probe(db.reshape(-1), db.shape[1], tail, ftag.reshape(-1), ftag.shape[1], rows, inst, step, seed,
                  first_words)


def _probe(dbf, W, tail, ftagf, m, rows, inst, step, seed, first_words):
    # Probes in rounds of _FIRST_ROUND while precomputed words last (most pops need 1-2 probes:
    # each probe is a cache miss in a large dashboard), then rounds of _PROBE_CHUNK fresh words.
    hit = np.full(rows.size, -1, dtype=np.int64)
    t = tail[rows]
    rW, rM = rows * W, rows * m
    pend = None  # None: all rows
    p = 0
    while p < _PROBES_MAX:
        if first_words is not None and p < first_words.shape[1]:
            C = _FIRST_ROUND
            w = first_words[:, p:p + C] if pend is None else first_words[pend, p:p + C]
        else:
            C = _PROBE_CHUNK
            blk = p // 4 + np.arange(C // 4, dtype=np.int64)
            base = (inst[rows if pend is None else rows[pend]].astype(np.int64) << 40) | (int(step) << 12)
            w = np.stack(philox4x32_np(seed, base[:, None] | blk[None, :]), -1)
            w = w.reshape(base.size, C).view(np.int64)
        if pend is None:
            pw, pm, pt = rW, rM, t
        else:
            pw, pm, pt = rW[pend], rM[pend], t[pend]
        pins = dbf.take(pw[:, None] + ((w * pt[:, None]) >> 32))
        ok = ftagf.take(pm[:, None] + (pins & SLOT_MASK)) == (pins >> SLOT_BITS)
        first = ok.argmax(1)
        k = np.arange(first.size)
        anyv = ok[k, first]
        sel = pins[k, first]
        if pend is None:
            hit = np.where(anyv, sel, -1)
            if anyv.all():
                return hit
            pend = np.flatnonzero(~anyv)
        else:
            hit[pend[anyv]] = sel[anyv]
            pend = pend[~anyv]
            if not pend.size:
                return hit
        p += C
    return hit


def _step_words(seed, inst, s0, S):
    """Philox words of steps s0..s0+S-1 for instances ``inst``: the first probe round
    [A, S, _PROBE_CHUNK] and the neighbour/fallback words [A, S, 2] (one Philox call for S steps)."""
    nblk = _PROBE_CHUNK // 4
    steps = np.arange(s0, s0 + S, dtype=np.int64) << 12
    blocks = np.append(np.arange(nblk, dtype=np.int64), _NB_BLOCK)
    off = (inst.astype(np.int64)[:, None, None] << 40) | steps[None, :, None] | blocks[None, None, :]
    w = np.stack(philox4x32_np(seed, off), -1).view(np.int64)  # [A, S, nblk + 1, 4]
    return w[:, :, :nblk, :].reshape(inst.size, S, _PROBE_CHUNK), w[:, :, nblk, :2]


def _live_pins(db, W, tail, ftag, m, i):
    """Live pins of instance i in dashboard order (flat arrays)."""
    row = db[i * W:i * W + tail[i]]
    return row[ftag[i * m:(i + 1) * m].take(row & SLOT_MASK) == (row >> SLOT_BITS)]


def frontier_cpu(indptr, indices, degc, roots, inst, n, max_steps, seed, eta_q, cap0):
    """The dashboard sampler vectorised over instances (numpy, flat row-major arrays so every
    gather is a 1-D ``take``).  Returns out [I, n] (discovery order, -1 padded) and counts [I]."""
    n_inst, m = roots.shape
    N = indptr.size - 1
    deg = np.diff(indptr)
    start = indptr[:-1]
    fvert = roots.reshape(-1).copy()              # [I * m]
    ftag = np.zeros(n_inst * m, dtype=np.int64)        # [I * m]
    dr = degc[roots]
    live = dr.sum(1)
    tail = live.copy()
    cap = _grow(np.full(n_inst, cap0, dtype=np.int64), live, eta_q)
    W = int(cap.max())
    db = np.zeros(n_inst * W, dtype=np.int64)          # [I * W]
    first = np.arange(n_inst, dtype=np.int64) * W
    db[np.repeat(first - (np.cumsum(live) - live), live) + np.arange(int(live.sum()))] = \
        np.repeat(np.tile(np.arange(m, dtype=np.int64), n_inst), dr.ravel())
    visited = np.zeros(n_inst * N, dtype=bool)         # [I * N]
    visited[(np.arange(n_inst, dtype=np.int64)[:, None] * N + roots).ravel()] = True
    out = np.full((n_inst, n), -1, dtype=np.int64)
    out[:, :m] = roots
    outf = out.reshape(-1)
    cnt = np.full(n_inst, m, dtype=np.int64)
    act = np.flatnonzero((cnt < n) & (live > 0)) if max_steps > 0 else np.empty(0, dtype=np.int64)
    s = 0
    pos_of = np.zeros(n_inst, dtype=np.int64)
    s_end = -1
    while act.size:
        if s >= s_end:  # Philox words of the next S steps for the active instances, in one call
            S = int(min(max_steps - s, max(8, min(256, 16384 // act.size))))
            pw, nbw = _step_words(seed, inst[act], s, S)
            pos_of[act] = np.arange(act.size)
            s0, s_end = s, s + S
        bp = pos_of[act]
        hit = _probe(db, W, tail, ftag, m, act, inst, s, seed, pw[bp, s - s0])
        nb = nbw[bp, s - s0]
        nb0, nb1 = nb[:, 0], nb[:, 1]
        if hit.min() < 0:
            for k in np.flatnonzero(hit < 0):  # exact fallback (rare): the k-th live pin
                pins = _live_pins(db, W, tail, ftag, m, act[k])
                hit[k] = pins[(nb1[k] * live[act[k]]) >> 32]
        fs = act * m + (hit & SLOT_MASK)       # flat frontier slot
        u = fvert.take(fs)
        v = indices.take(start.take(u) + ((nb0 * deg.take(u)) >> 32))
        dv = degc.take(v)
        ftag[fs] = s + 1
        fvert[fs] = v
        live[act] += dv - degc.take(u)
        vf = act * N + v
        new = ~visited.take(vf)
        if new.any():
            visited[vf[new]] = True
            rn = act[new]
            outf[rn * n + cnt[rn]] = v[new]
            cnt[rn] += 1
        # periodic cleanup: compact the live pins of the instances whose dashboard is full
        ta = tail[act]
        full = np.flatnonzero(ta + dv > cap[act])
        for k in full:
            i = act[k]
            pins = _live_pins(db, W, tail, ftag, m, i)
            db[i * W:i * W + pins.size] = pins
            tail[i] = pins.size
            cap[i] = _grow(cap[i:i + 1], tail[i:i + 1] + dv[k], eta_q)[0]
            if cap[i] > W:  # widen the shared array (the logical cap is per instance)
                W2 = int(cap[i])
                db = np.concatenate([db.reshape(n_inst, W), np.zeros((n_inst, W2 - W), dtype=np.int64)], 1).reshape(-1)
                W = W2
        if full.size:
            ta = tail[act]
        app = np.flatnonzero(dv)
        d = dv[app]
        starts = act[app] * W + ta[app] - (np.cumsum(d) - d)  # flat position of each run's start
        pins = ((s + 1) << SLOT_BITS) | (hit[app] & SLOT_MASK)  # tag = this step, slot = the popped one
        db[np.repeat(starts, d) + np.arange(int(d.sum()))] = np.repeat(pins, d)
        tail[act] = ta + dv
        s += 1
        if s >= max_steps:
            break
        keep = (cnt[act] < n) & (live[act] > 0)
        if not keep.all():
            act = act[keep]
    return out, cnt


def frontier_one(indptr, indices, degc, roots, inst_id, n, max_steps, seed, eta_q, cap0):
    """The same dashboard sampler for one instance as a scalar Python loop: same pins, probes
    and words, so the same samples as :func:`frontier_cpu` (tested).  Faster than the
    vectorised loop for a few instances (each numpy call there costs microseconds however few
    instances it serves).  Returns out [n] (-1 padded) and the count."""
    m = roots.size
    fvert = roots.tolist()
    ftag = [0] * m
    dr = degc[roots]
    live = int(dr.sum())
    tail = live
    cap = int(_grow(np.array([cap0], dtype=np.int64), np.array([live]), eta_q)[0])
    db = np.zeros(cap, dtype=np.int64)
    db[:live] = np.repeat(np.arange(m, dtype=np.int64), dr)
    visited = bytearray(indptr.size - 1)
    for r in fvert:
        visited[r] = 1
    out = list(fvert)
    one = np.array([inst_id], dtype=np.int64)
    s = s0 = s_end = 0
    ip, ind, dc, item = indptr.item, indices.item, degc.item, db.item
    mask = SLOT_MASK
    while len(out) < n and live > 0 and s < max_steps:
        if s >= s_end:
            S = int(min(max_steps - s, 1024))
            pw, nbw = _step_words(seed, one, s, S)
            pw, nbw = pw[0].tolist(), nbw[0].tolist()
            s0, s_end = s, s + S
        nb0, nb1 = nbw[s - s0]
        hit = -1
        for w in pw[s - s0]:
            pin = item((w * tail) >> 32)
            if ftag[pin & mask] == pin >> SLOT_BITS:
                hit = pin
                break
        if hit < 0:  # rare: more probes (the first round repeats and fails again), then exact
            ft = np.array(ftag, dtype=np.int64)
            hit = int(_probe(db, 0, np.array([tail]), ft, m, np.zeros(1, np.int64), one, s, seed, None)[0])
            if hit < 0:
                row = db[:tail]
                hit = int(row[ft[row & mask] == (row >> SLOT_BITS)][(nb1 * live) >> 32])
        slot = hit & mask
        u = fvert[slot]
        su = ip(u)
        v = ind(su + ((nb0 * (ip(u + 1) - su)) >> 32))
        dv = dc(v)
        ftag[slot] = s + 1
        fvert[slot] = v
        live += dv - dc(u)
        if not visited[v]:
            visited[v] = 1
            out.append(v)
        if tail + dv > cap:  # periodic cleanup
            ft = np.array(ftag, dtype=np.int64)
            row = db[:tail]
            keep = row[ft[row & mask] == (row >> SLOT_BITS)]
            tail = keep.size
            db[:tail] = keep
            cap = int(_grow(np.array([cap], dtype=np.int64), np.array([tail + dv]), eta_q)[0])
            if cap > db.size:
                db = np.concatenate([db, np.zeros(cap - db.size, dtype=np.int64)])
                item = db.item
        if dv:
            db[tail:tail + dv] = ((s + 1) << SLOT_BITS) | slot
            tail += dv
        s += 1
    res = np.full(n, -1, dtype=np.int64)
    res[:len(out)] = out
    return res, len(out)
