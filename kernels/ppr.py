"""Approximate personalised PageRank push, one target per program (shaDow-GNN's PPR scope; the
algorithm, its error bound and the selection: dgl_accel/core/sampling/ppr.py).

Program t owns row t of dense workspaces [T, n] in global memory (estimate p, residual r, the
active list and the pushed amounts) and runs the synchronous rounds of the CPU reference:

1. take: every active node u (the list is in increasing id) moves alpha * r[u] to p[u], keeps its
   residual as the pushed amount, r[u] = 0;
2. spread: active nodes one after another in list order, each over its CSR row in chunks,
   ``atomic_add(r[v], (1 - alpha) * amount / deg(u))`` with a barrier after every chunk, so every
   residual receives its contributions in the CPU's (node, entry) order (lanes of one chunk that
   hit the same v - parallel edges - add the same value, so their order cannot matter): the
   float64 sums are the CPU's bit for bit;
3. scan: the next active list is every node with r[v] >= thr[v] (thr = eps * max(deg, 1), computed
   once on the host as the CPU does), compacted in increasing id with a block prefix sum.

Launch with ``enable_fp_fusion=False`` (the CPU adds alpha * r[u] to p[u] in two roundings).  The
dense scan costs n per round; the launcher bounds the workspace by running the targets in groups.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def _ppr_push_kernel(indptr_ptr, indices_ptr, thr_ptr, targets_ptr, p_ptr, r_ptr, act_ptr, amt_ptr, n,
                     alpha: tl.float64, keep: tl.float64, BLOCK: tl.constexpr, BLOCK_E: tl.constexpr):
    # alpha and keep are annotated: a compiled kernel types a bare Python float as fp32, so the
    # estimates would differ from the CPU's from the first push (found on the first GPU run; the
    # interpreter keeps the float64 and cannot show it).
    t = tl.program_id(0).to(tl.int64)
    s = tl.load(targets_ptr + t).to(tl.int64)
    base = t * n
    p_row = p_ptr + base
    r_row = r_ptr + base
    act = act_ptr + base
    amt = amt_ptr + base
    tl.store(r_row + s, 1.0)
    tl.store(act, s)
    na = s * 0 + 1
    tl.debug_barrier()
    while na > 0:
        for c in range(0, na, BLOCK):  # take
            i = c + tl.arange(0, BLOCK)
            m = i < na
            u = tl.load(act + i, mask=m, other=0)
            a = tl.load(r_row + u, mask=m, other=0.0)
            tl.store(amt + i, a, mask=m)
            tl.store(r_row + u, 0.0, mask=m)
            pu = tl.load(p_row + u, mask=m, other=0.0)
            tl.store(p_row + u, pu + alpha * a, mask=m)
        tl.debug_barrier()
        for i in range(0, na):  # spread, in list order
            u = tl.load(act + i)
            start = tl.load(indptr_ptr + u)
            end = tl.load(indptr_ptr + u + 1)
            share = tl.load(amt + i) * keep / tl.maximum(end - start, 1).to(tl.float64)
            for c in range(start, end, BLOCK_E):
                e = c + tl.arange(0, BLOCK_E)
                me = e < end
                v = tl.load(indices_ptr + e, mask=me, other=0).to(tl.int64)
                tl.atomic_add(r_row + v, tl.zeros([BLOCK_E], tl.float64) + share, mask=me)
                tl.debug_barrier()
        tl.debug_barrier()
        nxt = na * 0
        for c in range(0, n, BLOCK):  # scan: the next active list, increasing id
            v = c + tl.arange(0, BLOCK)
            m = v < n
            rv = tl.load(r_row + v, mask=m, other=0.0)
            th = tl.load(thr_ptr + v, mask=m, other=1.0)
            hit = (m & (rv >= th)).to(tl.int64)
            pos = nxt + tl.cumsum(hit, 0) - 1
            tl.store(act + pos, v, mask=hit > 0)
            nxt += tl.sum(hit, 0)
        na = nxt
        tl.debug_barrier()


BLOCK = 256    # active-list and scan chunk
BLOCK_E = 128  # CSR entries per spread chunk (shaDow graphs: mean degree 10-100)

SPECIALISATIONS = [
    Specialisation("ppr", "_ppr_push_kernel",
                   {"indptr_ptr": "*i64", "indices_ptr": f"*{it}", "thr_ptr": "*fp64", "targets_ptr": "*i64",
                    "p_ptr": "*fp64", "r_ptr": "*fp64", "act_ptr": "*i64", "amt_ptr": "*fp64", "n": "i64",
                    "alpha": "fp64", "keep": "fp64", "BLOCK": "constexpr", "BLOCK_E": "constexpr"},
                   {"BLOCK": BLOCK, "BLOCK_E": BLOCK_E}, num_warps=4)
    for it in ("i32", "i64")
]
