"""Argument checks of the sampling toolkit: the one set of seed / fanout / node-id / graph-size
validators every sampler uses, with one vocabulary of errors.

Every failed check raises ``SamplingInputError("expected <what> (got <what came>). Fix: <how>")``
built by :func:`expected`; callers that need another check write it with :func:`expected` too.
:class:`SamplingInputError` is a ``ValueError`` (the core knows nothing of DGL); the DGL adapter
re-raises it at its public entries as ``dgl_accel.sampling.DGLSamplingInputError``, which is also a
``dgl.DGLError`` (:mod:`dgl_accel.sampling.errors`).

Seed rule (every sampler, walk and choice function): a seed is a Python int, a numpy integer or a
one-element integer tensor with a value in [0, 2^64); bools, floats and other tensors are
rejected.  ``None`` (where a function allows it) draws a seed from torch's global generator
(:func:`resolve_seed`), so ``torch.manual_seed`` makes runs reproducible.

>>> check_seed(torch.tensor([7]))
7
>>> check_fanouts([10, -1])
[10, -1]
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "SamplingInputError", "expected", "check_seed", "resolve_seed", "check_int", "check_bool", "check_fanout",
    "check_fanouts",
    "check_nodes", "node_ids", "single_type_seeds", "seed_batch", "excluded_edge_ids", "check_prob", "check_indptr",
    "check_has_edges", "check_below", "check_length", "check_positive", "restart_probs", "check_sizes",
    "check_choice", "check_bulk", "check_spgemm", "check_memory_budget",
]

SEED_LIMIT = 2**64


class SamplingInputError(ValueError):
    """Bad input to a sampler, walk or choice function: what was expected, what came, how to fix it."""


def expected(what: str, got, fix: str) -> SamplingInputError:
    """The error every check raises: ``expected <what> (got <got>). Fix: <fix>``."""
    return SamplingInputError(f"expected {what} (got {got}). Fix: {fix}")


def _describe(x) -> str:
    """``dtype of shape (...)`` for a tensor, else the type name (for "got" parts)."""
    return f"{x.dtype} of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _integer_tensor(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


# ------------------------------------------------------------------------------------ seeds
def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as a Python int in [0, 2^64): an int, a numpy integer or a one-element integer tensor."""
    if type(seed) is int and 0 <= seed < SEED_LIMIT:  # the common case, checked first: called per draw batch
        return seed
    if isinstance(seed, torch.Tensor) and seed.numel() == 1 and _integer_tensor(seed):
        seed = int(seed)
    if not _is_int(seed) or not 0 <= int(seed) < SEED_LIMIT:
        raise expected(f"{name} to be an int in [0, 2^64) or a one-element integer tensor", repr(seed),
                       f"pass a non-negative Python int below 2**64, e.g. {name}=0.")
    return int(seed)


def resolve_seed(seed) -> int:
    """A sampler's base seed: ``seed`` checked (:func:`check_seed`), or drawn from torch's global
    generator when None (so ``torch.manual_seed`` makes runs reproducible)."""
    return int(torch.randint(2**62, ())) if seed is None else check_seed(seed)


# ------------------------------------------------------------------------------------ numbers
def check_int(x, name: str, lo: int = 0, hi: int | None = None, fix: str | None = None) -> int:
    """``x`` as an int in [lo, hi] (hi None: no upper bound)."""
    if not _is_int(x) or int(x) < lo or (hi is not None and int(x) > hi):
        what = f"{name} to be an int in [{lo}, {hi}]" if hi is not None else \
            f"{name} to be a positive int" if lo == 1 else f"{name} to be an int >= {lo}"
        raise expected(what, repr(x), fix or "pass a Python int.")
    return int(x)


def check_bool(x, name: str) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise expected(f"{name} to be a bool", repr(x), "pass True or False.")
    return bool(x)


def check_positive(name: str, v) -> float:
    """``v`` as a finite float > 0."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise expected(f"{name} to be a positive number", repr(v), f"pass e.g. {name}=1.0.") from None
    if not f > 0 or f == math.inf:
        raise expected(f"{name} > 0 and finite", repr(v), f"pass a positive {name}, e.g. {name}=1.0.")
    return f


def check_choice(x, name: str, choices) -> str:
    if x not in choices:
        raise expected(f"{name} to be one of {tuple(choices)}", repr(x), f"pass e.g. {name}={choices[0]!r}.")
    return x


def check_length(name: str, length) -> int:
    """A walk length: an int in [0, 2^20)."""
    if not _is_int(length) or length < 0:
        raise expected(f"{name} to be an int >= 0", repr(length), f"pass a non-negative int {name}.")
    if length >= 2**20:
        raise expected(f"{name} < 2^20", length, "split the walk into shorter pieces.")
    return int(length)


def restart_probs(restart_prob, length: int):
    """A walk's restart probabilities: None when there is no restart, else a float64 tensor [length]."""
    if restart_prob is None:
        return None
    if isinstance(restart_prob, torch.Tensor):
        rp = restart_prob.detach().to("cpu", torch.float64).reshape(-1)
        if rp.numel() != length:
            raise expected(f"restart_prob tensor with {length} entries (one per step)", f"{rp.numel()} entries",
                           "pass one probability per step, or a float.")
    else:
        try:
            rp = torch.full((length,), float(restart_prob), dtype=torch.float64)
        except (TypeError, ValueError):
            raise expected("restart_prob to be a float or tensor", repr(restart_prob), "pass e.g. 0.15.") from None
    if rp.numel() and (bool(torch.isnan(rp).any()) or float(rp.min()) < 0 or float(rp.max()) > 1):
        raise expected("restart_prob in [0, 1]", rp[(rp < 0) | (rp > 1) | torch.isnan(rp)][:5].tolist(),
                       "pass probabilities between 0 and 1.")
    if not bool((rp > 0).any()):
        return None
    return rp


