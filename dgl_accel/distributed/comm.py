"""Collectives for the distributed samplers: process-group setup with a timeout, variable-size
all-gather / all-to-all of dense tensors, CSR matrices as dense buffers with size headers, and
clear errors instead of hangs.

Gloo has no sparse collectives, so a CSR matrix travels as three dense tensors (int64 indptr,
int64 indices, float32 values) after a small int64 header with the sizes.  Every collective is
called through :func:`_guard`, which turns a backend timeout or a dead peer into a
``CollectiveError`` naming the collective and the fix.
"""
from __future__ import annotations

import datetime
import os
import warnings

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

__all__ = ["CollectiveError", "init", "world", "device_of", "all_gather_1d", "all_to_all_1d",
           "all_gather_csr", "to_scipy", "to_torch_csr"]


class CollectiveError(RuntimeError):
    """A collective timed out or lost a peer: the ranks did not make the same calls."""


def as_timedelta(timeout) -> datetime.timedelta:
    """A collective timeout in seconds (or a timedelta) as the timedelta torch.distributed takes.

    >>> as_timedelta(90)
    datetime.timedelta(seconds=90)
    >>> as_timedelta(0)
    Traceback (most recent call last):
    ...
    ValueError: expected timeout to be a positive number of seconds (got 0). Fix: pass e.g. timeout=60.
    """
    if isinstance(timeout, datetime.timedelta):
        return timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"expected timeout to be a positive number of seconds (got {timeout!r}). "
                         f"Fix: pass e.g. timeout=60.")
    return datetime.timedelta(seconds=float(timeout))


def init(backend: str | None = None, timeout=120.0, **kwargs) -> None:
    """``torch.distributed.init_process_group`` with a collective timeout (seconds) so a rank that
    never arrives makes the others fail with an error instead of hanging forever.

    ``backend=None`` picks ``nccl`` when CUDA is available (and sets the device from LOCAL_RANK),
    else ``gloo``.  Rank / world size / address come from the environment (torchrun) unless passed.
    """
    if dist.is_initialized():
        return
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"expected backend 'gloo' or 'nccl' (got {backend!r}). Fix: pass backend=None "
                         f"to pick nccl with CUDA and gloo otherwise.")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend, timeout=as_timedelta(timeout), **kwargs)


def world(group=None) -> tuple[int, int]:
    """(rank, world size) in ``group``; (0, 1) without an initialised process group.

    >>> world()
    (0, 1)
    """
    if not dist.is_available() or not dist.is_initialized():
        if group is not None:
            raise ValueError("expected an initialised torch.distributed process group (got group= without "
                             "init_process_group). Fix: call dgl_accel.distributed.init() first.")
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def device_of(group=None) -> torch.device:
    """Where this group's collectives take their tensors: CUDA for nccl, CPU otherwise."""
    if dist.is_initialized() and dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _guard(name: str, fn, *args, **kwargs):
    """Run a collective; a timeout / closed connection becomes a CollectiveError with a fix."""
    try:
        return fn(*args, **kwargs)
    except RuntimeError as e:  # gloo: "Timed out waiting ...", "Connection closed by peer", ...
        if isinstance(e, CollectiveError):
            raise
        rank = dist.get_rank() if dist.is_initialized() else 0
        raise CollectiveError(
            f"expected every rank of the process group to join collective '{name}' (got on rank {rank}: "
            f"{str(e).strip()[:300]}). Fix: make all ranks make the same loader/sampler calls in the same "
            f"order (same dataset size, batch size, bulk and epochs), check no rank crashed, or raise the "
            f"process group's timeout.") from e


def all_gather_1d(x: torch.Tensor, group=None, name: str = "all_gather") -> list[torch.Tensor]:
    """All-gather 1-D tensors whose lengths differ between ranks (sizes first, then padded data)."""
    _, size = world(group)
    dev = device_of(group)
    x = x.reshape(-1).to(dev)
    n = torch.tensor([x.numel()], dtype=torch.int64, device=dev)
    ns = [torch.empty_like(n) for _ in range(size)]
    _guard(name + " (sizes)", dist.all_gather, ns, n, group=group)
    ns = [int(v) for v in ns]
    m = max(ns) if ns else 0
    buf = torch.zeros(m, dtype=x.dtype, device=dev)
    buf[:x.numel()] = x
    out = [torch.empty(m, dtype=x.dtype, device=dev) for _ in range(size)]
    _guard(name, dist.all_gather, out, buf, group=group)
    return [o[:k].cpu() for o, k in zip(out, ns)]


