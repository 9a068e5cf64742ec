"""Random walks on the CPU, vectorised in torch across walks (Python loops only over steps):
DeepWalk / weighted / restart walks (``random_walk``), node2vec (``node2vec_random_walk``)
and GraphSAINT's frontier sampler (``multi_dimensional_random_walk``).

Graphs on a GPU (or any graph with the backend forced to ``triton``) run the Triton kernels of
``dgl_accel/kernels/walks.py`` instead (launchers in ``walk_kernels.py``): same counters, same
tables, same samples (see ``_walk_path``).

Walks move along out-edges, like ``dgl.sampling.random_walk`` on a homogeneous graph.

Randomness
----------
Every random number comes from Philox4x32-10 (see :mod:`dgl_accel.sampling.rng`), addressed by a
counter that names the decision, never by a stream position.  One Philox evaluation yields four
32-bit words (``tl.randint4x(seed, offset)`` in Triton: word k is the k-th output, and word 0
equals ``tl.randint(seed, offset)``).  The 64-bit offset is::

    offset = (walk_id << 32) | block          (walk_id < 2**31, block < 2**32)

where ``walk_id`` is the walk's position in ``nodes`` (the instance id for the frontier sampler).
A walk's samples therefore depend only on (seed, walk_id, start node, arguments): not on how many
other walks run with it, on chunking, or on which walks died earlier.

* ``random_walk``: the walk uses K words per step (K = 1, or 2 with ``restart_prob``); step s uses
  words j = s*K + k, found in ``block = j // 4``, lane ``j % 4``.  k = 0: neighbour choice,
  k = 1: restart decision (terminate iff ``word < restart_prob[s] * 2**32``).
* ``node2vec_random_walk``: step 0 uses block 0 lane 0 (first-order choice).  Rejection trial t
  (t < 2**11) of step s >= 1 uses ``block = (s << 12) | (t >> 1)``, lanes 2*(t & 1) (proposal) and
  2*(t & 1) + 1 (acceptance); a walk still rejected after ``_MAX_TRIALS`` trials is sampled
  exactly from ``block = (s << 12) | 4095`` lane 0.  (This layout predates the edge-hash-set
  neighbour test; with it, samples changed only where the former binary search reported a
  false edge (x past the end of t's row equal to the next row's first entry) and by float
  rounding of the proposal index.)
* ``multi_dimensional_random_walk``: initial roots use ``block = j // 4`` for root j (j < 2**20);
  step s uses ``block = (1 << 31) | s``, lane 0 (which frontier slot pops) and lane 1 (neighbour).

A word ``w`` picks among ``n`` items as ``(w * n) >> 32`` (bias <= n / 2**32) and is turned into a
float in [0, 1) as ``w / 2**32`` (float64).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..core import backend
from ..core import cpu_jit
from ..graph.structure import cached, check_graph, out_csr
from .rng import philox4x32

__all__ = ["random_walk", "node2vec_random_walk", "multi_dimensional_random_walk", "MDRWResult"]

_M32 = 0xFFFFFFFF
_TWO32 = float(2 ** 32)
_MAX_TRIALS = 32      # node2vec rejection trials before the exact fallback (must be <= 4094)
_CHUNK = 1 << 17      # walks per chunk: bounds temporaries; larger chunks amortise per-op overhead


# ------------------------------------------------------------------------------------- RNG
def _words(seed: int, walk_ids: torch.Tensor, block: int):
    return philox4x32(seed, (walk_ids << 32) | block)


def _nz(mask: torch.Tensor) -> torch.Tensor:
    """Indices of the True entries of a 1-D CPU bool tensor (numpy's flatnonzero: ~3x faster
    than ``torch.nonzero`` on the random masks rejection sampling produces)."""
    return torch.from_numpy(np.flatnonzero(mask.numpy()))


def _rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` for a contiguous 2-D CPU table (numpy's row take: 2-3x faster than
    ``torch.index_select`` on rows)."""
    return torch.from_numpy(table.numpy().take(idx.numpy(), axis=0))


