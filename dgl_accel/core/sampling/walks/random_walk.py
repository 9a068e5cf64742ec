"""Random walks (family ``walks``) on a CSR view: DeepWalk / weighted / restart walks
(:func:`random_walk`, here), node2vec (:mod:`.node2vec`) and GraphSAINT's frontier sampler as
a multi-dimensional random walk (:mod:`.mdrw`), with the tables they share (:class:`WalkCSR`,
:class:`WalkWeights`).

The CPU path is vectorised in torch across walks (Python loops only over steps).  Graphs on a GPU
(or any graph with the backend forced to ``triton``) run the Triton kernels of
``kernels/walks.py`` instead (launchers in :mod:`.launchers`; compiled CPU twin of node2vec in
:mod:`dgl_accel.core.jit.walks`): same counters, same tables, same samples (see :func:`walk_path`).
The DGL adapter (``dgl_accel.sampling.random_walk`` & co.) passes ``out_csr(g)``.

Walks move along out-edges, like ``dgl.sampling.random_walk`` on a homogeneous graph.

Randomness
----------
Every random number comes from Philox4x32-10 (see :mod:`..rng`), addressed by a
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
  2*(t & 1) + 1 (acceptance); a walk still rejected after ``MAX_TRIALS`` trials is sampled
  exactly from ``block = (s << 12) | 4095`` lane 0.  (This layout predates the edge-hash-set
  neighbour test; with it, samples changed only where the former binary search reported a
  false edge (x past the end of t's row equal to the next row's first entry) and by float
  rounding of the proposal index.)
* ``multi_dimensional_random_walk``: initial roots use ``block = j // 4`` for root j (j < 2**20);
  step s uses ``block = (1 << 31) | s``, lane 0 (which frontier slot pops) and lane 1 (neighbour).

A word ``w`` picks among ``n`` items as ``(w * n) >> 32`` (bias <= n / 2**32) and is turned into a
float in [0, 1) as ``w / 2**32`` (float64).

>>> from dgl_accel.core.csr import Structure
>>> ring = Structure(indptr=torch.tensor([0, 1, 2, 3]), indices=torch.tensor([1, 2, 0]),
...                  eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
>>> random_walk(WalkCSR(ring), torch.tensor([0]), 4, seed=0)[0].tolist()
[[0, 1, 2, 0, 1]]
"""
from __future__ import annotations

import numpy as np
import torch

from ...backend import choose_path, get_backend, record
from ...csr import Structure
from ..arrays import OneThread
from ..checks import check_length, expected, node_ids, resolve_seed, restart_probs
from ..rng import philox4x32
from .launchers import random_walk_triton

__all__ = ["WalkCSR", "WalkWeights", "random_walk", "walk_path", "walk_words", "edge_weights", "choose_edge",
           "nonzero_idx", "take_rows", "pick_index", "record_step", "positions_to_eids", "indices32", "walk_chunk",
           "TWO32"]

TWO32 = float(2 ** 32)
_CHUNK = 1 << 17      # walks per chunk: bounds temporaries; larger chunks amortise per-op overhead


# ------------------------------------------------------------------------------------- RNG
def walk_words(seed: int, walk_ids: torch.Tensor, block: int):
    """The four Philox words of ``block`` for each walk (module docstring's offset layout)."""
    return philox4x32(seed, (walk_ids << 32) | block)


def nonzero_idx(mask: torch.Tensor) -> torch.Tensor:
    """Indices of the True entries of a 1-D CPU bool tensor (numpy's flatnonzero: ~3x faster
    than ``torch.nonzero`` on the random masks rejection sampling produces)."""
    return torch.from_numpy(np.flatnonzero(mask.numpy()))


