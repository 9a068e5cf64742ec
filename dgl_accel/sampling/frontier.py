"""GraphSAINT's frontier sampler (multi-dimensional random walk, MDRW) with the parallel
Dashboard of Zeng et al., "Accurate, efficient and scalable graph embedding" (IPDPS'19, Alg. 2/3).

Algorithm (both :func:`frontier_sample` and :func:`frontier_sample_sequential`)
-------------------------------------------------------------------------------
Per instance: the frontier FS holds m = ``num_roots`` distinct roots drawn uniformly (a uniform
m-subset of the nodes); the sampled set V_s starts as FS.  Each step pops u from FS with
probability deg_c(u) / sum of deg_c over FS, picks a uniform random out-neighbour v of u, adds v
to V_s and puts v in u's place in FS.  deg_c(u) = min(out_deg(u), ``degree_clip``) (no clip by
default).  Walks follow out-edges (GraphSAINT's graphs are undirected: store both directions).

Stopping convention: the walk runs until |V_s| = n = ``budget`` distinct vertices, so every
instance returns exactly n nodes whenever the walk can reach them.  The paper's counting runs a
fixed n - m steps (its C++ code: ``iteration = subgraph_size - size_frontier``), which yields at
most n distinct vertices because walks revisit; pass ``max_steps=budget - num_roots`` to get
that convention.  A walk also stops after ``max_steps`` steps (default 16 * budget, so a walk
trapped in a small component terminates) or when no frontier vertex has an out-edge; such an
instance returns fewer than n nodes.

Degree clip: a clipped hub is popped with probability min(deg, clip) / sum(min(deg_c)), i.e. the
sampler is the exact MDRW on the clipped degrees, which under-samples hubs relative to the
unclipped MDRW (the paper's code clips at 3000 to bound the dashboard).  There is no
reweighting: restoring deg-proportional pops by rejection would accept non-hubs with
probability clip / max_deg.  The neighbour choice itself is never clipped (uniform over all
out-neighbours).  ``frontier_sample_sequential`` applies the same clip, so both follow one
distribution.

Dashboard (the parallel version)
--------------------------------
Each frontier slot s owns deg_c(u) consecutive *pins* of the dashboard DB.  A pin is
``(tag << 20) | s``; slot s's current tag is the step that put its vertex there (0 for roots),
and a pin is live iff its tag is the slot's current tag, so popping u invalidates all of u's
pins with one store (the paper overwrites them with -1: same semantics, O(1) instead of
O(deg)).  Pop = probe uniform random positions of DB[0, tail) until a live pin is hit: u is hit
with probability deg_c(u) / live pins, exactly the MDRW's pop law.  v's pins are appended at the
tail.  When they do not fit below the capacity ``cap``, a cleanup compacts the live pins (stable,
by a scan); ``cap`` then doubles while eta * (live pins + deg_c(v)) > cap, so the dashboard stays
at least eta times its live content (eta = enlargement factor; the paper sizes DB as
eta * m * avg_deg and doubles it when full).  ``cap`` starts at ceil(eta * m * mean deg_c).
Probing is parallel (lanes test several positions at once, the first live one in probe order
wins: still exact) and instances are independent (inter-subgraph parallelism).

Paths
-----
* CPU tensors: numpy, vectorised across instances (all instances step together, flat arrays,
  Philox words precomputed for batches of steps); up to ``_SCALAR_MAX`` (16) instances run a
  scalar per-instance loop of the same algorithm instead (each vectorised numpy call costs
  microseconds however few instances it serves; measured crossover 16-32 instances).
* CUDA tensors (or ``dgl_accel.use_backend("triton")``, interpreted on CPU):
  ``kernels/saint_frontier.py``, one program per instance with the dashboard in global scratch.
Both draw every random number from Philox4x32 at counters that name the decision (below) and
take the first live probe in probe order, so **both CPU loops and the Triton kernel return
bit-identical samples** for the same seed (tested, the kernel under the interpreter).
``frontier_sample_sequential`` draws from numpy's Generator: same distribution, other samples.

Randomness (Philox4x32-10, :mod:`dgl_accel.sampling.rng`), offset per instance id i:
* roots: ``(i << 40) | (1 << 39) | b``: the four words of block b are candidates 4b..4b+3, each
  picks ``(word * N) >> 32``; the roots are the first m distinct candidates;
* step s: probe q uses word q % 4 of block ``(i << 40) | (s << 12) | q // 4`` (q < 1024); block
  ``... | 4095`` gives word 0 (neighbour index ``(word * deg(u)) >> 32``) and word 1 (exact
  fallback after 1024 failed probes: the k-th live pin, k = (word * live) >> 32).
A subgraph depends only on (seed, instance id, arguments), not on ``num_instances``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..core import backend
from ..graph.structure import out_csr
from .rng import philox4x32, philox4x32_np
from .walks import _err, _OneThread, _resolve_seed

__all__ = ["frontier_sample", "frontier_sample_sequential", "probe_dashboard"]

_SLOT_BITS = 20
_SLOT_MASK = (1 << _SLOT_BITS) - 1
_ROOT_FLAG = 1 << 39
_MAX_STEPS = (1 << 27) - 1     # step field of the counter: bits 12..38
_MAX_INSTANCES = 1 << 23       # instance id: bits 40..62
_PROBES_MAX = 1024             # = kernels.saint_frontier.PROBES_MAX
_NB_BLOCK = 4095               # = kernels.saint_frontier.NB_BLOCK
_PROBE_CHUNK = 32              # CPU: words precomputed per step (eight Philox blocks), and probes
                               # per round once they are used up
_FIRST_ROUND = 8               # CPU: probes per round within the precomputed words
_SCALAR_MAX = 16               # CPU: up to this many instances run the scalar loop, one by one
_VEC_CHUNK = 64                # CPU: instances per vectorised loop: bounds the scratch (~5 MB each for
                               # m=1000 on fb100_Cornell5); 64-128 measured alike per instance
_ETA_SCALE = 1024              # eta is used as round(eta * 1024) / 1024: integer-exact on every path


# ------------------------------------------------------------------------------ validation
def _int(name, v, lo, hi, fix):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise _err(f"{name} to be an int in [{lo}, {hi}]", repr(v), fix)
    return int(v)


def _check(g, num_roots, budget, num_instances, eta, degree_clip, max_steps):
    """Validated (csr, m, n, I, eta_q, clip, max_steps); raises before any work."""
    csr = out_csr(g)  # also rejects heterographs
    N = csr.num_rows
    if N == 0 or csr.num_edges == 0:
        raise _err("a graph with at least one edge", f"{N} nodes and {csr.num_edges} edges",
                   "the frontier walk moves along edges; sample from a graph that has some.")
    m = _int("num_roots", num_roots, 1, min(N, _SLOT_MASK), "pass a frontier size m with 1 <= m <= num_nodes.")
    n = _int("budget", budget, m, N, f"pass a budget n with num_roots ({m}) <= n <= num_nodes ({N}).")
    I = _int("num_instances", num_instances, 1, _MAX_INSTANCES - 1, "pass a positive number of subgraphs.")
    try:
        eta_f = float(eta)
    except (TypeError, ValueError):
        raise _err("eta to be a number > 1", repr(eta), "pass e.g. eta=2.0 (dashboard enlargement factor).") from None
    eta_q = round(eta_f * _ETA_SCALE) if math.isfinite(eta_f) else 0
    if not (math.isfinite(eta_f) and eta_f > 1 and eta_q > _ETA_SCALE and eta_f <= 64):
        raise _err("eta in (1, 64]", repr(eta), "pass e.g. eta=2.0: the dashboard must be larger than its "
                   "live content (eta <= 1 leaves no room to append).")
    clip = (1 << 62) if degree_clip is None else _int("degree_clip", degree_clip, 1, 1 << 62,
                                                       "pass None (no clip) or a positive int, e.g. 3000.")
    if max_steps is None:
        max_steps = min(_MAX_STEPS, 16 * n)
    max_steps = _int("max_steps", max_steps, 0, _MAX_STEPS, "pass None or a non-negative number of steps.")
    return csr, m, n, I, eta_q, clip, max_steps


def _cap0(degc_sum: int, N: int, m: int, eta_q: int) -> int:
    """Initial dashboard capacity ceil(eta * m * mean deg_c), integer-exact."""
    return max(1, -(-(eta_q * m * degc_sum) // (_ETA_SCALE * N)))


def _grow(cap, need, eta_q):
    """Double ``cap`` (array) while eta * need > cap."""
    cap = cap.copy()
    small = eta_q * need > cap * _ETA_SCALE
    while small.any():
        cap[small] *= 2
        small = eta_q * need > cap * _ETA_SCALE
    return cap


def _signed64(seed: int) -> int:
    return seed - (1 << 64) if seed >= 1 << 63 else seed


# ----------------------------------------------------------------------------------- roots
def _roots(seed: int, inst: torch.Tensor, m: int, N: int) -> torch.Tensor:
    """[I, m] int64: per instance the first m distinct of an i.i.d. uniform candidate sequence
    (a uniform m-subset, in random order); torch ops, any device."""
    I = inst.numel()
    if m == N:
        return torch.arange(N, dtype=torch.int64, device=inst.device).expand(I, N).contiguous()
    L = 4 * -(-(m + m // 2 + 8) // 4)
    while True:
        blocks = torch.arange(L // 4, dtype=torch.int64, device=inst.device)
        off = (inst.to(torch.int64)[:, None] << 40) | _ROOT_FLAG | blocks[None, :]
        cand = (torch.stack(philox4x32(seed, off), -1).reshape(I, L) * N) >> 32
        sv, order = torch.sort(cand, dim=1, stable=True)
        first = torch.ones_like(sv, dtype=torch.bool)
        first[:, 1:] = sv[:, 1:] != sv[:, :-1]
        is_first = torch.zeros_like(first).scatter_(1, order, first)
        rank = torch.cumsum(is_first, 1)
        if bool((rank[:, -1] >= m).all()):
            return cand[is_first & (rank <= m)].reshape(I, m)
        L *= 2


# -------------------------------------------------------------------------------- CPU path
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
        ok = ftagf.take(pm[:, None] + (pins & _SLOT_MASK)) == (pins >> _SLOT_BITS)
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
    return row[ftag[i * m:(i + 1) * m].take(row & _SLOT_MASK) == (row >> _SLOT_BITS)]


def _frontier_cpu(indptr, indices, degc, roots, inst, n, max_steps, seed, eta_q, cap0):
    """The dashboard sampler vectorised over instances (numpy, flat row-major arrays so every
    gather is a 1-D ``take``).  Returns out [I, n] (discovery order, -1 padded) and counts [I]."""
    I, m = roots.shape
    N = indptr.size - 1
    deg = np.diff(indptr)
    start = indptr[:-1]
    fvert = roots.reshape(-1).copy()              # [I * m]
    ftag = np.zeros(I * m, dtype=np.int64)        # [I * m]
    dr = degc[roots]
    live = dr.sum(1)
    tail = live.copy()
    cap = _grow(np.full(I, cap0, dtype=np.int64), live, eta_q)
    W = int(cap.max())
    db = np.zeros(I * W, dtype=np.int64)          # [I * W]
    first = np.arange(I, dtype=np.int64) * W
    db[np.repeat(first - (np.cumsum(live) - live), live) + np.arange(int(live.sum()))] = \
        np.repeat(np.tile(np.arange(m, dtype=np.int64), I), dr.ravel())
    visited = np.zeros(I * N, dtype=bool)         # [I * N]
    visited[(np.arange(I, dtype=np.int64)[:, None] * N + roots).ravel()] = True
    out = np.full((I, n), -1, dtype=np.int64)
    out[:, :m] = roots
    outf = out.reshape(-1)
    cnt = np.full(I, m, dtype=np.int64)
    act = np.flatnonzero((cnt < n) & (live > 0)) if max_steps > 0 else np.empty(0, dtype=np.int64)
    s = 0
    pos_of = np.zeros(I, dtype=np.int64)
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
        fs = act * m + (hit & _SLOT_MASK)       # flat frontier slot
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
                db = np.concatenate([db.reshape(I, W), np.zeros((I, W2 - W), dtype=np.int64)], 1).reshape(-1)
                W = W2
        if full.size:
            ta = tail[act]
        app = np.flatnonzero(dv)
        d = dv[app]
        starts = act[app] * W + ta[app] - (np.cumsum(d) - d)  # flat position of each run's start
        db[np.repeat(starts, d) + np.arange(int(d.sum()))] = np.repeat(((s + 1) << _SLOT_BITS) | (hit[app] & _SLOT_MASK), d)
        tail[act] = ta + dv
        s += 1
        if s >= max_steps:
            break
        keep = (cnt[act] < n) & (live[act] > 0)
        if not keep.all():
            act = act[keep]
    return out, cnt


def _frontier_one(indptr, indices, degc, roots, inst_id, n, max_steps, seed, eta_q, cap0):
    """The same dashboard sampler for one instance as a scalar Python loop: same pins, probes
    and words, so the same samples as :func:`_frontier_cpu` (tested).  Faster than the
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
    mask = _SLOT_MASK
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
            if ftag[pin & mask] == pin >> _SLOT_BITS:
                hit = pin
                break
        if hit < 0:  # rare: more probes (the first round repeats and fails again), then exact
            ft = np.array(ftag, dtype=np.int64)
            hit = int(_probe(db, 0, np.array([tail]), ft, m, np.zeros(1, np.int64), one, s, seed, None)[0])
            if hit < 0:
                row = db[:tail]
                hit = int(row[ft[row & mask] == (row >> _SLOT_BITS)][(nb1 * live) >> 32])
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
            keep = row[ft[row & mask] == (row >> _SLOT_BITS)]
            tail = keep.size
            db[:tail] = keep
            cap = int(_grow(np.array([cap], dtype=np.int64), np.array([tail + dv]), eta_q)[0])
            if cap > db.size:
                db = np.concatenate([db, np.zeros(cap - db.size, dtype=np.int64)])
                item = db.item
        if dv:
            db[tail:tail + dv] = ((s + 1) << _SLOT_BITS) | slot
            tail += dv
        s += 1
    res = np.full(n, -1, dtype=np.int64)
    res[:len(out)] = out
    return res, len(out)


