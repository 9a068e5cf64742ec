"""Compiled CPU loops (numba) for sampling and aggregation hot paths, bit-identical to the numpy
and torch versions they replace.

Why: the numpy path of the neighbour choice runs ~100 array passes per layer (Philox rounds,
Floyd's slots, padding and gathers) over arrays of a few thousand transits, so it is bound by
per-call overhead, and numpy cannot use the second core (threads measured slower: the GIL is
taken between every array op).  DGL's C++ sampler runs one loop per transit on all cores.  These
loops do the same: one pass per transit, Philox evaluated in registers, ``prange`` over transits.

Every function here computes exactly what its numpy twin computes (tests compare them on
hypothesis graphs), so numba is an accelerator, not a dependency: without it, or with
``DGL_ACCEL_NUMBA=0``, the numpy path runs.  Functions are compiled on first use (about a
second each) and cached on disk next to this file.
"""
from __future__ import annotations

import multiprocessing
import os
import types

import numpy as np

try:  # pragma: no branch
    if os.environ.get("DGL_ACCEL_NUMBA", "1") == "0":
        raise ImportError("disabled by DGL_ACCEL_NUMBA=0")
    import numba
    from numba import njit, prange
    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None
    AVAILABLE = False

# Work (sampled slots) below which the numpy path is used: a compiled call has ~10 us of dispatch
# overhead, a thread fork-join more; tiny batches gain nothing.
MIN_WORK = 2048

_M32 = np.uint64(0xFFFFFFFF)
_KA, _KB = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_RA, _RB = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_S32 = np.uint64(32)


def enabled() -> bool:
    return AVAILABLE


_PARALLEL_PID = None


def parallel_allowed() -> bool:
    """Whether this process may run numba's parallel regions (the bulk sampler's kernels).

    Why not always: without TBB numba runs them on GNU OpenMP, which kills a forked child that
    enters a parallel region after its parent did ("fork() called from a process already using
    GNU OpenMP"): exactly a DGL DataLoader with ``num_workers > 0`` after any sampling in the main
    process, and a child of a parent that used GNU OpenMP in any library can hang instead.  So
    parallel regions run only in a process that is not a multiprocessing child, and only in the
    one that ran the first; children (and everyone under ``DGL_ACCEL_NUMBA_PARALLEL=0``) run the
    serial twins, with identical results."""
    global _PARALLEL_PID
    if os.environ.get("DGL_ACCEL_NUMBA_PARALLEL", "1") == "0":
        return False
    if multiprocessing.parent_process() is not None:
        # a DataLoader worker or other multiprocessing child: its parent may have used GNU OpenMP
        # (DGL's and numba's kernels share the system libgomp), and a forked child entering a
        # parallel region then hangs
        return False
    pid = os.getpid()
    if _PARALLEL_PID is None:
        _PARALLEL_PID = pid
    return _PARALLEL_PID == pid


def twins(fn):
    """(parallel, serial) compiled versions of the plain function ``fn`` (``prange`` loops run
    serially in the second).  Each gets its own name so numba's disk cache, which keys entries by
    function name and signature but not by the parallel flag, keeps them apart."""
    out = []
    for suffix, parallel in (("_parallel", True), ("_serial", False)):
        f = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
        f.__qualname__ = fn.__qualname__ + suffix
        f.__doc__ = fn.__doc__
        out.append(njit(cache=True, parallel=parallel)(f))
    return tuple(out)