# ------------------------------------------------------------------------------------ fanouts
def check_fanout(fanout, name: str = "fanout") -> int:
    """``fanout`` as an int >= 0, or -1 meaning all neighbours (as DGL allows)."""
    if not _is_int(fanout) or int(fanout) < -1:
        raise expected(f"{name} to be an int >= 0, or -1 for all neighbours", repr(fanout),
                       "pass e.g. 10, or -1 to take every in-neighbour.")
    return int(fanout)


def check_fanouts(fanouts, *, allow_all: bool = True) -> list[int]:
    """Per-layer (or per-step) fanouts, input layer first: each checked by :func:`check_fanout`, or
    positive with ``allow_all=False`` (k-hop sampling)."""
    if _is_int(fanouts) or not hasattr(fanouts, "__len__") or len(fanouts) == 0:
        raise expected("fanouts to be a non-empty list of ints, one per layer or step", repr(fanouts),
                       "pass e.g. [10, 10] for two layers.")
    if any(isinstance(f, dict) for f in fanouts):
        raise expected("one int fanout per layer", f"per-edge-type dicts {fanouts!r}",
                       "use dgl.dataloading.NeighborSampler for heterographs")
    if allow_all:
        return [check_fanout(f, f"fanouts[{i}]") for i, f in enumerate(fanouts)]
    return [check_int(f, f"fanouts[{i}]", 1, fix="every step draws at least one neighbour per transit "
                      "(a positive int).") for i, f in enumerate(fanouts)]


def check_sizes(sizes, name: str = "num_nodes_per_layer") -> list[int]:
    """Layer-wise node budgets: a non-empty list of positive ints."""
    if isinstance(sizes, (str, torch.Tensor)) or _is_int(sizes) or not hasattr(sizes, "__len__"):
        raise expected(f"{name} to be a list of positive ints, one per layer", repr(sizes), "pass e.g. [512, 512].")
    sizes = list(sizes)
    if not sizes:
        raise expected(f"{name} to name at least one layer", "[]",
                       "pass one positive node budget per GNN layer, e.g. [512, 512].")
    return [check_int(s, f"{name}[{i}]", 1, fix="every layer needs a budget of at least one node.")
            for i, s in enumerate(sizes)]


# ------------------------------------------------------------------------------------ node ids
def check_nodes(nodes, num_nodes: int, name: str = "seed nodes", *, distinct: bool = False) -> None:
    """Raise unless ``nodes`` is a 1-D integer tensor with values in [0, num_nodes) (and, with
    ``distinct``, no repeats)."""
    if not isinstance(nodes, torch.Tensor) or nodes.dim() != 1 or not _integer_tensor(nodes):
        raise expected(f"{name} to be a 1-D integer tensor", _describe(nodes),
                       "pass torch.as_tensor(ids, dtype=torch.int64).")
    if nodes.numel():
        lo, hi = torch.stack(torch.aminmax(nodes)).tolist()  # one read on a device
        if lo < 0 or hi >= num_nodes:
            raise expected(f"{name} in [0, {num_nodes})", f"values in [{lo}, {hi}]",
                           "pass node ids of this graph (0 <= id < g.num_nodes()).")
        if distinct and torch.unique(nodes).numel() != nodes.numel():
            raise expected(f"distinct {name}", f"{nodes.numel()} ids, {torch.unique(nodes).numel()} distinct",
                           "pass torch.unique(ids).")


def node_ids(nodes, num_nodes: int, name: str = "nodes", *, max_count: int | None = None) -> torch.Tensor:
    """``nodes`` (a tensor or a list of ids) checked by :func:`check_nodes`, as an int64 CPU tensor."""
    if not isinstance(nodes, torch.Tensor):
        try:
            nodes = torch.as_tensor(nodes, dtype=torch.int64)
        except (TypeError, ValueError, RuntimeError) as e:
            raise expected(f"{name} to be a 1-D tensor or list of node ids", type(nodes).__name__,
                           "pass torch.tensor([...]) of ints.") from e
    check_nodes(nodes, num_nodes, name)
    if max_count is not None and nodes.numel() >= max_count:
        raise expected(f"fewer than {max_count} {name}", nodes.numel(), "split them into batches.")
    return nodes.to(device="cpu", dtype=torch.int64)