def take_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` for a contiguous 2-D CPU table (numpy's row take: 2-3x faster than
    ``torch.index_select`` on rows)."""
    return torch.from_numpy(table.numpy().take(idx.numpy(), axis=0))


def pick_index(word: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Index in [0, n) from a 32-bit word (n < 2^31)."""
    return (word * n) >> 32


def walk_path(device: torch.device, op: str) -> str:
    """``"triton"`` (kernels in kernels/walks.py) or ``"native"`` (the CPU code) for a walk on a
    graph on ``device``, as the backend chooses (CUDA graph -> Triton; CPU graph -> native unless
    the backend is forced to triton, then the interpreter runs the kernels); recorded in the stats."""
    path = choose_path(torch.empty(0, device=device))
    if path == "native" and device.type != "cpu":
        raise expected("a graph on the CPU for the native path", f"device {device} with the backend {get_backend()!r}",
                       "call g.cpu() first, or use dgl_accel.set_backend('auto') so that CUDA graphs run the "
                       "Triton kernels.")
    record(op, path, device)
    return path


# --------------------------------------------------------------------------------- tables
class WalkCSR:
    """Out-CSR with int64 arrays and each row's destinations sorted (for neighbour tests), built from
    a CSR view with one row per source (``out_csr(g)``), with per-weight tables cached on it."""

    __slots__ = ("indptr", "start", "deg", "indices", "eids", "num_nodes", "num_edges", "max_deg",
                 "weights", "rev", "ehash", "indices32", "envelopes")

    def __init__(self, s: Structure):
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
        self.weights: dict = {}  # weight tensor key -> (the tensor, WalkWeights)
        self.rev = None          # node2vec: per position, CSR range [lo, hi) of its reverse edges (lazy)
        self.ehash = None        # node2vec: EdgeHash of the edge set (lazy)
        self.indices32 = None    # walks: int32 copy of indices (lazy; when ids fit)
        self.envelopes: dict = {}  # node2vec: (id of weights, p, q, length > 1) -> (weights, envelope)


class WalkWeights:
    """Per-row normalised prefix sums as a globally sorted key: ``key[e] = row + cdf_row(e)``
    (float64, cdf of a row's last positive edge is exactly 1), so one ``searchsorted`` finds the
    edge for target ``row + u``.  Rows whose weights sum to 0 get degree 0 (dead ends)."""

    __slots__ = ("key", "deg", "w", "before", "rowsum")

    def __init__(self, csr: WalkCSR, w_edge: torch.Tensor):
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


def edge_weights(csr: WalkCSR, w, name: str = "prob") -> WalkWeights | None:
    """The :class:`WalkWeights` of one non-negative weight per edge (edge-id order; None: uniform),
    cached on ``csr`` for the last few weight tensors (keyed by storage and version)."""
    if w is None:
        return None
    if w.dim() != 1 and not (w.dim() == 2 and w.shape[1] == 1):
        raise expected(f"{name} to have shape ({csr.num_edges},)", f"shape {tuple(w.shape)}",
                       "store one scalar weight per edge.")
    w = w.reshape(-1)
    key = (w.data_ptr(), w._version, w.numel(), w.dtype)
    hit = csr.weights.get(key)
    if hit is not None:
        return hit[1]
    if w.numel() != csr.num_edges:
        raise expected(f"{csr.num_edges} weights in {name}", w.numel(), "store one weight per edge.")
    wf = w.detach().to(csr.deg.device, torch.float64)
    if wf.numel() and (bool(torch.isnan(wf).any()) or float(wf.min()) < 0 or bool(torch.isinf(wf).any())):
        raise expected(f"non-negative finite weights in {name}",
                       f"min {float(wf.min())}, nan {bool(torch.isnan(wf).any())}",
                       "clamp the weights to >= 0 (e.g. w.clamp(min=0)).")
    out = WalkWeights(csr, wf)
    if len(csr.weights) >= 4:  # a few weight tensors per graph; the oldest goes
        csr.weights.pop(next(iter(csr.weights)))
    csr.weights[key] = (w, out)  # the tensor itself is kept: its storage address cannot be reused
    return out


def choose_edge(csr: WalkCSR, wt: WalkWeights | None, cur: torch.Tensor, deg: torch.Tensor, word: torch.Tensor):
    """CSR position of the chosen out-edge of ``cur`` (all with deg > 0) from a 32-bit word."""
    if wt is None:
        return csr.start.index_select(0, cur) + pick_index(word, deg)
    target = cur.to(torch.float64) + word.to(torch.float64) / TWO32
    pos = torch.searchsorted(wt.key, target, right=True)
    # Guard against rounding at the row's end (cannot leave the row: key of its last edge is row+1).
    return torch.minimum(pos, csr.start[cur] + csr.deg[cur] - 1)


def record_step(tr, ei, s: int, pos, nodes, eids, e, return_eids: bool) -> None:
    """Write step ``s`` of the live walks: all walks when ``pos`` is None, else walks ``pos``."""
    if pos is None:
        tr[s + 1] = nodes
        if return_eids:
            ei[s] = eids[e]
    else:
        tr[s + 1].index_copy_(0, pos, nodes)
        if return_eids:
            ei[s].index_copy_(0, pos, eids[e])


def positions_to_eids(csr: WalkCSR, pos: torch.Tensor) -> torch.Tensor:
    """Edge ids of CSR positions, -1 kept (walk traces store positions, callers want edge ids)."""
    return pos if csr.num_edges == 0 else torch.where(pos >= 0, csr.eids[pos.clamp(min=0)], pos)


def indices32(csr: WalkCSR) -> torch.Tensor:
    """Node ids of ``csr`` as int32 when they fit (half the bytes for the gathers), cached."""
    if csr.indices32 is None:
        csr.indices32 = csr.indices.to(torch.int32) if csr.num_nodes < 2 ** 31 else csr.indices
    return csr.indices32


# ------------------------------------------------------------------------------ random walk
def random_walk(csr: WalkCSR, nodes, length, *, weights: torch.Tensor | None = None, restart_prob=0.0,
                seed=None, return_eids: bool = False):
    """Random walks along out-edges, one per entry of ``nodes``: ``(traces, eids)`` with traces
    int64 [len(nodes), length + 1], -1 after a walk stops (dead end or restart), and eids
    [len(nodes), length] (-1 padded) or None unless ``return_eids``.

    csr : :class:`WalkCSR` of the out-edges (``WalkCSR(out_csr(g))``), on the CPU (native path)
        or a GPU (Triton kernels).
    nodes : 1-D ids of the start nodes (repeat a node for several walks).
    length : number of transitions per walk (>= 0).
    weights : one non-negative weight per edge (edge-id order); transitions pick an out-edge with
        probability proportional to its weight (rows whose weights sum to 0 are dead ends).
        None: uniform over out-edges (DeepWalk).
    restart_prob : float or tensor [length]: probability to terminate the walk before each
        transition (DGL's semantics).  0 / None: never.
    seed : the seed rule of :mod:`..checks` (Philox counters: module docstring); None draws one
        from torch's RNG, so ``torch.manual_seed`` makes runs reproducible.
    """
    path = walk_path(csr.deg.device, "random_walk")
    length = check_length("length", length)
    nodes = node_ids(nodes, csr.num_nodes, "nodes", max_count=2**31)
    rp = restart_probs(restart_prob, length)
    seed = resolve_seed(seed)
    wt = edge_weights(csr, weights)
    W = nodes.numel()
    thresh = None if rp is None else (rp * TWO32).ceil().to(torch.int64).tolist()
    if path == "triton":
        return random_walk_triton(csr, wt, nodes, length, thresh, seed, return_eids)
    traces = torch.full((W, length + 1), -1, dtype=torch.int64)
    eids = torch.full((W, length), -1, dtype=torch.int64) if return_eids else None
    deg_arr = csr.deg if wt is None else wt.deg
    with OneThread(work=W):
        for lo in range(0, W, _CHUNK):
            hi = min(W, lo + _CHUNK)
            tr, ei = walk_chunk([csr] * length, [wt] * length, [deg_arr] * length, nodes[lo:hi], lo, thresh, seed,
                                return_eids, indices=[indices32(csr)] * length)  # node ids as int32 when they fit
            traces[lo:hi] = tr.t()
            if return_eids:
                eids[lo:hi] = ei.t()
    return traces, eids


def walk_chunk(steps, wts, degs, start_nodes, first_id, thresh, seed, return_eids, indices=None):
    """One chunk of walks, step-major: ``(traces [steps + 1, C], eids [steps, C] or None)``.  Step
    ``s`` moves along ``steps[s]`` (a :class:`WalkCSR`) with weights ``wts[s]`` and live degrees
    ``degs[s]``, gathering node ids from ``indices[s]`` (default: the CSR's own); one relation
    repeated is :func:`random_walk`, one per metapath step is :mod:`.metapath`."""
    C, length, device = start_nodes.numel(), len(steps), start_nodes.device
    indices = [c.indices for c in steps] if indices is None else indices
    dtype = indices[0].dtype if length else torch.int64
    tr = torch.full((length + 1, C), -1, dtype=dtype, device=device)  # step-major: contiguous row writes
    ei = torch.full((length, C), -1, dtype=torch.int64, device=device) if return_eids else None
    tr[0] = start_nodes
    pos = None                    # positions (within the chunk) of live walks; None = all
    ids = torch.arange(first_id, first_id + C, dtype=torch.int64, device=device)
    cur = start_nodes.to(dtype)
    K = 1 if thresh is None else 2
    words, words_block = None, -1
    for s in range(length):
        if cur.numel() == 0:
            break
        j = s * K
        if j // 4 != words_block:
            words_block = j // 4
            words = walk_words(seed, ids, words_block)
        choice_w = words[j % 4]
        keep = None
        if thresh is not None:
            t = thresh[s]
            if t > 0:
                keep = words[(j + 1) % 4] >= t
        deg = degs[s].index_select(0, cur)
        alive = deg > 0 if keep is None else (deg > 0) & keep
        if keep is not None or not bool(alive.all()):
            sel = alive.nonzero().squeeze(1)
            if sel.numel() != cur.numel():
                cur, deg, ids, choice_w = cur[sel], deg[sel], ids[sel], choice_w[sel]
                words = tuple(w[sel] for w in words)
                pos = sel if pos is None else pos[sel]
                if cur.numel() == 0:
                    break
        e = choose_edge(steps[s], wts[s], cur, deg, choice_w)
        cur = indices[s].index_select(0, e)
        record_step(tr, ei, s, pos, cur, steps[s].eids, e, return_eids)
    return tr, ei
