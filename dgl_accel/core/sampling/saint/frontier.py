"""GraphSAINT's frontier sampler (multi-dimensional random walk, MDRW) with the parallel
Dashboard of Zeng et al., "Accurate, efficient and scalable graph embedding" (IPDPS'19, Alg. 2/3):
the entry points of the frontier family (kernel ``kernels/saint_frontier.py``, launcher
:mod:`.launchers`, CPU twin :mod:`.frontier_cpu`), on a CSR view of the
out-edges (``out_csr(g)``; the DGL adapter is ``dgl_accel.sampling.frontier_sample``).  For why
this is not :func:`..walks.mdrw.multi_dimensional_random_walk`, see that module.

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

Randomness (Philox4x32-10, :mod:`..rng`), offset per instance id i:
* roots: ``(i << 40) | (1 << 39) | b``: the four words of block b are candidates 4b..4b+3, each
  picks ``(word * N) >> 32``; the roots are the first m distinct candidates;
* step s: probe q uses word q % 4 of block ``(i << 40) | (s << 12) | q // 4`` (q < 1024); block
  ``... | 4095`` gives word 0 (neighbour index ``(word * deg(u)) >> 32``) and word 1 (exact
  fallback after 1024 failed probes: the k-th live pin, k = (word * live) >> 32).
A subgraph depends only on (seed, instance id, arguments), not on ``num_instances``.

>>> from dgl_accel.core.csr import Structure
>>> ring = Structure(indptr=torch.tensor([0, 1, 2, 3]), indices=torch.tensor([1, 2, 0]),
...                  eids=torch.tensor([0, 1, 2]), num_rows=3, num_cols=3, device=torch.device("cpu"))
>>> frontier_sample(ring, 1, 3, seed=0)[0].tolist()
[0, 1, 2]
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ...backend import choose_path, record
from ...csr import Structure
from ..arrays import OneThread
from ..checks import check_has_edges, check_int, check_seed, expected, resolve_seed
from ..rng import philox4x32
from .frontier_cpu import ETA_SCALE, SLOT_MASK, frontier_cpu, frontier_one
from .launchers import frontier_triton

__all__ = ["frontier_sample", "frontier_sample_sequential"]

_ROOT_FLAG = 1 << 39
_MAX_STEPS = (1 << 27) - 1     # step field of the counter: bits 12..38
_MAX_INSTANCES = 1 << 23       # instance id: bits 40..62
_SCALAR_MAX = 16               # CPU: up to this many instances run the scalar loop, one by one
_VEC_CHUNK = 64                # CPU: instances per vectorised loop: bounds the scratch (~5 MB each for
                               # m=1000 on fb100_Cornell5); 64-128 measured alike per instance


# ------------------------------------------------------------------------------ validation
def _check(csr: Structure, num_roots, budget, num_instances, eta, degree_clip, max_steps):
    """Validated (m, n, I, eta_q, clip, max_steps); raises before any work."""
    N = csr.num_rows
    check_has_edges(N, csr.num_edges, "the frontier walk moves along edges; sample from a graph that has some.")
    m = check_int(num_roots, "num_roots", 1, min(N, SLOT_MASK), "pass a frontier size m with 1 <= m <= num_nodes.")
    n = check_int(budget, "budget", m, N, f"pass a budget n with num_roots ({m}) <= n <= num_nodes ({N}).")
    n_inst = check_int(num_instances, "num_instances", 1, _MAX_INSTANCES - 1, "pass a positive number of subgraphs.")
    try:
        eta_f = float(eta)
    except (TypeError, ValueError):
        raise expected("eta to be a number > 1", repr(eta),
                       "pass e.g. eta=2.0 (dashboard enlargement factor).") from None
    eta_q = round(eta_f * ETA_SCALE) if math.isfinite(eta_f) else 0
    if not (math.isfinite(eta_f) and eta_f > 1 and eta_q > ETA_SCALE and eta_f <= 64):
        raise expected("eta in (1, 64]", repr(eta), "pass e.g. eta=2.0: the dashboard must be larger than its "
                   "live content (eta <= 1 leaves no room to append).")
    clip = (1 << 62) if degree_clip is None else check_int(degree_clip, "degree_clip", 1, 1 << 62,
                                                           "pass None (no clip) or a positive int, e.g. 3000.")
    if max_steps is None:
        max_steps = min(_MAX_STEPS, 16 * n)
    max_steps = check_int(max_steps, "max_steps", 0, _MAX_STEPS, "pass None or a non-negative number of steps.")
    return m, n, n_inst, eta_q, clip, max_steps


def _cap0(degc_sum: int, N: int, m: int, eta_q: int) -> int:
    """Initial dashboard capacity ceil(eta * m * mean deg_c), integer-exact."""
    return max(1, -(-(eta_q * m * degc_sum) // (ETA_SCALE * N)))


def _cap0(degc_sum: int, N: int, m: int, eta_q: int) -> int:
    """Initial dashboard capacity ceil(eta * m * mean deg_c), integer-exact."""
    return max(1, -(-(eta_q * m * degc_sum) // (ETA_SCALE * N)))


# ----------------------------------------------------------------------------------- roots
def _roots(seed: int, inst: torch.Tensor, m: int, N: int) -> torch.Tensor:
    """[I, m] int64: per instance the first m distinct of an i.i.d. uniform candidate sequence
    (a uniform m-subset, in random order); torch ops, any device."""
    n_inst = inst.numel()
    if m == N:
        return torch.arange(N, dtype=torch.int64, device=inst.device).expand(n_inst, N).contiguous()
    L = 4 * -(-(m + m // 2 + 8) // 4)
    while True:
        blocks = torch.arange(L // 4, dtype=torch.int64, device=inst.device)
        off = (inst.to(torch.int64)[:, None] << 40) | _ROOT_FLAG | blocks[None, :]
        cand = (torch.stack(philox4x32(seed, off), -1).reshape(n_inst, L) * N) >> 32
        sv, order = torch.sort(cand, dim=1, stable=True)
        first = torch.ones_like(sv, dtype=torch.bool)
        first[:, 1:] = sv[:, 1:] != sv[:, :-1]
        is_first = torch.zeros_like(first).scatter_(1, order, first)
        rank = torch.cumsum(is_first, 1)
        if bool((rank[:, -1] >= m).all()):
            return cand[is_first & (rank <= m)].reshape(n_inst, m)
        L *= 2


# ------------------------------------------------------------------------------ entry points
def _as_list(out: torch.Tensor, cnt) -> list:
    return [torch.sort(out[i, :int(cnt[i])])[0] for i in range(out.shape[0])]


def frontier_sample(csr: Structure, num_roots: int, budget: int, *, num_instances: int = 1, eta: float = 2.0,
                    degree_clip=None, seed=None, max_steps=None) -> list:
    """GraphSAINT frontier sampling: ``num_instances`` independent subgraphs, each the node set
    of a multi-dimensional random walk with ``num_roots`` (m) frontier vertices run until
    ``budget`` (n) distinct vertices are sampled (see the module docstring for the stopping
    convention, ``degree_clip`` and the dashboard).  ``eta`` (> 1): dashboard enlargement factor
    (speed/memory only, not the distribution).  Returns one sorted, unique node-id tensor per
    instance (int64, on the CSR's device); the subgraph is ``dgl.node_subgraph(g, nodes)``.

    ``csr``: the out-edges (``out_csr(g)``).  CPU tensors run the numpy dashboard; CUDA tensors (or
    backend "triton") the Triton kernel; both give the same samples for the same seed.
    """
    m, n, n_inst, eta_q, clip, max_steps = _check(csr, num_roots, budget, num_instances, eta, degree_clip, max_steps)
    seed = resolve_seed(seed)
    indptr = csr.indptr
    path = choose_path(indptr)
    record("frontier_sample", path, indptr.device)
    N = csr.num_rows
    if path == "triton":
        indices = csr.indices.to(torch.int64).contiguous()
        degc = torch.clamp(indptr[1:] - indptr[:-1], max=clip)
        inst = torch.arange(n_inst, dtype=torch.int64, device=indptr.device)
        roots = _roots(seed, inst, m, N)
        cap0 = _cap0(int(degc.sum()), N, m, eta_q)
        out, cnt = frontier_triton(indptr.contiguous(), indices, degc, roots, inst, n, max_steps, seed, eta_q,
                                   cap0, clip)
        return _as_list(out, cnt)
    ip = indptr.cpu().numpy()
    ind = csr.indices.cpu().numpy().astype(np.int64, copy=False)
    degc = np.minimum(np.diff(ip), clip)
    inst = torch.arange(n_inst, dtype=torch.int64)
    with OneThread():  # small torch ops: intra-op threads only add fork/join cost here
        roots = _roots(seed, inst, m, N).numpy()
        cap0 = _cap0(int(degc.sum()), N, m, eta_q)
        if n_inst <= _SCALAR_MAX:
            res = [frontier_one(ip, ind, degc, roots[i], i, n, max_steps, seed, eta_q, cap0) for i in range(n_inst)]
            out, cnt = np.stack([r[0] for r in res]), np.array([r[1] for r in res])
        else:  # chunks of instances: bounded scratch that stays closer to the caches
            parts = [frontier_cpu(ip, ind, degc, roots[lo:lo + _VEC_CHUNK], inst.numpy()[lo:lo + _VEC_CHUNK], n,
                                   max_steps, seed, eta_q, cap0) for lo in range(0, n_inst, _VEC_CHUNK)]
            out, cnt = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        return _as_list(torch.from_numpy(out), cnt)


def frontier_sample_sequential(csr: Structure, num_roots: int, budget: int, *, num_instances: int = 1,
                               degree_clip=None, seed=None, max_steps=None) -> list:
    """The paper's sequential frontier sampler, one instance at a time (numpy Generator): pops by
    an O(m) cumulative sum of the frontier's clipped degrees per step.  Same arguments, stopping
    rule and output format as :func:`frontier_sample` (no ``eta``: there is no dashboard); same
    distribution, different random numbers.  The reference for tests and the benchmark; int64
    node ids on the CPU."""
    m, n, n_inst, _, clip, max_steps = _check(csr, num_roots, budget, num_instances, 2.0, degree_clip, max_steps)
    rng = np.random.default_rng(None if seed is None else check_seed(seed))
    indptr = csr.indptr.cpu().numpy()
    indices = csr.indices.cpu().numpy()
    N = csr.num_rows
    deg = np.diff(indptr)
    degc = np.minimum(deg, clip).astype(np.float64)
    res = []
    for _ in range(n_inst):
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
        res.append(torch.tensor(sorted(sampled), dtype=torch.int64))
    return res