def single_type_seeds(seed_nodes, ntypes=None) -> torch.Tensor:
    """Seed ids as a tensor; a dict (DGL's heterograph form) must hold the one node type (one of
    ``ntypes`` when given)."""
    if isinstance(seed_nodes, dict):
        if len(seed_nodes) != 1 or (ntypes is not None and next(iter(seed_nodes)) not in ntypes):
            raise expected("seed nodes of the single node type", f"a dict with keys {list(seed_nodes)}",
                           "pass a tensor of node ids.")
        seed_nodes = next(iter(seed_nodes.values()))
    return torch.as_tensor(seed_nodes)


def seed_batch(seed_nodes, num_nodes: int, name: str = "seed nodes") -> torch.Tensor:
    """A non-empty batch of seed ids (:func:`single_type_seeds` checked by :func:`check_nodes`)."""
    seeds = single_type_seeds(seed_nodes)
    check_nodes(seeds, num_nodes, name)
    if seeds.numel() == 0:
        raise expected(f"a non-empty batch of {name}", "0 ids", "drop empty batches (batch size must be >= 1).")
    return seeds


def excluded_edge_ids(exclude_eids):
    """DGL's ``exclude_eids`` argument (a tensor, or a dict of them per edge type, or None) as one
    sorted int64 array of distinct edge ids, or None."""
    if exclude_eids is None:
        return None
    if isinstance(exclude_eids, dict):
        exclude_eids = torch.cat([torch.as_tensor(x) for x in exclude_eids.values()]) \
            if exclude_eids else torch.empty(0, dtype=torch.int64)
    t = torch.as_tensor(exclude_eids).detach().cpu().to(torch.int64)
    return np.unique(t.contiguous().numpy())


def check_prob(prob, num_edges: int, name: str = "prob", values: bool = True) -> None:
    """Raise unless ``prob`` holds one finite non-negative weight per edge (``values=False``: check
    the type and shape only, without reading the values)."""
    if not isinstance(prob, torch.Tensor):
        raise expected(f"{name} to be a tensor with one weight per edge", type(prob).__name__,
                       f"pass a float tensor of shape ({num_edges},).")
    if prob.dim() != 1 or prob.numel() != num_edges:
        raise expected(f"{name} to have one value per edge, shape ({num_edges},)", f"shape {tuple(prob.shape)}",
                       "store one weight per edge, in edge-id order.")
    if prob.is_complex():
        raise expected(f"{name} to be real", prob.dtype, "pass float weights.")
    if values and prob.numel():
        p = prob if prob.is_floating_point() else prob.to(torch.float64)
        if not bool(torch.isfinite(p).all()):
            raise expected(f"{name} to be finite", "inf or nan",
                           "replace non-finite weights, e.g. torch.nan_to_num(p, posinf=...).")
        if bool((p < 0).any()):
            raise expected(f"{name} to be non-negative", f"min {float(p.min())}",
                           "clamp weights with p.clamp(min=0); zero-weight edges are never chosen.")


def check_indptr(indptr) -> None:
    if not isinstance(indptr, torch.Tensor) or indptr.dim() != 1 or indptr.numel() < 1 \
            or not _integer_tensor(indptr):
        raise expected("indptr to be a 1-D integer tensor of length num_rows + 1", _describe(indptr),
                       "pass dgl_accel.graph.structure.in_csr(g).indptr.")


# ------------------------------------------------------------------------------------ graph sizes
def check_has_edges(num_nodes: int, num_edges: int, fix: str) -> None:
    if num_nodes == 0 or num_edges == 0:
        raise expected("a graph with at least one edge", f"{num_nodes} nodes and {num_edges} edges", fix)


def check_below(what: str, value: int, limit_name: str, limit: int, fix: str) -> None:
    """Raise unless ``value < limit`` (sizes that index counters or 32-bit ids)."""
    if value >= limit:
        raise expected(f"{what} < {limit_name}", value, fix)


# ------------------------------------------------------------------------------------ bulk samplers
def check_bulk(bulk) -> int:
    if not _is_int(bulk) or int(bulk) <= 0:
        raise expected("bulk to be a positive int, the minibatches sampled per pass", repr(bulk), "pass e.g. bulk=32.")
    return int(bulk)


def check_spgemm(spgemm):
    if spgemm is not None and not callable(spgemm):
        raise expected("spgemm to be a callable (Q, A) -> Q @ A or None", type(spgemm).__name__,
                       "pass e.g. dgl_accel.core.sampling.bulk.matrix.local_spgemm.")
    return spgemm


def check_memory_budget(budget):
    if budget is None:
        return None
    if isinstance(budget, (bool, torch.Tensor)) or not isinstance(budget, (int, float, np.integer)) or budget <= 0:
        raise expected("memory_budget to be a positive number of bytes or None", repr(budget),
                       "pass e.g. memory_budget=2 * 2**30.")
    return int(budget)