def _pick(word: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Index in [0, n) from a 32-bit word (n < 2^31)."""
    return (word * n) >> 32


# ------------------------------------------------------------------------------ validation
def _err(expected: str, got, fix: str) -> ValueError:
    return ValueError(f"expected {expected} (got {got}). Fix: {fix}")


def _resolve_seed(seed) -> int:
    if seed is None:
        return int(torch.randint(2 ** 62, ()))
    if isinstance(seed, torch.Tensor) and seed.numel() == 1 and not seed.is_floating_point():
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
        raise _err("seed to be None or an int in [0, 2^64)", repr(seed), "pass a Python int, e.g. seed=0.")
    return seed


def _walk_path(g, op: str) -> str:
    """``"triton"`` (kernels in kernels/walks.py) or ``"native"`` (the CPU code below) for a walk
    on ``g``, as the backend chooses (CUDA graph -> Triton; CPU graph -> native unless the backend
    is forced to triton, then the interpreter runs the kernels); recorded in the stats."""
    check_graph(g)
    path = backend.choose_path(torch.empty(0, device=g.device))
    if path == "native" and g.device.type != "cpu":
        raise _err("a graph on the CPU for the native path", f"device {g.device} with the backend "
                   f"{backend.get_backend()!r}", "call g.cpu() first, or use dgl_accel.set_backend('auto') "
                   "so that CUDA graphs run the Triton kernels.")
    backend.record(op, path, g.device)
    return path


def _check_nodes(g, nodes) -> torch.Tensor:
    if not isinstance(nodes, torch.Tensor):
        try:
            nodes = torch.as_tensor(nodes, dtype=torch.int64)
        except (TypeError, ValueError, RuntimeError) as e:
            raise _err("nodes to be a 1-D tensor or list of node ids", type(nodes).__name__,
                       "pass torch.tensor([...]) of ints.") from e
    if nodes.dtype.is_floating_point or nodes.dtype == torch.bool or nodes.dtype.is_complex:
        raise _err("integer node ids", f"dtype {nodes.dtype}", "pass an integer tensor, e.g. nodes.long().")
    if nodes.dim() != 1:
        raise _err("nodes to be 1-D", f"shape {tuple(nodes.shape)}", "flatten it with nodes.reshape(-1).")
    nodes = nodes.to(device="cpu", dtype=torch.int64)
    n = g.num_nodes()
    if nodes.numel() and (int(nodes.min()) < 0 or int(nodes.max()) >= n):
        bad = nodes[(nodes < 0) | (nodes >= n)][:5].tolist()
        raise _err(f"node ids in [0, {n})", f"out-of-range ids such as {bad}",
                   "pass ids of existing nodes (g.num_nodes() is the upper bound).")
    if nodes.numel() >= 2 ** 31:
        raise _err("fewer than 2^31 walks", nodes.numel(), "split the nodes into batches.")
    return nodes


def _check_length(name: str, length) -> int:
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise _err(f"{name} to be an int >= 0", repr(length), f"pass a non-negative int {name}.")
    if length >= 2 ** 20:
        raise _err(f"{name} < 2^20", length, "split the walk into shorter pieces.")
    return length


def _check_positive(name: str, v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise _err(f"{name} to be a positive number", repr(v), f"pass e.g. {name}=1.0.") from None
    if not f > 0 or f == float("inf"):
        raise _err(f"{name} > 0 and finite", repr(v), f"pass a positive {name}, e.g. {name}=1.0.")
    return f


def _restart_probs(restart_prob, length: int):
    """None when there is no restart, else a float64 tensor [length]."""
    if restart_prob is None:
        return None
    if isinstance(restart_prob, torch.Tensor):
        rp = restart_prob.detach().to("cpu", torch.float64).reshape(-1)
        if rp.numel() != length:
            raise _err(f"restart_prob tensor with {length} entries (one per step)", f"{rp.numel()} entries",
                       "pass one probability per step, or a float.")
    else:
        try:
            rp = torch.full((length,), float(restart_prob), dtype=torch.float64)
        except (TypeError, ValueError):
            raise _err("restart_prob to be a float or tensor", repr(restart_prob), "pass e.g. 0.15.") from None
    if rp.numel() and (bool(torch.isnan(rp).any()) or float(rp.min()) < 0 or float(rp.max()) > 1):
        raise _err("restart_prob in [0, 1]", rp[(rp < 0) | (rp > 1) | torch.isnan(rp)][:5].tolist(),
                   "pass probabilities between 0 and 1.")
    if not bool((rp > 0).any()):
        return None
    return rp


# --------------------------------------------------------------------------- graph caches
class _CSR:
    """Out-CSR with int64 arrays and each row's destinations sorted (for neighbour tests)."""

    __slots__ = ("indptr", "start", "deg", "indices", "eids", "num_nodes", "num_edges", "max_deg",
                 "weights", "rev", "ehash", "indices32")

    def __init__(self, g):
        s = out_csr(g)
        indptr = s.indptr.to(torch.int64)
        indices = s.indices.to(torch.int64)
        eids = s.eids.to(torch.int64)
        n = s.num_rows
        deg = indptr[1:] - indptr[:-1]
        if indices.numel() > 1:
            rows = torch.repeat_interleave(torch.arange(n, dtype=torch.int64, device=deg.device), deg)
            key = rows * max(n, 1) + indices
            if not bool((key[1:] >= key[:-1]).all()):
                order = torch.argsort(key, stable=True)
                indices, eids = indices[order], eids[order]
        self.indptr, self.indices, self.eids = indptr, indices.contiguous(), eids.contiguous()
        self.start, self.deg = indptr[:-1].contiguous(), deg.contiguous()
        self.num_nodes, self.num_edges = n, int(indices.numel())
        self.max_deg = int(deg.max()) if n else 0
        self.weights: dict = {}  # prob field -> (version key, _Weights)
        self.rev = None          # node2vec: per position, CSR range [lo, hi) of its reverse edges (lazy)
        self.ehash = None        # node2vec: _EdgeHash of the edge set (lazy)
        self.indices32 = None    # walks: int32 copy of indices (lazy; when ids fit)


class _Weights:
    """Per-row normalised prefix sums as a globally sorted key: ``key[e] = row + cdf_row(e)``
    (float64, cdf of a row's last positive edge is exactly 1), so one ``searchsorted`` finds the
    edge for target ``row + u``.  Rows whose weights sum to 0 get degree 0 (dead ends)."""

    __slots__ = ("key", "deg", "w", "before", "rowsum")

    def __init__(self, csr: _CSR, w_edge: torch.Tensor):
        w = w_edge[csr.eids].to(torch.float64)  # weights in CSR order
        n = csr.num_nodes
        dev = csr.deg.device  # the CPU, or the graph's GPU for the Triton path
        rows = torch.repeat_interleave(torch.arange(n, dtype=torch.int64, device=dev), csr.deg)
        cum = torch.cumsum(w, 0)
        # Prefix sums up to each row start (handles rows with no edges).
        row_start_cum = torch.zeros(n, dtype=torch.float64, device=dev)
        if csr.num_edges:
            before = torch.cat([torch.zeros(1, dtype=torch.float64, device=dev), cum])
            row_start_cum = before[csr.indptr[:-1]]
            row_sum = before[csr.indptr[1:]] - row_start_cum
        else:
            row_sum = torch.zeros(n, dtype=torch.float64, device=dev)
        # Per-row cumulative sums recomputed locally for precision (no catastrophic cancellation
        # from a large global prefix): cumsum within rows via the global cumsum minus row base,
        # then renormalised; the last positive edge of each row is pinned to exactly 1.
        local = cum - row_start_cum[rows] if csr.num_edges else cum
        safe = torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum))
        cdf = (local / safe[rows]).clamp_(0.0, 1.0)
        cdf = torch.where(local >= row_sum[rows], torch.ones_like(cdf), cdf)
        self.key = rows.to(torch.float64) + cdf
        self.deg = torch.where(row_sum > 0, csr.deg, torch.zeros_like(csr.deg))
        self.w = w
        self.before = torch.cat([torch.zeros(1, dtype=torch.float64, device=dev), cum])  # prefix sums, CSR order
        self.rowsum = row_sum


