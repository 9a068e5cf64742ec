"""node2vec walks (Grover & Leskovec 2016) on a :class:`~.random_walk.WalkCSR` (family ``walks``: the
Philox counter layout is in :mod:`.random_walk`; the Triton launcher in :mod:`.launchers`; the
compiled CPU twin of the unweighted walk in :mod:`dgl_accel.core.jit.walks`).

>>> from dgl_accel.core.csr import Structure
>>> from dgl_accel.core.sampling.walks.random_walk import WalkCSR
>>> ring = Structure(indptr=torch.tensor([0, 1, 2, 3]), indices=torch.tensor([1, 2, 0]),
...                  eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
>>> node2vec_random_walk(WalkCSR(ring), torch.tensor([0]), 1.0, 1.0, 3, seed=0)[0].tolist()
[[0, 1, 2, 0]]
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ...jit import runtime
from ...jit import walks as jit_walks
from ..arrays import OneThread
from ..checks import check_length, check_positive, node_ids, resolve_seed
from .launchers import node2vec_triton
from .random_walk import (
    TWO32,
    WalkCSR,
    WalkWeights,
    choose_edge,
    edge_weights,
    indices32,
    nonzero_idx,
    positions_to_eids,
    record_step,
    take_rows,
    walk_path,
    walk_words,
)

# The numpy path pays ~0.3 ms of per-call overhead per step (some 30 array passes) whatever the
# batch; the compiled loop costs ~0.1 us per walk step.  So a walk step counts as this many slots
# against runtime.MIN_WORK: from ~4 walks of 9 steps (DGL's node2vec example walks 16 per batch)
# the compiled loop runs.
STEP_WEIGHT = 64

__all__ = ["node2vec_random_walk", "EdgeHash", "edge_hash", "N2VEnvelope", "n2v_envelope", "lower_bound",
           "reverse_bounds", "MAX_TRIALS"]

MAX_TRIALS = 32       # rejection trials before the exact fallback (must be <= 4094; = kernels/walks.py's)
_CHUNK = 1 << 17      # walks per chunk: bounds temporaries; larger chunks amortise per-op overhead


def node2vec_random_walk(csr: WalkCSR, nodes, p, q, walk_length, *, weights: torch.Tensor | None = None, seed=None,
                         return_eids: bool = False):
    """node2vec walks along out-edges: ``(traces, eids)``, traces int64 [len(nodes), walk_length + 1]
    (-1 after a dead end), eids [len(nodes), walk_length] or None unless ``return_eids``.

    The first step is a first-order (uniform or ``weights``-weighted) step.  From (previous t,
    current v) the next node x is drawn with probability proportional to
    ``w(v, x) * bias(t, x)``, bias = 1/p if x == t, 1 if t -> x is an edge, 1/q otherwise, by
    rejection sampling (KnightKing): propose x first-order, accept with probability
    bias / max(1/p, 1, 1/q).  Only proposals whose acceptance depends on the neighbour test run
    it (one probe of a hash set of the graph's edges, built once per graph and cached); rejected
    walks retry as a shrinking list of pending indices, and any walk still rejected after
    ``MAX_TRIALS`` trials is sampled exactly.  Arguments as :func:`.random_walk.random_walk`.
    """
    path = walk_path(csr.deg.device, "node2vec_random_walk")
    walk_length = check_length("walk_length", walk_length)
    p = check_positive("p", p)
    q = check_positive("q", q)
    nodes = node_ids(nodes, csr.num_nodes, "nodes", max_count=2**31)
    seed = resolve_seed(seed)
    wt = edge_weights(csr, weights)
    W = nodes.numel()
    if path == "triton":
        env = n2v_envelope(csr, wt, p, q, walk_length)
        traces, pos = node2vec_triton(csr, wt, env, nodes, walk_length, seed, MAX_TRIALS)
        return traces, positions_to_eids(csr, pos) if return_eids else None
    if wt is None and runtime.worth(W * walk_length * STEP_WEIGHT):
        # compiled per-walk loop: same walks (see jit.walks.node2vec for the fallback's rounding)
        env = n2v_envelope(csr, wt, p, q, walk_length)
        scale = alt = None
        if env.edge is not None:
            scale, alt = (t.numpy() for t in env.scale_alt())
        tr, ps = jit_walks.node2vec(csr.start.numpy(), csr.deg.numpy(), csr.indices.numpy(), scale, alt,
                                    nodes.numpy(), 0, walk_length, seed, env, MAX_TRIALS)
        return torch.from_numpy(tr), positions_to_eids(csr, torch.from_numpy(ps)) if return_eids else None
    traces = torch.full((W, walk_length + 1), -1, dtype=torch.int64)
    eids = torch.full((W, walk_length), -1, dtype=torch.int64) if return_eids else None
    with OneThread(work=W):
        env = n2v_envelope(csr, wt, p, q, walk_length)
        eh = edge_hash(csr) if walk_length > 1 else None
        for lo in range(0, W, _CHUNK):
            hi = min(W, lo + _CHUNK)
            tr, ei = _n2v_chunk(csr, wt, env, eh, nodes[lo:hi], lo, walk_length, seed, return_eids)
            traces[lo:hi] = tr.t()
            if return_eids:
                eids[lo:hi] = ei.t()
    return traces, eids


# ------------------------------------------------------------------------- neighbour test
_HASH_MUL = 0x9E3779B97F4A7C15 - 2 ** 64   # Fibonacci hashing constant as a signed int64
_HASH_WIDTH = 4                            # slots per bucket (one 32-byte row)


class EdgeHash:
    """Bucketed hash set of the distinct edges (a, b), key ``a * N + b``, built once per graph
    (cached on the WalkCSR) and probed fully vectorised with no probe loop: bucket
    ``h(key) = top bits of key * 0x9E3779B97F4A7C15`` (multiplicative hashing) is a row of
    ``_HASH_WIDTH`` slots (-1 = empty, filled left to right), one gather per query.  With at
    least as many buckets as edges (mean load <= 1 key per bucket) under 0.5% of the keys spill
    from full buckets into a sorted overflow array, searched only for queries that miss in a full
    bucket."""

    __slots__ = ("table", "mask", "shift", "n", "overflow")

    def __init__(self, csr: WalkCSR):
        n = max(csr.num_nodes, 1)
        rows = torch.repeat_interleave(torch.arange(csr.num_nodes, dtype=torch.int64), csr.deg)
        keys = torch.unique_consecutive(rows * n + csr.indices)  # rows sorted: keys are sorted
        bits = max(4, int(max(1, keys.numel()) - 1).bit_length())
        self.n, self.mask, self.shift = n, (1 << bits) - 1, 64 - bits
        bkt = self._home(keys)
        bkt, order = torch.sort(bkt, stable=True)
        keys = keys[order]
        first = torch.searchsorted(bkt, bkt)                     # first key of each one's bucket
        rank = torch.arange(keys.numel(), dtype=torch.int64) - first
        fits = rank < _HASH_WIDTH
        table = torch.full((1 << bits, _HASH_WIDTH), -1, dtype=torch.int64)
        table[bkt[fits], rank[fits]] = keys[fits]
        self.table = table
        self.overflow = torch.sort(keys[~fits]).values

    def _home(self, keys: torch.Tensor) -> torch.Tensor:
        return ((keys * _HASH_MUL) >> self.shift) & self.mask

    def contains(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Vectorised ``(a[i], b[i]) is an edge``."""
        key = a.to(torch.int64) * self.n + b
        rows = take_rows(self.table, self._home(key))
        found = rows[:, 0] == key
        for j in range(1, rows.shape[1]):   # column compares: ~3x faster than (==).any(1)
            found |= rows[:, j] == key
        if self.overflow.numel():
            k = nonzero_idx(~found & (rows[:, -1] != -1))   # missed in a full bucket
            if k.numel():
                kk = key.index_select(0, k)
                i = torch.searchsorted(self.overflow, kk).clamp_(max=self.overflow.numel() - 1)
                found.index_copy_(0, k, self.overflow.index_select(0, i) == kk)
        return found


def edge_hash(csr: WalkCSR) -> EdgeHash:
    """The :class:`EdgeHash` of ``csr`` (built on first use, cached on it)."""
    if csr.ehash is None:
        csr.ehash = EdgeHash(csr)
    return csr.ehash


# ---------------------------------------------------------------------------- envelope & steps
def lower_bound(csr: WalkCSR, rows: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """Absolute CSR position of the first entry >= val in each row (row end if none)."""
    base = csr.start[rows].clone()
    n = csr.deg[rows]
    if base.numel() == 0:
        return base
    ind = csr.indices
    nmax = int(n.max())
    while nmax > 1:
        half = n >> 1
        mid = base + half
        # Rows with no entries may start at num_edges: clamp (half == 0 keeps base for them).
        base = torch.where(ind[mid.clamp(max=csr.num_edges - 1)] < vals, mid, base)
        n = n - half
        nmax -= nmax >> 1
    nz = csr.deg[rows] > 0
    last = ind[torch.minimum(base, torch.full_like(base, max(csr.num_edges - 1, 0)))]
    return base + (nz & (last < vals)).to(torch.int64)


def reverse_bounds(csr: WalkCSR):
    """For each CSR position e (edge a -> b): CSR range [lo, hi) of the edges b -> a (cached)."""
    if csr.rev is None:
        dev = csr.deg.device
        rows = torch.repeat_interleave(torch.arange(csr.num_nodes, dtype=torch.int64, device=dev), csr.deg)
        b = csr.indices
        lo_all = torch.empty(csr.num_edges, dtype=torch.int64, device=dev)
        hi_all = torch.empty(csr.num_edges, dtype=torch.int64, device=dev)
        for lo in range(0, csr.num_edges, 1 << 20):  # bounded temporaries
            hi = min(csr.num_edges, lo + (1 << 20))
            lo_all[lo:hi] = lower_bound(csr, b[lo:hi], rows[lo:hi])
            hi_all[lo:hi] = lower_bound(csr, b[lo:hi], rows[lo:hi] + 1)
        csr.rev = (lo_all, hi_all)
    return csr.rev


class N2VEnvelope(NamedTuple):
    """Per-call node2vec constants.  Per CSR position e (edge t -> v, the walk's last edge):
    ``scale[e]`` = envelope mass at v / 2**32, ``alt[e]`` = the position the trial takes when it
    lands outside v's first-order box: the first edge v -> t (outlier box) or, when there is no
    box, v's last edge (only reachable through float rounding).  Both sit in one row of ``edge``
    so a walk's step costs one random gather for them."""
    c: float
    inv_c: float
    thr_t: int
    thr_lo: int
    thr_hi: int
    nb_accepts: bool          # in [thr_lo, thr_hi): accept iff (t, x) is an edge (else iff not)
    edge: torch.Tensor | None  # [E, 2] int64 rows (scale as float64 bits, alt): one gather per walk
    main: torch.Tensor | None  # weighted only: c * row weight sum per node
    p: float
    q: float

    def scale_alt(self):
        """(scale [E] float64, alt [E] int64) columns of ``edge`` (length > 1 only)."""
        return self.edge[:, 0].contiguous().view(torch.float64), self.edge[:, 1].contiguous()


def n2v_envelope(csr: WalkCSR, wt: WalkWeights | None, p: float, q: float, length: int) -> N2VEnvelope:
    """The :class:`N2VEnvelope` of one call (shared by the CPU loops and the kernel), cached on the
    CSR: its per-edge arrays cost O(E) to build, 6 ms on Cora, where a 16-walk call of DGL's
    node2vec example walks in well under 1 ms."""
    key = (id(wt), float(p), float(q), length > 1)
    hit = csr.envelopes.get(key)
    if hit is not None and hit[0] is wt:  # the identity check: an id is reused only after its object died
        return hit[1]
    env = _build_envelope(csr, wt, p, q, length)
    if len(csr.envelopes) >= 8:  # a few (p, q) settings per graph: drop the oldest
        csr.envelopes.pop(next(iter(csr.envelopes)))
    csr.envelopes[key] = (wt, env)
    return env


def _build_envelope(csr: WalkCSR, wt: WalkWeights | None, p: float, q: float, length: int) -> N2VEnvelope:
    # Envelope (KnightKing's outlier folding): c = max(1, 1/q) on every out-edge of v, plus an
    # "outlier" box of mass m(v->t) * (1/p - c) on the return edge when 1/p > c, where m(v->t)
    # is the count (weight) of edges v -> t, precomputed per edge.  A trial draws r uniform in
    # the envelope's mass from one word: r < c * mass(v) proposes the first-order neighbour
    # r / (c * mass(v)), otherwise x = t.  Proposal x is accepted with probability
    # target / envelope: 1 for x == t (envelope there is max(c, 1/p) = bias when 1/p > c, else
    # 1/p / c), b(x) / c otherwise; only b(x) in {1, 1/q} needs the neighbour test, and only
    # when the acceptance word falls between the two thresholds.
    bp, bq = 1.0 / p, 1.0 / q
    c = max(1.0, bq)
    extra = max(0.0, bp - c)

    def thr(x):
        return int(min(TWO32, -(-x * TWO32 // 1)))
    thr_t = thr(bp / max(c, bp))
    thr_1, thr_q = thr(1.0 / c), thr(bq / c)
    edge = main = None
    if length > 1:
        dst = csr.indices
        mass = csr.deg.to(torch.float64) if wt is None else wt.rowsum
        tot = mass[dst] * c
        last = csr.start[dst] + csr.deg[dst] - 1
        if extra > 0:
            lo, hi = reverse_bounds(csr)
            rmass = (hi - lo).to(torch.float64) if wt is None else wt.before[hi] - wt.before[lo]
            tot = tot + rmass * extra
            alt = torch.where(hi > lo, lo, last)
        else:
            alt = last
        edge = torch.stack([(tot / TWO32).view(torch.int64), alt], 1)
        if wt is not None:
            main = mass * c
    return N2VEnvelope(c, 1.0 / c, thr_t, min(thr_1, thr_q), max(thr_1, thr_q), thr_1 > thr_q,
                        edge, main, p, q)


def _n2v_chunk(csr, wt, env, eh, start_nodes, first_id, length, seed, return_eids):
    # Node ids travel as int32 when they fit (half the bytes for the indices gathers).
    indices = indices32(csr)
    nid = indices.dtype
    C = start_nodes.numel()
    tr = torch.full((length + 1, C), -1, dtype=nid)
    ei = torch.full((length, C), -1, dtype=torch.int64) if return_eids else None
    tr[0] = start_nodes
    deg_arr = csr.deg if wt is None else wt.deg
    thr_t, thr_lo, thr_hi = env.thr_t, env.thr_lo, env.thr_hi
    test_nb = thr_hi > thr_lo
    ids = torch.arange(first_id, first_id + C, dtype=torch.int64)
    pos = None  # chunk positions of the live walks; None = all
    cur = start_nodes.to(nid)
    prev = prev_e = None
    for s in range(length):
        deg = deg_arr.index_select(0, cur)
        if not bool((deg > 0).all()):
            sel = (deg > 0).nonzero().squeeze(1)
            cur, deg, ids = cur[sel], deg[sel], ids[sel]
            pos = sel if pos is None else pos[sel]
            if prev is not None:
                prev, prev_e = prev[sel], prev_e[sel]
        if cur.numel() == 0:
            break
        if prev is None:  # first-order first step
            e = choose_edge(csr, wt, cur, deg, walk_words(seed, ids, 0)[0])
            nxt = indices.index_select(0, e)
        else:
            e, nxt = _n2v_step(csr, wt, env, eh, cur, deg, prev, prev_e, ids, seed, s,
                               thr_t, thr_lo, thr_hi, test_nb)
        record_step(tr, ei, s, pos, nxt, csr.eids, e, return_eids)
        prev, prev_e, cur = cur, e, nxt
    return tr, ei


def _n2v_step(csr, wt, env, eh, cur, deg, prev, prev_e, ids, seed, s, thr_t, thr_lo, thr_hi, test_nb):
    """CSR positions and heads of the next edges of walks at ``cur`` (all with out-edges) coming
    from ``prev`` via ``prev_e``: rejection trials on a shrinking index list ``P`` of pending walks
    (None = all), then the exact fallback."""
    indices = indices32(csr)
    ed = take_rows(env.edge, prev_e)
    scale, alt = ed[:, 0].view(torch.float64), ed[:, 1]
    start = csr.start.index_select(0, cur)
    if wt is not None:
        main = env.main.index_select(0, cur)
        last = start + csr.deg[cur] - 1
    inv_c = env.inv_c
    e = None
    P = None
    w_next = None
    for t in range(MAX_TRIALS):
        if t & 1 == 0:
            words = walk_words(seed, ids if P is None else ids.index_select(0, P), (s << 12) | (t >> 1))
            w, u = words[0], words[1]
        else:
            w, u = w_next
        if P is None:
            p_scale, p_alt, p_start, p_prev = scale, alt, start, prev
        else:
            p_scale, p_alt, p_start, p_prev = (a.index_select(0, P) for a in (scale, alt, start, prev))
        r = w.to(torch.float64).mul_(p_scale)
        if wt is None:
            p_deg = deg if P is None else deg.index_select(0, P)
            j = (r if inv_c == 1.0 else r * inv_c).to(torch.int64)
            cand = torch.where(j < p_deg, p_start + j, p_alt)
        else:
            p_main = main if P is None else main[P]
            p_cur = cur if P is None else cur[P]
            frac = (r / p_main).clamp_(max=1.0 - 2.0 ** -40)
            pos = torch.searchsorted(wt.key, p_cur.to(torch.float64) + frac, right=True)
            pos = torch.minimum(pos, last if P is None else last[P])
            cand = torch.where(r < p_main, pos, p_alt)
        x = indices.index_select(0, cand)
        is_t = x == p_prev
        if thr_t >= TWO32:
            acc = is_t | (u < thr_lo)
        else:
            acc = torch.where(is_t, u < thr_t, u < thr_lo)
        if test_nb:
            need = ~is_t & (u >= thr_lo)
            if thr_hi < TWO32:
                need &= u < thr_hi
            k = nonzero_idx(need)
            if k.numel():
                nb = eh.contains(p_prev.index_select(0, k), x.index_select(0, k))
                acc.index_copy_(0, k, nb if env.nb_accepts else ~nb)
        if P is None:
            e, nxt = cand, x
        else:
            e.index_copy_(0, P, cand)
            nxt.index_copy_(0, P, x)
        rej = nonzero_idx(~acc)
        if rej.numel() == 0:
            return e, nxt
        if t & 1 == 0:
            w_next = (words[2].index_select(0, rej), words[3].index_select(0, rej))
        P = rej if P is None else P.index_select(0, rej)
    ex = _n2v_exact(csr, wt, eh, cur[P], prev[P], ids[P], seed, s, env.p, env.q)
    e[P] = ex
    nxt[P] = indices[ex]
    return e, nxt


def _n2v_exact(csr, wt, eh, cur, prev, ids, seed, s, p, q):
    """Exact second-order sampling for walks (cur, prev): enumerate cur's out-edges, weight
    them by w * bias, and invert the per-walk cdf with one word (block (s << 12) | 4095)."""
    deg = csr.deg[cur]
    seg = torch.repeat_interleave(torch.arange(cur.numel(), dtype=torch.int64), deg)
    seg_start = torch.cumsum(deg, 0) - deg
    edge = csr.start[cur][seg] + (torch.arange(seg.numel(), dtype=torch.int64) - seg_start[seg])
    x = csr.indices[edge]
    t = prev[seg]
    nb = eh.contains(t, x)
    bias = torch.where(x == t, torch.full(x.shape, 1.0 / p, dtype=torch.float64),
                       torch.where(nb, torch.ones(x.shape, dtype=torch.float64),
                                   torch.full(x.shape, 1.0 / q, dtype=torch.float64)))
    if wt is not None:
        bias = bias * wt.w[edge]
    cum = torch.cumsum(bias, 0)
    before = torch.cat([torch.zeros(1, dtype=torch.float64), cum])
    tot = before[seg_start + deg] - before[seg_start]
    local = cum - before[seg_start][seg]
    key = seg.to(torch.float64) + torch.where(local >= tot[seg], torch.ones_like(local), local / tot[seg])
    u = walk_words(seed, ids, (s << 12) | 4095)[0].to(torch.float64) / TWO32
    k = torch.searchsorted(key, torch.arange(cur.numel(), dtype=torch.float64) + u, right=True)
    k = torch.minimum(k, seg_start + deg - 1)
    return edge[k]