def all_to_all_1d(chunks: list[torch.Tensor], group=None, name: str = "all_to_all") -> list[torch.Tensor]:
    """Send ``chunks[r]`` to rank r, return what every rank sent here (lengths may differ)."""
    _, size = world(group)
    if len(chunks) != size:
        raise ValueError(f"expected one chunk per rank, {size} (got {len(chunks)}). Fix: internal error.")
    dev = device_of(group)
    dtype = chunks[0].dtype
    send_n = torch.tensor([c.numel() for c in chunks], dtype=torch.int64, device=dev)
    recv_n = torch.empty_like(send_n)
    _guard(name + " (sizes)", dist.all_to_all_single, recv_n, send_n, group=group)
    send = torch.cat([c.reshape(-1).to(dtype) for c in chunks]).to(dev)
    rn = recv_n.tolist()
    recv = torch.empty(sum(rn), dtype=dtype, device=dev)
    _guard(name, dist.all_to_all_single, recv, send, rn, send_n.tolist(), group=group)
    return list(recv.cpu().split(rn))


# ------------------------------------------------------------------------------------ sparse
def to_scipy(t) -> sp.csr_matrix:
    """A ``torch.sparse_csr_tensor`` (or scipy matrix) as a scipy CSR matrix (float32 values)."""
    if sp.issparse(t):
        return sp.csr_matrix(t, dtype=np.float32)
    if not isinstance(t, torch.Tensor) or t.layout != torch.sparse_csr or t.dim() != 2:
        got = f"layout {t.layout}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"expected a 2-D torch.sparse_csr_tensor (got {got}). Fix: build it with "
                         f"torch.sparse_csr_tensor(indptr, indices, values, size).")
    return sp.csr_matrix((t.values().detach().cpu().numpy().astype(np.float32, copy=False),
                          t.col_indices().cpu().numpy(), t.crow_indices().cpu().numpy()), shape=tuple(t.shape))


def to_torch_csr(m: sp.spmatrix) -> torch.Tensor:
    """A scipy matrix as a canonical ``torch.sparse_csr_tensor`` (sorted, no duplicates; int64
    indices, float32 values); :func:`to_scipy` goes back.

    >>> t = to_torch_csr(sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]])))
    >>> t.crow_indices().tolist(), t.col_indices().tolist(), t.values().tolist()
    ([0, 1, 2], [1, 0], [2.0, 1.0])
    >>> to_scipy(t).toarray()
    array([[0., 2.],
           [1., 0.]], dtype=float32)
    """
    m = sp.csr_matrix(m)
    m.sum_duplicates()  # also sorts indices: the canonical form the local product has too
    with warnings.catch_warnings():  # torch's one-time "sparse CSR support is in beta" notice
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int64)),
                                       torch.from_numpy(m.indices.astype(np.int64)),
                                       torch.from_numpy(m.data.astype(np.float32)), size=m.shape)


def all_gather_csr(m: sp.csr_matrix, group=None, name: str = "all_gather_csr") -> list[sp.csr_matrix]:
    """All-gather one scipy CSR matrix per rank (any shapes): header + int64 + float32 buffers."""
    m = sp.csr_matrix(m)
    ints = torch.from_numpy(np.concatenate([np.array(m.shape, dtype=np.int64), m.indptr.astype(np.int64),
                                            m.indices.astype(np.int64)]))
    vals = torch.from_numpy(m.data.astype(np.float32))
    got_i = all_gather_1d(ints, group, name + " (structure)")
    got_v = all_gather_1d(vals, group, name + " (values)")
    out = []
    for ii, vv in zip(got_i, got_v):
        ii = ii.numpy()
        r, c = int(ii[0]), int(ii[1])
        out.append(sp.csr_matrix((vv.numpy(), ii[3 + r:], ii[2:3 + r]), shape=(r, c)))
    return out