def _csr(g) -> _CSR:
    return cached(g, "walks_csr", _CSR)


def _weights(g, csr: _CSR, prob) -> _Weights | None:
    if prob is None:
        return None
    if not isinstance(prob, str):
        raise _err("prob to be the name of an edge feature (str) or None", repr(prob),
                   "store the weights with g.edata['w'] = w and pass prob='w'.")
    if prob not in g.edata:
        raise _err(f"an edge feature named {prob!r}", f"edge features {sorted(g.edata.keys())}",
                   f"set g.edata[{prob!r}] = weights (one non-negative value per edge).")
    w = g.edata[prob]
    if w.dim() != 1 and not (w.dim() == 2 and w.shape[1] == 1):
        raise _err(f"g.edata[{prob!r}] to have shape ({g.num_edges()},)", f"shape {tuple(w.shape)}",
                   "store one scalar weight per edge.")
    w = w.reshape(-1)
    key = (w.data_ptr(), w._version, w.numel(), w.dtype)
    hit = csr.weights.get(prob)
    if hit is not None and hit[0] == key:
        return hit[1]
    if w.numel() != csr.num_edges:
        raise _err(f"{csr.num_edges} weights in g.edata[{prob!r}]", w.numel(), "store one weight per edge.")
    wf = w.detach().to(csr.deg.device, torch.float64)
    if wf.numel() and (bool(torch.isnan(wf).any()) or float(wf.min()) < 0 or bool(torch.isinf(wf).any())):
        raise _err(f"non-negative finite weights in g.edata[{prob!r}]",
                   f"min {float(wf.min())}, nan {bool(torch.isnan(wf).any())}",
                   "clamp the weights to >= 0 (e.g. w.clamp(min=0)).")
    out = _Weights(csr, wf)
    csr.weights[prob] = (key, out)
    return out