if AVAILABLE:
    @njit(cache=True, inline="always")
    def _philox(k0, k1, counter):
        """Philox4x32-10 of a non-negative int64 counter (words 2, 3 zero), as in rng.philox4x32_np."""
        c = np.uint64(counter)
        c0 = c & _M32
        c1 = c >> _S32
        c2 = np.uint64(0)
        c3 = np.uint64(0)
        for _ in range(10):
            b = c2 * _RB
            a = c0 * _RA
            c0 = (b >> _S32) ^ c1 ^ k0
            c2 = (a >> _S32) ^ c3 ^ k1
            c1 = b & _M32
            c3 = a & _M32
            k0 = (k0 + _KA) & _M32
            k1 = (k1 + _KB) & _M32
        return c0, c1, c2, c3

    @njit(cache=True)
    def _uniform_choice(indptr, v, offs, fanout, seed, step, num_nodes, replace, out):
        """Fill ``out[offs[i]:offs[i+1]]`` with transit i's chosen CSR positions in slot order."""
        k0 = np.uint64(seed) & _M32
        k1 = (np.uint64(seed) >> _S32) & _M32
        W = (fanout + 3) // 4
        for i in prange(v.shape[0]):
            vi = v[i]
            start = indptr[vi]
            d = indptr[vi + 1] - start
            o = offs[i]
            if fanout == -1 or (not replace and d <= fanout):
                for j in range(offs[i + 1] - o):
                    out[o + j] = start + j
                continue
            if d == 0:
                continue
            base = (step * num_nodes + vi) * W
            if replace:
                for w in range(W):
                    r = _philox(k0, k1, base + w)
                    for q in range(min(4, fanout - 4 * w)):
                        out[o + 4 * w + q] = start + np.int64(r[q] % np.uint64(d))
            else:
                # Floyd: slot j draws t in [0, m_j], m_j = d - fanout + j; a repeat of an earlier
                # slot's value takes m_j instead (m_j exceeds every earlier value).
                for w in range(W):
                    r = _philox(k0, k1, base + w)
                    for q in range(min(4, fanout - 4 * w)):
                        j = 4 * w + q
                        m = d - fanout + j
                        t = np.int64(r[q] % np.uint64(m + 1))
                        for p in range(j):
                            if out[o + p] == start + t:
                                t = m
                                break
                        out[o + j] = start + t

    @njit(cache=True)
    def _relabel(src, dst, n, mark, mapping):
        """Block relabelling (dst ids -> 0..T-1, other sources -> T.. in increasing id) with the
        scratch arrays ``mark`` (bool [n], all False on entry and on exit) and ``mapping``.
        The marking loop races only on writing the same value, which is benign."""
        T = dst.shape[0]
        for i in prange(src.shape[0]):
            mark[src[i]] = True
        for i in range(T):
            mark[dst[i]] = False
            mapping[dst[i]] = i
        new = np.nonzero(mark)[0]
        for k in prange(new.shape[0]):
            mapping[new[k]] = T + k
            mark[new[k]] = False
        local = np.empty(src.shape[0], dtype=np.int64)
        for i in prange(src.shape[0]):
            local[i] = mapping[src[i]]
        return new.astype(np.int64), local


    @njit(cache=True)
    def _induced(indptr, indices, data, nodes, loc, local, kept, sub_indptr):
        """Node-induced CSC: rows ``nodes`` of (indptr, indices), sources kept where ``loc`` (local
        id + 1, 0 = not chosen) is set; writes ``local``/``kept``/``sub_indptr``, returns the count."""
        k = nodes.shape[0]
        o = 0
        for i in range(k):
            sub_indptr[i] = o
            v = nodes[i]
            for e in range(indptr[v], indptr[v + 1]):
                # branch-free: always write, advance only for chosen sources (about a quarter of
                # the entries in a GraphSAINT subgraph: a branch would mispredict constantly)
                lv = loc[indices[e]]
                local[o] = lv - 1
                kept[o] = data[e]
                o += lv != 0
        sub_indptr[k] = o
        return o


    @njit(cache=True)
    def _induced_symmetric(indptr, indices, eids, rev_eids, loop_eid, nodes, loc, src, dst, eid, reid):
        """COO of the subgraph of a symmetric simple graph from its ``src < dst`` half (see
        :mod:`dgl_accel.sampling.induced_sym`): kept half edges, their reverses, then self-loops.
        Reverse ids come from ``rev_eids`` (aligned with the half CSR) into ``reid``: sequential
        reads, where a lookup by edge id would miss the cache on every kept edge."""
        k = nodes.shape[0]
        o = 0
        for i in range(k):
            v = nodes[i]
            for e in range(indptr[v], indptr[v + 1]):
                lv = loc[indices[e]]
                src[o] = lv - 1
                dst[o] = i
                eid[o] = eids[e]
                reid[o] = rev_eids[e]
                o += lv != 0
        for j in range(o):
            src[o + j] = dst[j]
            dst[o + j] = src[j]
            eid[o + j] = reid[j]
        t = 2 * o
        if loop_eid.shape[0]:
            for i in range(k):
                le = loop_eid[nodes[i]]
                if le >= 0:
                    src[t] = i
                    dst[t] = i
                    eid[t] = le
                    t += 1
        return t


    @njit(cache=True, inline="always")
    def _has_edge(start, deg, indices, a, b):
        """Is a -> b an edge?  Binary search in a's row (rows are sorted)."""
        lo = start[a]
        hi = lo + deg[a]
        while lo < hi:
            mid = (lo + hi) >> 1
            if indices[mid] < b:
                lo = mid + 1
            else:
                hi = mid
        return lo < start[a] + deg[a] and indices[lo] == b

    @njit(cache=True)
    def _node2vec(start, deg, indices, scale, alt, nodes, first_id, length, seed, inv_c, thr_t, thr_lo, thr_hi,
                  nb_accepts, test_nb, inv_p, inv_q, max_trials, traces, pos):
        """Unweighted node2vec walks with the rules and Philox counters of ``walks._n2v_chunk`` /
        ``_n2v_step`` / ``_n2v_exact`` (see there).  Step-major (all walks advance one step, then
        the next), not walk-major: consecutive walks are independent, so their cache misses
        overlap; one walk at a time serialises them and ran 1.5x slower than numpy."""
        k0 = np.uint64(seed) & _M32
        k1 = (np.uint64(seed) >> _S32) & _M32
        two32 = np.int64(1) << 32
        W = nodes.shape[0]
        cur = nodes.copy()
        prev = np.full(W, -1, dtype=np.int64)
        prev_e = np.full(W, -1, dtype=np.int64)
        for i in range(W):
            traces[0, i] = cur[i]
        for s in range(length):
            blk = np.int64(s) << 12
            for i in range(W):
                c = cur[i]
                if c < 0:
                    continue
                d = deg[c]
                if d == 0:
                    cur[i] = -1  # dead end: the rest of the trace stays -1
                    continue
                wid = np.int64(first_id + i) << 32
                pv = prev[i]
                if pv < 0:  # first-order first step: word 0 of block 0
                    w0, w1, w2, w3 = _philox(k0, k1, wid)
                    e = start[c] + np.int64((w0 * np.uint64(d)) >> _S32)
                else:
                    e = -1
                    pe = prev_e[i]
                    sc = scale[pe]
                    for t in range(max_trials):
                        if t % 2 == 0:
                            w0, w1, w2, w3 = _philox(k0, k1, wid | blk | (t >> 1))
                            w, u = w0, w1
                        else:
                            w, u = w2, w3
                        r = np.float64(w) * sc
                        j = np.int64(r) if inv_c == 1.0 else np.int64(r * inv_c)
                        cand = start[c] + j if j < d else alt[pe]
                        x = indices[cand]
                        is_t = x == pv
                        if thr_t >= two32:
                            acc = is_t or u < np.uint64(thr_lo)
                        else:
                            acc = (u < np.uint64(thr_t)) if is_t else (u < np.uint64(thr_lo))
                        if test_nb and not is_t and u >= np.uint64(thr_lo) and (thr_hi >= two32 or u < np.uint64(thr_hi)):
                            nb = _has_edge(start, deg, indices, pv, x)
                            acc = nb if nb_accepts else not nb
                        if acc:
                            e = cand
                            break
                    if e < 0:  # exact fallback: invert this walk's cdf of bias with one word
                        st = start[c]
                        tot = 0.0
                        for k in range(d):
                            x = indices[st + k]
                            tot += inv_p if x == pv else (1.0 if _has_edge(start, deg, indices, pv, x) else inv_q)
                        w0, w1, w2, w3 = _philox(k0, k1, wid | blk | 4095)
                        uu = np.float64(w0) / 4294967296.0
                        cum = 0.0
                        e = st + d - 1
                        for k in range(d):
                            x = indices[st + k]
                            cum += inv_p if x == pv else (1.0 if _has_edge(start, deg, indices, pv, x) else inv_q)
                            key = 1.0 if cum >= tot else cum / tot
                            if key > uu:
                                e = st + k
                                break
                nxt = indices[e]
                traces[s + 1, i] = nxt
                pos[s, i] = e
                prev[i] = c
                prev_e[i] = e
                cur[i] = nxt
    def _rows_spmm_impl(indptr, indices, x, col_scale, row_scale, out):
        """out[r] = row_scale[r] * sum_k col_scale[c_k] * x[c_k] over row r's CSR entries, every row
        written (empty rows: 0).  Sums in CSR order, as DGL's CPU kernel does.  Rows are cut into
        64 ranges of about equal edge counts (one parallel task each): frontier rows are few and
        heavy next to many empty ones."""
        F = out.shape[1]
        N = out.shape[0]
        nch = 64
        bounds = np.searchsorted(indptr, np.arange(nch + 1) * (indptr[N] // nch + 1))
        bounds = np.minimum(bounds, N)  # searchsorted may answer N + 1 past the last row pointer
        bounds[0] = 0
        bounds[nch] = N
        for ch in prange(nch):
            acc = np.empty(F, dtype=out.dtype)  # one per range: no allocation per row
            for r in range(bounds[ch], bounds[ch + 1]):
                for f in range(F):
                    acc[f] = 0
                for k in range(indptr[r], indptr[r + 1]):
                    c = indices[k]
                    w = col_scale[c]
                    for f in range(F):
                        acc[f] += x[c, f] * w
                rs = row_scale[r]
                for f in range(F):
                    out[r, f] = acc[f] * rs

    _rows_spmm_parallel, _rows_spmm_serial = twins(_rows_spmm_impl)

    @njit(cache=True)
    def _scatter_rows(out, rows, vals, scale):
        """out[rows[i]] = vals[i] * scale[i] (scale empty: no scaling); rows are distinct."""
        F = vals.shape[1]
        for i in range(rows.shape[0]):
            r = rows[i]
            if scale.shape[0]:
                s = scale[i]
                for f in range(F):
                    out[r, f] = vals[i, f] * s
            else:
                for f in range(F):
                    out[r, f] = vals[i, f]


def node2vec(start, deg, indices, scale, alt, nodes, first_id: int, length: int, seed: int, env, max_trials: int):
    """Compiled twin of the unweighted CPU node2vec (``walks._n2v_chunk``): (traces [W, length+1],
    CSR positions [W, length]), int64, -1 after a dead end.  Identical to the numpy path except in
    the exact fallback (after ``max_trials`` rejections), where the cdf is summed per walk (as the
    Triton kernel does) rather than across the pending walks: the last bits can differ there."""
    W = nodes.shape[0]
    # step-major buffers (a step writes contiguous memory), transposed on return
    traces = np.full((length + 1, W), -1, dtype=np.int64)
    pos = np.full((length, W), -1, dtype=np.int64)
    f1 = np.zeros(1, dtype=np.float64)
    i1 = np.zeros(1, dtype=np.int64)
    _node2vec(start, deg, indices, f1 if scale is None else scale, i1 if alt is None else alt, nodes,
              np.int64(first_id), np.int64(length), np.uint64(seed), float(env.inv_c), np.int64(env.thr_t),
              np.int64(env.thr_lo), np.int64(env.thr_hi), bool(env.nb_accepts), bool(env.thr_hi > env.thr_lo),
              1.0 / env.p, 1.0 / env.q, np.int64(max_trials), traces, pos)
    return np.ascontiguousarray(traces.T), np.ascontiguousarray(pos.T)


def induced_symmetric(half, nodes, loc, work: int, np_idt):
    """Compiled twin of :func:`dgl_accel.sampling.induced_sym.induced_subgraph_symmetric`'s arrays:
    (src, dst) in ``np_idt`` and int64 parent edge ids, in the same order."""
    size = 2 * work + nodes.shape[0]
    src = np.empty(size, dtype=np_idt)
    dst = np.empty(size, dtype=np_idt)
    eid = np.empty(size, dtype=np.int64)
    loops = half.loop_eid if half.loop_eid is not None else np.empty(0, dtype=np.int64)
    reid = np.empty(work, dtype=np.int64)
    t = _induced_symmetric(half.indptr, half.indices, half.eids, half.rev_eids, loops, nodes, loc, src, dst, eid,
                           reid)
    return src[:t], dst[:t], eid[:t]


def induced_entries(indptr, indices, data, nodes, loc, local_buf, kept_buf):
    """Compiled twin of the filter in :func:`dgl_accel.sampling.induced.induced_entries` (same
    entries in the same order): ``loc`` marks the chosen nodes, the buffers hold every gathered
    entry.  Returns (int64 sub_indptr, int32 local ids, kept data) as fresh arrays."""
    sub_indptr = np.empty(nodes.shape[0] + 1, dtype=np.int64)
    o = _induced(indptr, indices, data, nodes, loc, local_buf, kept_buf, sub_indptr)
    return sub_indptr, local_buf[:o].copy(), kept_buf[:o].copy()


def scatter_rows(out, rows, vals, scale=None) -> None:
    """``out[rows] = vals * scale[:, None]`` in one pass (numpy arrays; ``rows`` distinct).  torch's
    index_copy_ plus a separate scaling pass cost 3x more on the execution-path outputs."""
    _scatter_rows(out, rows, vals, np.empty(0, dtype=vals.dtype) if scale is None else scale)


def rows_spmm(indptr, indices, x, col_scale, row_scale, out) -> None:
    """``out = row_scale * (A (col_scale * x))`` for the CSR ``A`` (numpy arrays; scales may be
    None), writing every row of ``out``.  Parallel over row chunks where allowed
    (:func:`parallel_allowed`)."""
    fn = _rows_spmm_parallel if parallel_allowed() else _rows_spmm_serial
    # a missing scale is 1 (x * 1.0 is exact); ones cost one small allocation, branches per edge more
    fn(indptr, indices, x, np.ones(x.shape[0], dtype=out.dtype) if col_scale is None else col_scale,
       np.ones(out.shape[0], dtype=out.dtype) if row_scale is None else row_scale, out)


def uniform_choice_flat(indptr: np.ndarray, v: np.ndarray, fanout: int, seed: int, step: int,
                        num_nodes: int, replace: bool, counts: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Compiled twin of :func:`dgl_accel.sampling.choice.uniform_choice_flat` (counts and their
    exclusive scan ``offs`` computed by the caller): the positions, int64 [offs[-1]]."""
    out = np.empty(int(offs[-1]), dtype=np.int64)
    _uniform_choice(indptr, v, offs, np.int64(fanout), np.uint64(seed), np.int64(step), np.int64(num_nodes),
                    bool(replace), out)
    return out


def relabel(src: np.ndarray, dst: np.ndarray, n: int):
    """(new source ids in increasing order, local ids of ``src``) as in ``neighbor._make_block``."""
    mark = np.zeros(n, dtype=np.bool_)
    mapping = np.empty(n, dtype=np.int64)
    return _relabel(src, dst, n, mark, mapping)
