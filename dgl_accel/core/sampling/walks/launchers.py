"""Launchers of the random-walk kernels (``kernels/walks.py``, family ``walks``).

They take the tables the CPU path builds (:class:`~.random_walk.WalkCSR`, :class:`~.random_walk.WalkWeights`,
:class:`~.node2vec.N2VEnvelope`, on the graph's device) and return the same traces / edge ids
(positions for node2vec) as the CPU path for the same seed.  On CUDA tensors the kernels run
compiled; on CPU tensors (backend forced to ``triton``) they run under the Triton interpreter.
"""
from __future__ import annotations

import torch

from ...launch import triton_kernel
from ..arrays import signed64

__all__ = ["random_walk_triton", "node2vec_triton", "mdrw_triton"]


def _iters(max_deg: int) -> int:
    """Binary-search steps that shrink any row of at most ``max_deg`` entries to one position."""
    return max(1, int(max_deg).bit_length())


def _outputs(W: int, length: int, return_eids: bool, device):
    traces = torch.full((W, length + 1), -1, dtype=torch.int64, device=device)
    eids = torch.full((W, length), -1, dtype=torch.int64, device=device) if return_eids else None
    return traces, eids


def random_walk_triton(csr, wt, nodes: torch.Tensor, length: int, thresh, seed: int, return_eids: bool):
    """Traces [W, length + 1] (int64, -1 padded) and eids [W, length] (or None) of ``random_walk``.
    ``thresh``: None, or per-step restart thresholds (ints in [0, 2^32]) as in walks.py."""
    from ....kernels.walks import BLOCK_W  # lazy: importing a kernel module fixes Triton's process mode

    device = csr.indptr.device
    nodes = nodes.to(device=device, dtype=torch.int64).contiguous()
    W = nodes.numel()
    traces, eids = _outputs(W, length, return_eids, device)
    traces[:, 0] = nodes
    if W == 0 or length == 0:
        return traces, eids
    kernel = triton_kernel("walks", "_random_walk_kernel", device)
    deg = csr.deg if wt is None else wt.deg
    key = wt.key if wt is not None else torch.zeros(1, dtype=torch.float64, device=device)
    restart = thresh is not None
    th = (torch.tensor(thresh, dtype=torch.int64, device=device) if restart
          else torch.zeros(1, dtype=torch.int64, device=device))
    eout = eids if return_eids else traces  # placeholder pointer when unused
    grid = (-(-W // BLOCK_W),)
    kernel[grid](nodes, csr.start, deg, csr.indices, csr.eids, key, th, traces, eout, W, length,
                 signed64(seed), _iters(csr.max_deg), WEIGHTED=wt is not None, RESTART=restart,
                 RETURN_EIDS=bool(return_eids), BLOCK_W=BLOCK_W, num_warps=4)
    return traces, eids


def node2vec_triton(csr, wt, env, nodes: torch.Tensor, length: int, seed: int, max_trials: int):
    """Traces [W, length + 1] and the CSR positions [W, length] of each step's edge (-1 padded) of
    ``node2vec_random_walk`` (``env``: the call's ``N2VEnvelope``): one launch of
    ``_node2vec_step_kernel`` per step; between steps a walk's state is its trace and the CSR
    positions of its edges.  ``max_trials``: the CPU path's trial budget, which must be the kernel's."""
    from ....kernels.walks import MAX_TRIALS, N2V_BLOCK_W, N2V_WARPS  # lazy: fixes Triton's process mode

    assert MAX_TRIALS == max_trials  # the kernel's trial budget is the CPU path's
    device = csr.indptr.device
    nodes = nodes.to(device=device, dtype=torch.int64).contiguous()
    W = nodes.numel()
    traces, pos = _outputs(W, length, True, device)  # pos: CSR position of each step's edge
    traces[:, 0] = nodes
    if W == 0 or length == 0:
        return traces, pos
    kernel = triton_kernel("walks", "_node2vec_step_kernel", device)
    f1 = torch.zeros(1, dtype=torch.float64, device=device)
    if env.edge is not None:  # length > 1: per-edge envelope mass / 2^32 and outlier position
        scale, alt = env.scale_alt()
    else:
        scale, alt = f1, torch.zeros(1, dtype=torch.int64, device=device)
    weighted = wt is not None
    deg = wt.deg if weighted else csr.deg
    key = wt.key if weighted else f1
    w = wt.w if weighted else f1
    main = env.main if weighted and env.main is not None else f1
    it = _iters(csr.max_deg)
    # float64 constants through memory (Python floats would be fp32 kernel arguments on GPUs);
    # 1/p and 1/q exactly as the CPU fallback computes them
    fparams = torch.tensor([float(env.inv_c), 1.0 / env.p, 1.0 / env.q], dtype=torch.float64, device=device)
    grid = (-(-W // N2V_BLOCK_W),)
    for s in range(length):
        kernel[grid](traces, pos, csr.start, deg, csr.deg, csr.indices, key, w, scale, alt, main,
                     W, length, s, signed64(seed), it, it, csr.max_deg,
                     int(env.thr_t), int(env.thr_lo), int(env.thr_hi), int(bool(env.nb_accepts)), fparams,
                     WEIGHTED=weighted, BLOCK_W=N2V_BLOCK_W, MAX_TRIALS=MAX_TRIALS, num_warps=N2V_WARPS)
    return traces, pos  # the caller maps positions to edge ids (keeps the eids load out of the kernel)


def mdrw_triton(csr, roots: torch.Tensor, walk_budget: int, seed: int):
    """``(nodes, src, dst, eids)`` of ``multi_dimensional_random_walk`` (int64, -1 padded) for roots
    [I, m]: one program of ``_mdrw_kernel`` per instance."""
    from ....kernels.walks import MDRW_BLOCK_M  # lazy: importing a kernel module fixes Triton's process mode

    device = csr.indptr.device
    frontier = roots.to(device=device, dtype=torch.int64).contiguous().clone()  # scratch, updated in place
    n_inst, m = frontier.shape
    steps = walk_budget - m
    nodes_out = torch.full((n_inst, walk_budget), -1, dtype=torch.int64, device=device)
    nodes_out[:, :m] = frontier
    src = torch.full((n_inst, steps), -1, dtype=torch.int64, device=device)
    dst, eid = src.clone(), src.clone()
    if n_inst == 0 or steps == 0:
        return nodes_out, src, dst, eid
    fdeg = csr.deg[frontier].contiguous()  # scratch: out-degree per frontier slot
    kernel = triton_kernel("walks", "_mdrw_kernel", device)
    kernel[(n_inst,)](frontier, fdeg, csr.start, csr.deg, csr.indices, csr.eids, nodes_out, src, dst, eid,
                 m, steps, walk_budget, signed64(seed), BLOCK_M=MDRW_BLOCK_M, num_warps=4)
    return nodes_out, src, dst, eid