def _choose(csr: _CSR, wt: _Weights | None, cur: torch.Tensor, deg: torch.Tensor, word: torch.Tensor):
    """CSR position of the chosen out-edge of ``cur`` (all with deg > 0) from a 32-bit word."""
    if wt is None:
        return csr.start.index_select(0, cur) + _pick(word, deg)
    target = cur.to(torch.float64) + word.to(torch.float64) / _TWO32
    pos = torch.searchsorted(wt.key, target, right=True)
    # Guard against rounding at the row's end (cannot leave the row: key of its last edge is row+1).
    return torch.minimum(pos, csr.start[cur] + csr.deg[cur] - 1)


_HASH_MUL = 0x9E3779B97F4A7C15 - 2 ** 64   # Fibonacci hashing constant as a signed int64
_HASH_WIDTH = 4                            # slots per bucket (one 32-byte row)


class _EdgeHash:
    """Bucketed hash set of the distinct edges (a, b), key ``a * N + b``, built once per graph
    (cached on the _CSR) and probed fully vectorised with no probe loop: bucket
    ``h(key) = top bits of key * 0x9E3779B97F4A7C15`` (multiplicative hashing) is a row of
    ``_HASH_WIDTH`` slots (-1 = empty, filled left to right), one gather per query.  With at
    least as many buckets as edges (mean load <= 1 key per bucket) under 0.5% of the keys spill
    from full buckets into a sorted overflow array, searched only for queries that miss in a full
    bucket."""

    __slots__ = ("table", "mask", "shift", "n", "overflow")

    def __init__(self, csr: _CSR):
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
        rows = _rows(self.table, self._home(key))
        found = rows[:, 0] == key
        for j in range(1, rows.shape[1]):   # column compares: ~3x faster than (==).any(1)
            found |= rows[:, j] == key
        if self.overflow.numel():
            k = _nz(~found & (rows[:, -1] != -1))   # missed in a full bucket
            if k.numel():
                kk = key.index_select(0, k)
                i = torch.searchsorted(self.overflow, kk).clamp_(max=self.overflow.numel() - 1)
                found.index_copy_(0, k, self.overflow.index_select(0, i) == kk)
        return found


def _edge_hash(csr: _CSR) -> _EdgeHash:
    if csr.ehash is None:
        csr.ehash = _EdgeHash(csr)
    return csr.ehash


class _OneThread:
    """Run the step loop on one intra-op thread (restored afterwards).  Its ops are small (one
    chunk of walks) so intra-op threading only adds fork/join cost, which explodes when the cores
    are shared: measured 10-30x slower with 2 threads on a loaded 2-core machine."""

    def __enter__(self):
        self.n = torch.get_num_threads()
        if self.n != 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.n != 1:
            torch.set_num_threads(self.n)


def _record(tr, ei, s: int, pos, nodes, eids, e, return_eids: bool) -> None:
    """Write step ``s`` of the live walks: all walks when ``pos`` is None, else walks ``pos``."""
    if pos is None:
        tr[s + 1] = nodes
        if return_eids:
            ei[s] = eids[e]
    else:
        tr[s + 1].index_copy_(0, pos, nodes)
        if return_eids:
            ei[s].index_copy_(0, pos, eids[e])


def _out(W: int, cols: int, dtype) -> torch.Tensor:
    return torch.full((W, cols), -1, dtype=dtype)


