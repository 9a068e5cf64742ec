"""Neighbour choice for transit-parallel sampling (NextDoor, EuroSys'21), uniform, with and
without replacement.

Each transit vertex v draws ``fanout`` of its CSR neighbours.  Slot j takes word (j % 4) of the
Philox4x32 block at counter (step * num_nodes + v) * ceil(fanout / 4) + j // 4 (one Philox
evaluation serves four slots), so a choice depends only on (seed, step, v, j): identical on CPU
(dgl_accel/sampling/choice.py), under the interpreter and on a GPU.
Without replacement and deg(v) > fanout the slots follow Floyd's algorithm (slot j draws
t in [0, deg - fanout + j]; a repeat takes deg - fanout + j instead), a uniform k-subset.

Kernel classes by a transit's work (slots to fill), as in NextDoor:
* sub-warp (< 32 slots): BLOCK_T transits per program, their slots side by side in one tile;
* block (32 .. 1024 slots): one transit per program (BLOCK_T = 1), slots across the program;
the launcher (dgl_accel/sampling/engine.py) sorts transits into the classes.  A transit's
adjacency is read straight from global memory: with one draw per slot each neighbour-list entry
is touched at most once, so staging it on chip would not save traffic.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def _neighbor_choice_kernel(indptr_ptr, transits_ptr, out_ptr, num_transits, fanout, seed, step, num_nodes,
                            REPLACE: tl.constexpr, BLOCK_T: tl.constexpr, K_PAD: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    i_mask = i < num_transits
    v = tl.load(transits_ptr + i, mask=i_mask, other=0).to(tl.int64)
    start = tl.load(indptr_ptr + v, mask=i_mask, other=0)
    deg = tl.load(indptr_ptr + v + 1, mask=i_mask, other=0) - start
    j = tl.arange(0, K_PAD).to(tl.int64)
    slot = i_mask[:, None] & (j[None, :] < fanout)
    words = (fanout + 3) // 4
    counter = (step * num_nodes + v)[:, None] * words + (j // 4)[None, :]
    r0, r1, r2, r3 = tl.randint4x(seed, counter)
    lane = (j % 4)[None, :]
    r = tl.where(lane == 0, r0, tl.where(lane == 1, r1, tl.where(lane == 2, r2, r3)))
    r = r.to(tl.int64) & 0xFFFFFFFF  # uint32 draw as a non-negative int64
    d2 = tl.maximum(deg, 1)[:, None]
    if REPLACE:
        pos = tl.where(deg[:, None] > 0, start[:, None] + r % d2, -1)
    else:
        # Floyd: slot jj draws t in [0, m], m = deg - fanout + jj; a repeat of an earlier slot takes m.
        chosen = tl.full((BLOCK_T, K_PAD), -1, tl.int64)
        for jj in range(0, fanout):
            r_jj = tl.sum(tl.where(j[None, :] == jj, r, 0), axis=1)
            m = deg - fanout + jj
            t = r_jj % tl.maximum(m + 1, 1)
            seen = tl.sum(tl.where((chosen == t[:, None]) & (j[None, :] < jj), 1, 0), axis=1) > 0
            t = tl.where(seen, m, t)
            chosen = tl.where(j[None, :] == jj, t[:, None], chosen)
        small = (deg <= fanout)[:, None]
        pos = tl.where(small, tl.where(j[None, :] < deg[:, None], start[:, None] + j[None, :], -1),
                       start[:, None] + chosen)
    tl.store(out_ptr + i[:, None] * fanout + j[None, :], pos, mask=slot)


SUBWARP_BLOCK_T = 32  # transits per program in the sub-warp class


def k_pad(slots: int) -> int:
    return max(2, 1 << max(0, int(slots - 1).bit_length()))


SPECIALISATIONS = [
    Specialisation("sampling", "_neighbor_choice_kernel",
                   {"indptr_ptr": "*i64", "transits_ptr": "*i64", "out_ptr": "*i64", "num_transits": "i64",
                    "fanout": "i64", "seed": "i64", "step": "i64", "num_nodes": "i64",
                    "REPLACE": "constexpr", "BLOCK_T": "constexpr", "K_PAD": "constexpr"},
                   {"REPLACE": rep, "BLOCK_T": bt, "K_PAD": kp}, num_warps=nw)
    for rep in (True, False)
    for bt, kp, nw in ((SUBWARP_BLOCK_T, 16, 4), (SUBWARP_BLOCK_T, 32, 4), (1, 128, 4), (1, 1024, 4))
]
