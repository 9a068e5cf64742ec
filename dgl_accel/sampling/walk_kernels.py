"""Launchers of the random-walk kernels (``dgl_accel/kernels/walks.py``).

They take the tables the CPU path builds (``_CSR``, ``_Weights``, ``_N2VEnvelope`` in walks.py, on
the graph's device) and return the same traces / edge ids as the CPU path for the same seed.
On CUDA tensors the kernels run compiled; on CPU tensors (backend forced to ``triton``) they run
under the Triton interpreter.
"""
from __future__ import annotations

import torch

from ..core.launch import triton_kernel


def _signed64(seed: int) -> int:
    """The seed's bit pattern as a signed int64 kernel argument (``tl.randint4x`` reads it back as
    uint64, so seeds in [2^63, 2^64) keep their Philox key)."""
    return seed - (1 << 64) if seed >= (1 << 63) else seed


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
    from ..kernels.walks import BLOCK_W

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
                 _signed64(seed), _iters(csr.max_deg), WEIGHTED=wt is not None, RESTART=restart,
                 RETURN_EIDS=bool(return_eids), BLOCK_W=BLOCK_W, num_warps=4)
    return traces, eids


def node2vec_triton(csr, wt, env, nodes: torch.Tensor, length: int, seed: int, return_eids: bool):
    """Traces and eids of ``node2vec_random_walk`` (``env``: the call's ``_N2VEnvelope``): one
    launch of ``_node2vec_step_kernel`` per step; between steps a walk's state is its trace and
    the CSR positions of its edges."""
    from ..kernels.walks import MAX_TRIALS, N2V_BLOCK_W, N2V_WARPS
    from .walks import _MAX_TRIALS

    assert MAX_TRIALS == _MAX_TRIALS  # the kernel's trial budget is the CPU path's
    device = csr.indptr.device
    nodes = nodes.to(device=device, dtype=torch.int64).contiguous()
    W = nodes.numel()
    traces, eids = _outputs(W, length, return_eids, device)
    traces[:, 0] = nodes
    if W == 0 or length == 0:
        return traces, eids
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
    pos = torch.full((W, length), -1, dtype=torch.int64, device=device)  # CSR position of each step's edge
    it = _iters(csr.max_deg)
    # float64 constants through memory (Python floats would be fp32 kernel arguments on GPUs);
    # 1/p and 1/q exactly as the CPU fallback computes them
    fparams = torch.tensor([float(env.inv_c), 1.0 / env.p, 1.0 / env.q], dtype=torch.float64, device=device)
    grid = (-(-W // N2V_BLOCK_W),)
    for s in range(length):
        kernel[grid](traces, pos, csr.start, deg, csr.deg, csr.indices, key, w, scale, alt, main,
                     W, length, s, _signed64(seed), it, it, csr.max_deg,
                     int(env.thr_t), int(env.thr_lo), int(env.thr_hi), int(bool(env.nb_accepts)), fparams,
                     WEIGHTED=weighted, BLOCK_W=N2V_BLOCK_W, MAX_TRIALS=MAX_TRIALS, num_warps=N2V_WARPS)
    if return_eids:  # positions -> edge ids (one gather; keeps the eids load out of the kernel)
        from .walks import positions_to_eids

        eids = positions_to_eids(csr, pos)
    return traces, eids


def mdrw_triton(csr, roots: torch.Tensor, walk_budget: int, seed: int):
    """``(nodes, src, dst, eids)`` of ``multi_dimensional_random_walk`` (int64, -1 padded) for roots
    [I, m]: one program of ``_mdrw_kernel`` per instance."""
    from ..kernels.walks import MDRW_BLOCK_M

    device = csr.indptr.device
    frontier = roots.to(device=device, dtype=torch.int64).contiguous().clone()  # scratch, updated in place
    I, m = frontier.shape
    steps = walk_budget - m
    nodes_out = torch.full((I, walk_budget), -1, dtype=torch.int64, device=device)
    nodes_out[:, :m] = frontier
    src = torch.full((I, steps), -1, dtype=torch.int64, device=device)
    dst, eid = src.clone(), src.clone()
    if I == 0 or steps == 0:
        return nodes_out, src, dst, eid
    fdeg = csr.deg[frontier].contiguous()  # scratch: out-degree per frontier slot
    kernel = triton_kernel("walks", "_mdrw_kernel", device)
    kernel[(I,)](frontier, fdeg, csr.start, csr.deg, csr.indices, csr.eids, nodes_out, src, dst, eid,
                 m, steps, walk_budget, _signed64(seed), BLOCK_M=MDRW_BLOCK_M, num_warps=4)
    return nodes_out, src, dst, eid
