"""Launchers of the bulk-sampling Triton kernels (``kernels/bulk_sampling.py``, family
``bulk``): compiled on CUDA tensors, interpreted on CPU tensors when backend "triton" is
forced.  Same results as the numpy reference in :mod:`.its` and
:func:`..neighbor.sample.relabel_block`.
"""
from __future__ import annotations

import numpy as np
import torch

from ...launch import triton_kernel
from ..arrays import offsets

__all__ = ["draw_triton", "compact_triton", "compact_rows_triton", "relabel_triton"]


def _kernel(name: str, device: torch.device):
    return triton_kernel("bulk_sampling", name, device)


def draw_triton(device, max_draws: int):
    """The ``draw`` callback of :func:`.its.its_sample_np` that runs ``_its_rows_kernel``
    (``max_draws``: the spec's ``MAX_DRAWS``)."""
    def draw(rs, rows: np.ndarray, s: int, replace: bool, before, total) -> np.ndarray:
        from ....kernels.bulk_sampling import its_block_r, its_num_warps, s_pad  # lazy: fixes Triton's mode

        R = rows.shape[0]
        if R == 0:
            return np.zeros((0, s), dtype=np.int64)
        S = s_pad(s)
        sizes = np.diff(np.asarray(rs.batch_ptr, dtype=np.int64))
        keys = np.repeat(np.array(rs.keys, dtype=np.uint64), sizes)[rows].view(np.int64)

        def dev(a, dtype=torch.int64):
            return torch.as_tensor(np.ascontiguousarray(a)).to(device=device, dtype=dtype)

        uniform = rs.prefix is None
        deg = rs.deg[rows]
        out = torch.empty((R, S), dtype=torch.int64, device=device)
        f64 = torch.zeros(1, dtype=torch.float64, device=device)
        prefix = f64 if uniform else dev(rs.prefix, torch.float64)
        bef = f64 if uniform else dev(before[rows], torch.float64)
        tot = f64 if uniform else dev(total[rows], torch.float64)
        iters = int(deg.max()).bit_length() + 1 if deg.size else 1
        _kernel("_its_rows_kernel", device)[(-(-R // its_block_r(S)),)](
            prefix, dev(rs.start[rows]), dev(deg), dev(keys), dev(rs.labels[rows]), bef, tot, out,
            R, s, max_draws, iters, UNIFORM=uniform, REPLACE=bool(replace), BLOCK_R=its_block_r(S), S_PAD=S,
            num_warps=its_num_warps(uniform))
        picks = out[:, :s]
        if not replace:  # the spec's order: ascending column (the kernel keeps first-seen order)
            picks = torch.sort(picks, dim=1).values
        return picks.cpu().numpy()
    return draw


def compact_triton(picks: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Padded picks [R, S_PAD] (row i valid in its first counts[i] slots) -> flat CSR positions."""
    from ....kernels.bulk_sampling import COMPACT_BLOCK_R  # lazy: importing a kernel module fixes Triton's mode

    R, S = picks.shape
    offs = torch.zeros(R + 1, dtype=torch.int64, device=picks.device)
    torch.cumsum(counts, 0, out=offs[1:])
    out = torch.empty(int(offs[-1]), dtype=torch.int64, device=picks.device)
    if R and out.numel():
        _kernel("_compact_kernel", picks.device)[(-(-R // COMPACT_BLOCK_R),)](
            picks.contiguous(), offs, out, R, S_PAD=S, BLOCK_R=COMPACT_BLOCK_R, num_warps=4)
    return out


def compact_rows_triton(flat: np.ndarray, counts: np.ndarray, s: int, device) -> np.ndarray:
    """Flat picks (row i's ``counts[i]`` at its offset) padded to the kernel's ``S_PAD`` slots per
    row, then compacted back by :func:`compact_triton` on ``device`` (the same flat order)."""
    from ....kernels.bulk_sampling import s_pad  # lazy: importing a kernel module fixes Triton's mode

    S = s_pad(s)
    pad = np.full((counts.shape[0], S), -1, dtype=np.int64)
    pad[np.arange(S)[None, :] < counts[:, None]] = flat
    out = compact_triton(torch.from_numpy(pad).to(device), torch.from_numpy(counts).to(device))
    return out.cpu().numpy()


def relabel_triton(flat: np.ndarray, counts: np.ndarray, dst: np.ndarray, canon, excl, n: int, device):
    """The arrays of :func:`..neighbor.sample.relabel_block` ``(indptr, local source ids, new sources, edge
    ids)`` for the ``Canonical`` adjacency ``canon``, relabelled by ``_relabel_kernel``."""
    from ....kernels.bulk_sampling import RELABEL_BLOCK  # lazy: importing a kernel module fixes Triton's mode

    device = torch.device(device)
    T = dst.shape[0]
    pos = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.int64)).to(device)
    eid = canon.on_device("eids", device)[pos]
    if excl is not None and excl.size and pos.numel():
        keep = ~torch.isin(eid, torch.from_numpy(excl).to(device))
        row = torch.repeat_interleave(torch.arange(T, device=device), torch.from_numpy(counts).to(device))[keep]
        pos, eid = pos[keep], eid[keep]
        counts = torch.bincount(row, minlength=T).cpu().numpy()
    src_tab = canon.on_device("indices", device)
    dst_t = torch.from_numpy(dst).to(device)
    dstpos = torch.full((n,), -1, dtype=torch.int64, device=device)
    dstpos[dst_t] = torch.arange(T, dtype=torch.int64, device=device)
    mark = torch.zeros(n, dtype=torch.int64, device=device)
    mark[src_tab[pos]] = 1
    mark[dst_t] = 0
    newrank = torch.cumsum(mark, 0) - 1
    new = torch.nonzero(mark).flatten()
    E = int(pos.numel())
    src = torch.empty(E, dtype=torch.int64, device=device)
    local = torch.empty(E, dtype=torch.int64, device=device)
    if E:
        _kernel("_relabel_kernel", device)[(-(-E // RELABEL_BLOCK),)](
            pos, src_tab, dstpos, newrank, src, local, E, T, BLOCK=RELABEL_BLOCK, num_warps=4)
    return offsets(counts), local.cpu().numpy(), new.cpu().numpy(), eid.cpu().numpy()