# ----------------------------------------------------------------------------- Triton path
def _phys_cap(cap0: int, eta_q: int, m: int, deg: torch.Tensor, degc: torch.Tensor) -> int:
    """Scratch per instance: room for eta * 1.5 * m * (stationary mean deg_c), the walk's typical
    live content (a walk visits u with probability ~ deg(u)); instances that need more rerun."""
    d = deg.double()
    stat = float((d * degc.double()).sum() / d.sum().clamp(min=1))
    need = eta_q / _ETA_SCALE * 1.5 * m * stat + float(degc.max())
    cap = cap0
    while cap < need:
        cap *= 2
    return cap


def frontier_triton(indptr, indices, degc, roots, inst, n, max_steps, seed, eta_q, cap0, clip):
    """Launch ``_frontier_kernel`` (one program per instance); reruns instances whose dashboard
    outgrew the scratch with 4x more.  Returns out [I, n] (-1 padded) and counts [I] on the
    tensors' device."""
    from ..kernels.saint_frontier import PROBES_MAX, block_for
    from ..core.launch import triton_kernel

    dev = indptr.device
    kernel = triton_kernel("saint_frontier", "_frontier_kernel", dev)
    I, m = roots.shape
    N = indptr.numel() - 1
    deg = indptr[1:] - indptr[:-1]
    phys = _phys_cap(cap0, eta_q, m, deg, degc)
    out = torch.full((I, n), -1, dtype=torch.int64, device=dev)
    cnt = torch.zeros(I, dtype=torch.int64, device=dev)
    todo = torch.arange(I, dtype=torch.int64, device=dev)
    vis_words = (N + 31) // 32
    block = block_for(dev.type == "cuda")
    while todo.numel():
        k = todo.numel()
        o = torch.full((k, n), -1, dtype=torch.int64, device=dev)
        c = torch.zeros(k, dtype=torch.int64, device=dev)
        status = torch.zeros(k, dtype=torch.int64, device=dev)
        db = torch.empty((k, phys), dtype=torch.int64, device=dev)
        ftag = torch.empty((k, m), dtype=torch.int64, device=dev)
        fvert = torch.empty((k, m), dtype=torch.int64, device=dev)
        vis = torch.zeros((k, vis_words), dtype=torch.int32, device=dev)
        kernel[(k,)](indptr, indices, roots[todo].contiguous(), inst[todo].contiguous(), db, ftag, fvert, vis, o,
                     c, status, m, n, max_steps, cap0, phys, vis_words, clip, eta_q, _signed64(seed),
                     BLOCK=block, PROBES=PROBES_MAX, num_warps=4 if block >= 128 else 1, num_stages=1)
        done = status == 0
        out[todo[done]] = o[done]
        cnt[todo[done]] = c[done]
        todo = todo[~done]
        phys *= 4
    return out, cnt