# ------------------------------------------------------------------------------ random walk
def random_walk(g, nodes, length, *, prob=None, restart_prob=0.0, seed=None, return_eids=False):
    """Random walks along out-edges, one per entry of ``nodes``; drop-in for
    ``dgl.sampling.random_walk(g, nodes, length=length, prob=prob, restart_prob=restart_prob)``
    on homogeneous graphs.

    Parameters
    ----------
    g : homogeneous DGLGraph on the CPU (native path) or a GPU (Triton kernels).
    nodes : 1-D ids of the start nodes (repeat a node for several walks).
    length : number of transitions per walk (>= 0).
    prob : name of an edge feature of non-negative weights; transitions pick an out-edge with
        probability proportional to its weight (rows whose weights sum to 0 are dead ends).
        None: uniform over out-edges (DeepWalk).
    restart_prob : float or tensor [length]: probability to terminate the walk before each
        transition (DGL's semantics; the rest of the trace is -1).  0 / None: never.
    seed : int in [0, 2^64) for the Philox counters (module docstring); None draws one from
        torch's RNG, so ``torch.manual_seed`` makes runs reproducible.
    return_eids : also return the traversed edge ids.

    Returns
    -------
    ``(traces, types)`` or ``(traces, eids, types)`` like DGL: traces [len(nodes), length + 1] of
    the graph's idtype, -1 after a walk stops (dead end or restart); eids [len(nodes), length],
    -1 padded; types [length + 1] of zeros (node type ids).
    """
    path = _walk_path(g, "random_walk")
    length = _check_length("length", length)
    nodes = _check_nodes(g, nodes)
    rp = _restart_probs(restart_prob, length)
    seed = _resolve_seed(seed)
    csr = _csr(g)
    wt = _weights(g, csr, prob)
    idtype = g.idtype
    W = nodes.numel()
    thresh = None if rp is None else (rp * _TWO32).ceil().to(torch.int64).tolist()
    if path == "triton":
        from .walk_kernels import random_walk_triton

        traces, eids = random_walk_triton(csr, wt, nodes, length, thresh, seed, return_eids)
        types = torch.zeros(length + 1, dtype=idtype, device=traces.device)
        traces = traces.to(idtype)
        return (traces, eids.to(idtype), types) if return_eids else (traces, types)
    traces = _out(W, length + 1, torch.int64)
    eids = _out(W, length, torch.int64) if return_eids else None
    deg_arr = csr.deg if wt is None else wt.deg
    with _OneThread():
        for lo in range(0, W, _CHUNK):
            hi = min(W, lo + _CHUNK)
            tr, ei = _walk_chunk(csr, wt, deg_arr, nodes[lo:hi], lo, length, thresh, seed, return_eids)
            traces[lo:hi] = tr.t()
            if return_eids:
                eids[lo:hi] = ei.t()
    traces = traces.to(idtype)
    types = torch.zeros(length + 1, dtype=idtype)
    if return_eids:
        return traces, eids.to(idtype), types
    return traces, types


def _walk_chunk(csr, wt, deg_arr, start_nodes, first_id, length, thresh, seed, return_eids):
    C = start_nodes.numel()
    indices = _indices32(csr)     # node ids as int32 when they fit
    tr = torch.full((length + 1, C), -1, dtype=indices.dtype)  # step-major: contiguous row writes
    ei = torch.full((length, C), -1, dtype=torch.int64) if return_eids else None
    tr[0] = start_nodes
    pos = None                    # positions (within the chunk) of live walks; None = all
    ids = torch.arange(first_id, first_id + C, dtype=torch.int64)
    cur = start_nodes.to(indices.dtype)
    K = 1 if thresh is None else 2
    words, words_block = None, -1
    for s in range(length):
        if cur.numel() == 0:
            break
        j = s * K
        if j // 4 != words_block:
            words_block = j // 4
            words = _words(seed, ids, words_block)
        choice_w = words[j % 4]
        keep = None
        if thresh is not None:
            t = thresh[s]
            if t > 0:
                keep = words[(j + 1) % 4] >= t
        deg = deg_arr.index_select(0, cur)
        alive = deg > 0 if keep is None else (deg > 0) & keep
        if keep is not None or not bool(alive.all()):
            sel = alive.nonzero().squeeze(1)
            if sel.numel() != cur.numel():
                cur, deg, ids, choice_w = cur[sel], deg[sel], ids[sel], choice_w[sel]
                words = tuple(w[sel] for w in words)
                pos = sel if pos is None else pos[sel]
                if cur.numel() == 0:
                    break
        e = _choose(csr, wt, cur, deg, choice_w)
        cur = indices.index_select(0, e)
        _record(tr, ei, s, pos, cur, csr.eids, e, return_eids)
    return tr, ei