# ------------------------------------------------------------------------------ public API
def _as_list(out: torch.Tensor, cnt: torch.Tensor, idtype, device) -> list:
    res = []
    for i in range(out.shape[0]):
        res.append(torch.sort(out[i, :int(cnt[i])])[0].to(device=device, dtype=idtype))
    return res


def frontier_sample(g, num_roots: int, budget: int, *, num_instances: int = 1, eta: float = 2.0,
                    degree_clip=None, seed=None, max_steps=None) -> list:
    """GraphSAINT frontier sampling: ``num_instances`` independent subgraphs, each the node set
    of a multi-dimensional random walk with ``num_roots`` (m) frontier vertices run until
    ``budget`` (n) distinct vertices are sampled (see the module docstring for the stopping
    convention, ``degree_clip`` and the dashboard).  ``eta`` (> 1): dashboard enlargement factor
    (speed/memory only, not the distribution).  Returns one sorted, unique node-id tensor per
    instance (``g.idtype``, on ``g.device``); the subgraph is ``dgl.node_subgraph(g, nodes)``.

    CPU graphs run the numpy dashboard; CUDA graphs (or backend "triton") the Triton kernel;
    both give the same samples for the same seed.
    """
    csr, m, n, I, eta_q, clip, max_steps = _check(g, num_roots, budget, num_instances, eta, degree_clip, max_steps)
    seed = _resolve_seed(seed)
    indptr = csr.indptr
    path = backend.choose_path(indptr)
    backend.record("frontier_sample", path, indptr.device)
    N = csr.num_rows
    if path == "triton":
        indices = csr.indices.to(torch.int64).contiguous()
        degc = torch.clamp(indptr[1:] - indptr[:-1], max=clip)
        inst = torch.arange(I, dtype=torch.int64, device=indptr.device)
        roots = _roots(seed, inst, m, N)
        cap0 = _cap0(int(degc.sum()), N, m, eta_q)
        out, cnt = frontier_triton(indptr.contiguous(), indices, degc, roots, inst, n, max_steps, seed, eta_q,
                                   cap0, clip)
        return _as_list(out, cnt, g.idtype, g.device)
    ip = indptr.cpu().numpy()
    ind = csr.indices.cpu().numpy().astype(np.int64, copy=False)
    degc = np.minimum(np.diff(ip), clip)
    inst = torch.arange(I, dtype=torch.int64)
    with _OneThread():  # small torch ops: intra-op threads only add fork/join cost here
        roots = _roots(seed, inst, m, N).numpy()
        cap0 = _cap0(int(degc.sum()), N, m, eta_q)
        if I <= _SCALAR_MAX:
            res = [_frontier_one(ip, ind, degc, roots[i], i, n, max_steps, seed, eta_q, cap0) for i in range(I)]
            out, cnt = np.stack([r[0] for r in res]), np.array([r[1] for r in res])
        else:  # chunks of instances: bounded scratch that stays closer to the caches
            parts = [_frontier_cpu(ip, ind, degc, roots[lo:lo + _VEC_CHUNK], inst.numpy()[lo:lo + _VEC_CHUNK], n,
                                   max_steps, seed, eta_q, cap0) for lo in range(0, I, _VEC_CHUNK)]
            out, cnt = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        return _as_list(torch.from_numpy(out), cnt, g.idtype, g.device)