# -------------------------------------------------------------------------------- node2vec
def node2vec_random_walk(g, nodes, p, q, walk_length, *, prob=None, seed=None, return_eids=False):
    """node2vec walks (Grover & Leskovec 2016) along out-edges; drop-in for
    ``dgl.sampling.node2vec_random_walk(g, nodes, p, q, walk_length, prob=prob)``.

    The first step is a first-order (uniform or ``prob``-weighted) step.  From (previous t,
    current v) the next node x is drawn with probability proportional to
    ``w(v, x) * bias(t, x)``, bias = 1/p if x == t, 1 if t -> x is an edge, 1/q otherwise, by
    rejection sampling (KnightKing): propose x first-order, accept with probability
    bias / max(1/p, 1, 1/q).  Only proposals whose acceptance depends on the neighbour test run
    it (one probe of a hash set of the graph's edges, built once per graph and cached); rejected
    walks retry as a shrinking list of pending indices, and any walk still rejected after 32
    trials is sampled exactly.

    Returns traces [len(nodes), walk_length + 1] (graph idtype, -1 after a dead end), plus eids
    [len(nodes), walk_length] if ``return_eids`` (then a tuple, as in DGL).
    """
    path = _walk_path(g, "node2vec_random_walk")
    walk_length = _check_length("walk_length", walk_length)
    p = _check_positive("p", p)
    q = _check_positive("q", q)
    nodes = _check_nodes(g, nodes)
    seed = _resolve_seed(seed)
    csr = _csr(g)
    wt = _weights(g, csr, prob)
    W = nodes.numel()
    if path == "triton":
        from .walk_kernels import node2vec_triton

        env = _n2v_envelope(csr, wt, p, q, walk_length)
        traces, eids = node2vec_triton(csr, wt, env, nodes, walk_length, seed, return_eids)
        traces = traces.to(g.idtype)
        return (traces, eids.to(g.idtype)) if return_eids else traces
    traces = _out(W, walk_length + 1, torch.int64)
    eids = _out(W, walk_length, torch.int64) if return_eids else None
    if wt is None and W * walk_length >= cpu_jit.MIN_WORK and cpu_jit.enabled():
        # compiled per-walk loop: same walks (see cpu_jit.node2vec for the fallback's rounding)
        env = _n2v_envelope(csr, wt, p, q, walk_length)
        scale = alt = None
        if env.edge is not None:
            scale, alt = (t.numpy() for t in env.scale_alt())
        tr, ps = cpu_jit.node2vec(csr.start.numpy(), csr.deg.numpy(), csr.indices.numpy(), scale, alt,
                                  nodes.to(torch.int64).numpy(), 0, walk_length, seed, env, _MAX_TRIALS)
        traces = torch.from_numpy(tr).to(g.idtype)
        if not return_eids:
            return traces
        return traces, positions_to_eids(csr, torch.from_numpy(ps)).to(g.idtype)
    with _OneThread():
        env = _n2v_envelope(csr, wt, p, q, walk_length)
        eh = _edge_hash(csr) if walk_length > 1 else None
        for lo in range(0, W, _CHUNK):
            hi = min(W, lo + _CHUNK)
            tr, ei = _n2v_chunk(csr, wt, env, eh, nodes[lo:hi], lo, walk_length, seed, return_eids)
            traces[lo:hi] = tr.t()
            if return_eids:
                eids[lo:hi] = ei.t()
    traces = traces.to(g.idtype)
    return (traces, eids.to(g.idtype)) if return_eids else traces