def frontier_sample_sequential(g, num_roots: int, budget: int, *, num_instances: int = 1, degree_clip=None,
                               seed=None, max_steps=None) -> list:
    """The paper's sequential frontier sampler, one instance at a time (numpy Generator): pops by
    an O(m) cumulative sum of the frontier's clipped degrees per step.  Same arguments, stopping
    rule and output format as :func:`frontier_sample` (no ``eta``: there is no dashboard); same
    distribution, different random numbers.  The reference for tests and the benchmark."""
    csr, m, n, I, _, clip, max_steps = _check(g, num_roots, budget, num_instances, 2.0, degree_clip, max_steps)
    rng = np.random.default_rng(None if seed is None else _resolve_seed(seed))
    indptr = csr.indptr.cpu().numpy()
    indices = csr.indices.cpu().numpy()
    N = csr.num_rows
    deg = np.diff(indptr)
    degc = np.minimum(deg, clip).astype(np.float64)
    res = []
    for _ in range(I):
        frontier = rng.choice(N, m, replace=False)
        fdeg = degc[frontier]
        sampled = set(frontier.tolist())
        steps = 0
        while len(sampled) < n and steps < max_steps:
            cum = np.cumsum(fdeg)
            if cum[-1] <= 0:
                break
            k = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), m - 1)
            u = frontier[k]
            v = int(indices[indptr[u] + rng.integers(deg[u])])
            frontier[k] = v
            fdeg[k] = degc[v]
            sampled.add(v)
            steps += 1
        res.append(torch.tensor(sorted(sampled), dtype=g.idtype, device=g.device))
    return res