def _lower_bound(csr: _CSR, rows: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
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


def _reverse_bounds(csr: _CSR):
    """For each CSR position e (edge a -> b): CSR range [lo, hi) of the edges b -> a (cached)."""
    if csr.rev is None:
        dev = csr.deg.device
        rows = torch.repeat_interleave(torch.arange(csr.num_nodes, dtype=torch.int64, device=dev), csr.deg)
        b = csr.indices
        lo_all = torch.empty(csr.num_edges, dtype=torch.int64, device=dev)
        hi_all = torch.empty(csr.num_edges, dtype=torch.int64, device=dev)
        for lo in range(0, csr.num_edges, 1 << 20):  # bounded temporaries
            hi = min(csr.num_edges, lo + (1 << 20))
            lo_all[lo:hi] = _lower_bound(csr, b[lo:hi], rows[lo:hi])
            hi_all[lo:hi] = _lower_bound(csr, b[lo:hi], rows[lo:hi] + 1)
        csr.rev = (lo_all, hi_all)
    return csr.rev


class _N2VEnvelope(NamedTuple):
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


def positions_to_eids(csr: _CSR, pos: torch.Tensor) -> torch.Tensor:
    """Edge ids of CSR positions, -1 kept (walk traces store positions, callers want edge ids)."""
    return pos if csr.num_edges == 0 else torch.where(pos >= 0, csr.eids[pos.clamp(min=0)], pos)


def _indices32(csr: _CSR) -> torch.Tensor:
    if csr.indices32 is None:
        csr.indices32 = csr.indices.to(torch.int32) if csr.num_nodes < 2 ** 31 else csr.indices
    return csr.indices32


def _n2v_envelope(csr: _CSR, wt: _Weights | None, p: float, q: float, length: int) -> _N2VEnvelope:
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
        return int(min(_TWO32, -(-x * _TWO32 // 1)))
    thr_t = thr(bp / max(c, bp))
    thr_1, thr_q = thr(1.0 / c), thr(bq / c)
    edge = main = None
    if length > 1:
        dst = csr.indices
        mass = csr.deg.to(torch.float64) if wt is None else wt.rowsum
        tot = mass[dst] * c
        last = csr.start[dst] + csr.deg[dst] - 1
        if extra > 0:
            lo, hi = _reverse_bounds(csr)
            rmass = (hi - lo).to(torch.float64) if wt is None else wt.before[hi] - wt.before[lo]
            tot = tot + rmass * extra
            alt = torch.where(hi > lo, lo, last)
        else:
            alt = last
        edge = torch.stack([(tot / _TWO32).view(torch.int64), alt], 1)
        if wt is not None:
            main = mass * c
    return _N2VEnvelope(c, 1.0 / c, thr_t, min(thr_1, thr_q), max(thr_1, thr_q), thr_1 > thr_q,
                        edge, main, p, q)


def _n2v_chunk(csr, wt, env, eh, start_nodes, first_id, length, seed, return_eids):
    # Node ids travel as int32 when they fit (half the bytes for the indices gathers).
    indices = _indices32(csr)
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
            e = _choose(csr, wt, cur, deg, _words(seed, ids, 0)[0])
            nxt = indices.index_select(0, e)
        else:
            e, nxt = _n2v_step(csr, wt, env, eh, cur, deg, prev, prev_e, ids, seed, s,
                               thr_t, thr_lo, thr_hi, test_nb)
        _record(tr, ei, s, pos, nxt, csr.eids, e, return_eids)
        prev, prev_e, cur = cur, e, nxt
    return tr, ei


def _n2v_step(csr, wt, env, eh, cur, deg, prev, prev_e, ids, seed, s, thr_t, thr_lo, thr_hi, test_nb):
    """CSR positions and heads of the next edges of walks at ``cur`` (all with out-edges) coming
    from ``prev`` via ``prev_e``: rejection trials on a shrinking index list ``P`` of pending walks
    (None = all), then the exact fallback."""
    indices = _indices32(csr)
    ed = _rows(env.edge, prev_e)
    scale, alt = ed[:, 0].view(torch.float64), ed[:, 1]
    start = csr.start.index_select(0, cur)
    if wt is not None:
        main = env.main.index_select(0, cur)
        last = start + csr.deg[cur] - 1
    inv_c = env.inv_c
    e = None
    P = None
    w_next = None
    for t in range(_MAX_TRIALS):
        if t & 1 == 0:
            words = _words(seed, ids if P is None else ids.index_select(0, P), (s << 12) | (t >> 1))
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
        if thr_t >= _TWO32:
            acc = is_t | (u < thr_lo)
        else:
            acc = torch.where(is_t, u < thr_t, u < thr_lo)
        if test_nb:
            need = ~is_t & (u >= thr_lo)
            if thr_hi < _TWO32:
                need &= u < thr_hi
            k = _nz(need)
            if k.numel():
                nb = eh.contains(p_prev.index_select(0, k), x.index_select(0, k))
                acc.index_copy_(0, k, nb if env.nb_accepts else ~nb)
        if P is None:
            e, nxt = cand, x
        else:
            e.index_copy_(0, P, cand)
            nxt.index_copy_(0, P, x)
        rej = _nz(~acc)
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
    u = _words(seed, ids, (s << 12) | 4095)[0].to(torch.float64) / _TWO32
    k = torch.searchsorted(key, torch.arange(cur.numel(), dtype=torch.float64) + u, right=True)
    k = torch.minimum(k, seg_start + deg - 1)
    return edge[k]


# ---------------------------------------------------------------- multi-dimensional walk
class MDRWResult(NamedTuple):
    """Output of :func:`multi_dimensional_random_walk` (leading dim = instance; -1 = padding
    after an instance whose frontier has no out-edges left).

    nodes: [I, walk_budget]: the m roots, then the node reached at each step (repeats possible).
    src, dst, eids: [I, walk_budget - m]: the edge traversed at each step (src popped from the
    frontier, dst its replacement).
    """
    nodes: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    eids: torch.Tensor


def multi_dimensional_random_walk(g, num_roots_or_roots, walk_budget, *, num_instances=None, seed=None):
    """GraphSAINT's frontier sampler (Ribeiro & Towsley's multi-dimensional random walk),
    vectorised over independent instances.

    Each instance keeps a frontier of m vertices.  Per step it pops frontier vertex u with
    probability out_deg(u) / sum of the frontier's out-degrees, moves to a uniform random
    out-neighbour v of u, records (u, v) and v, and puts v in u's slot.  It runs
    ``walk_budget - m`` steps, so each instance visits ``walk_budget`` vertices (roots included).

    ``num_roots_or_roots``: an int m (roots drawn uniformly from all nodes per instance), a 1-D
    tensor [m] of roots (shared by all instances) or a 2-D tensor [I, m].  ``num_instances``
    defaults to 1 (or to I for 2-D roots).  Returns :class:`MDRWResult`.
    """
    path = _walk_path(g, "multi_dimensional_random_walk")
    seed = _resolve_seed(seed)
    n = g.num_nodes()
    if isinstance(num_roots_or_roots, int) and not isinstance(num_roots_or_roots, bool):
        m = num_roots_or_roots
        if m < 1:
            raise _err("num_roots >= 1", m, "pass a positive frontier size or a tensor of roots.")
        if n == 0:
            raise _err("a graph with nodes", "0 nodes", "sample from a non-empty graph.")
        if m >= 2 ** 20:
            raise _err("num_roots < 2^20", m, "use a smaller frontier.")
        I = 1 if num_instances is None else int(num_instances)
        if I < 1:
            raise _err("num_instances >= 1", I, "pass a positive number of instances.")
        inst = torch.arange(I, dtype=torch.int64)
        cols = []
        for b in range((m + 3) // 4):
            cols.extend(_words(seed, inst, b))
        roots = _pick(torch.stack(cols[:m], 1), torch.tensor(n, dtype=torch.int64))
    else:
        roots = num_roots_or_roots
        if not isinstance(roots, torch.Tensor) or roots.dim() not in (1, 2) or roots.numel() == 0:
            raise _err("an int or a non-empty 1-D/2-D tensor of roots", type(roots).__name__ if
                       not isinstance(roots, torch.Tensor) else f"shape {tuple(roots.shape)}",
                       "pass the frontier size m or roots of shape [m] / [num_instances, m].")
        flat = _check_nodes(g, roots.reshape(-1))
        roots = flat.reshape(roots.shape)
        if roots.dim() == 1:
            I = 1 if num_instances is None else int(num_instances)
            roots = roots.unsqueeze(0).expand(I, -1)
        elif num_instances is not None and int(num_instances) != roots.shape[0]:
            raise _err(f"num_instances == roots.shape[0] ({roots.shape[0]})", num_instances,
                       "drop num_instances or make them agree.")
        I, m = roots.shape
    if isinstance(walk_budget, bool) or not isinstance(walk_budget, int) or walk_budget < m:
        raise _err(f"walk_budget to be an int >= the frontier size {m}", repr(walk_budget),
                   "pass the number of vertices to visit (roots included).")
    if path == "triton":
        from .walk_kernels import mdrw_triton

        it = g.idtype
        return MDRWResult(*(t.to(it) for t in mdrw_triton(_csr(g), roots, walk_budget, seed)))
    with _OneThread():
        return _mdrw(g, _csr(g), roots, walk_budget, m, I, seed)


def _mdrw(g, csr, roots, walk_budget, m, I, seed):
    steps = walk_budget - m
    frontier = roots.to(torch.int64).clone().contiguous()
    nodes_out = torch.full((I, walk_budget), -1, dtype=torch.int64)
    nodes_out[:, :m] = frontier
    src = torch.full((I, steps), -1, dtype=torch.int64)
    dst = src.clone()
    eid = src.clone()
    inst = torch.arange(I, dtype=torch.int64)
    fdeg = csr.deg[frontier].to(torch.float64)          # [I, m]
    rows = inst
    for s in range(steps):
        w = _words(seed, inst, (1 << 31) | s)
        cum = torch.cumsum(fdeg, 1)
        tot = cum[:, -1]
        live = tot > 0
        if not bool(live.all()):
            keep = live.nonzero().squeeze(1)
            inst, fdeg, frontier, cum, tot, rows = (a[keep] for a in (inst, fdeg, frontier, cum, tot, rows))
            w = tuple(a[keep] for a in w)
            if inst.numel() == 0:
                break
        u = w[0].to(torch.float64) / _TWO32 * tot
        slot = torch.searchsorted(cum, u.unsqueeze(1), right=True).squeeze(1).clamp_(max=m - 1)
        r = torch.arange(inst.numel(), dtype=torch.int64)
        src_v = frontier[r, slot]
        e = csr.start[src_v] + _pick(w[1], csr.deg[src_v])
        v = csr.indices[e]
        frontier[r, slot] = v
        fdeg[r, slot] = csr.deg[v].to(torch.float64)
        nodes_out[rows, m + s] = v
        src[rows, s] = src_v
        dst[rows, s] = v
        eid[rows, s] = csr.eids[e]
    it = g.idtype
    return MDRWResult(nodes_out.to(it), src.to(it), dst.to(it), eid.to(it))
