"""Neighbour choice for transit-parallel sampling (NextDoor, EuroSys'21), uniform, with and
without replacement.

Each transit vertex v draws ``fanout`` of its CSR neighbours.  Slot j takes word (j % 4) of the
Philox4x32 block at counter (step * num_nodes + c) * ceil(fanout / 4) + j // 4, c = v (or a
caller-given counter id, e.g. sample * n + v, so samples sharing a transit draw independently) (one Philox
evaluation serves four slots), so a choice depends only on (seed, step, v, j): identical on CPU
(dgl_accel/core/sampling/neighbor/choice.py), under the interpreter and on a GPU.
Without replacement and deg(v) > fanout the slots follow Floyd's algorithm (slot j draws
t in [0, deg - fanout + j]; a repeat takes deg - fanout + j instead), a uniform k-subset.

Kernel classes by a transit's work (slots to fill), as in NextDoor:
* sub-warp (< 32 slots): BLOCK_T transits per program, their slots side by side in one tile;
* block (32 .. 1024 slots): one transit per program (BLOCK_T = 1), slots across the program;
the launcher (dgl_accel/core/sampling/neighbor/launchers.py, with the classes of
dgl_accel/core/sampling/neighbor/engine.py) sorts transits into the classes.  A transit's
adjacency is read straight from global memory: with one draw per slot each neighbour-list entry
is touched at most once, so staging it on chip would not save traffic.
"""
import triton
import triton.language as tl

from .registry import Specialisation

# The scalars change from call to call (the key every call, the transit count every hop): typed
# int64 and not specialised on their values, so every call runs the one registered variant instead
# of compiling one per (key >= 2^63, key % 16 == 0, step == 1, ...) combination.
_SCALARS = ["num_transits", "fanout", "seed", "step", "num_nodes"]


@triton.jit(do_not_specialize=_SCALARS)
def _neighbor_choice_kernel(indptr_ptr, transits_ptr, cids_ptr, out_ptr, num_transits: tl.int64, fanout: tl.int64,
                            seed: tl.int64, step: tl.int64, num_nodes: tl.int64, REPLACE: tl.constexpr,
                            BLOCK_T: tl.constexpr, K_PAD: tl.constexpr, HAS_CIDS: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    i_mask = i < num_transits
    v = tl.load(transits_ptr + i, mask=i_mask, other=0).to(tl.int64)
    cid = v
    if HAS_CIDS:  # counters named by (sample, transit) instead of the transit alone
        cid = tl.load(cids_ptr + i, mask=i_mask, other=0).to(tl.int64)
    start = tl.load(indptr_ptr + v, mask=i_mask, other=0)
    deg = tl.load(indptr_ptr + v + 1, mask=i_mask, other=0) - start
    j = tl.arange(0, K_PAD).to(tl.int64)
    slot = i_mask[:, None] & (j[None, :] < fanout)
    words = (fanout + 3) // 4
    counter = (step * num_nodes + cid)[:, None] * words + (j // 4)[None, :]
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


@triton.jit(do_not_specialize=_SCALARS[1:])
def _neighbor_choice_grid_kernel(indptr_ptr, transits_ptr, cids_ptr, out_ptr, fanout: tl.int64, seed: tl.int64,
                                 step: tl.int64, num_nodes: tl.int64, REPLACE: tl.constexpr, CHUNK: tl.constexpr,
                                 HAS_CIDS: tl.constexpr):
    """Grid class (fanout > 1024 slots): program (t, c) fills slots [c * CHUNK, (c + 1) * CHUNK) of
    transit t, so one transit spans several programs.  Same draws as the kernel above.

    Floyd's rule (no replacement, deg > fanout) is sequential over slots, so there only program
    c == 0 of a transit works, chunk after chunk, checking each draw against the chunks it has
    already written (read back after a barrier) and the earlier slots of the current chunk."""
    t = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1).to(tl.int64)
    v = tl.load(transits_ptr + t).to(tl.int64)
    cid = v
    if HAS_CIDS:
        cid = tl.load(cids_ptr + t).to(tl.int64)
    start = tl.load(indptr_ptr + v)
    deg = tl.load(indptr_ptr + v + 1) - start
    lanes = tl.arange(0, CHUNK).to(tl.int64)
    words = (fanout + 3) // 4
    row = out_ptr + t * fanout
    if REPLACE:
        j = c * CHUNK + lanes
        r0, r1, r2, r3 = tl.randint4x(seed, (step * num_nodes + cid) * words + j // 4)
        r = tl.where(j % 4 == 0, r0, tl.where(j % 4 == 1, r1, tl.where(j % 4 == 2, r2, r3)))
        r = r.to(tl.int64) & 0xFFFFFFFF
        tl.store(row + j, tl.where(deg > 0, start + r % tl.maximum(deg, 1), -1), mask=j < fanout)
    elif deg <= fanout:  # every neighbour, in CSR order
        j = c * CHUNK + lanes
        tl.store(row + j, tl.where(j < deg, start + j, -1), mask=j < fanout)
    elif c == 0:
        for cc in range(0, tl.cdiv(fanout, CHUNK)):
            j = cc * CHUNK + lanes
            r0, r1, r2, r3 = tl.randint4x(seed, (step * num_nodes + cid) * words + j // 4)
            r = tl.where(j % 4 == 0, r0, tl.where(j % 4 == 1, r1, tl.where(j % 4 == 2, r2, r3)))
            r = r.to(tl.int64) & 0xFFFFFFFF
            draw = r % tl.maximum(deg - fanout + j + 1, 1)
            chosen = tl.full((CHUNK,), -1, tl.int64)
            for q in range(0, tl.minimum(fanout - cc * CHUNK, CHUNK)):
                jj = cc * CHUNK + q
                t_q = tl.sum(tl.where(lanes == q, draw, 0), axis=0)
                hits = tl.sum(tl.where((chosen == t_q) & (lanes < q), 1, 0), axis=0)
                for pc in range(0, cc):
                    prev = tl.load(row + pc * CHUNK + lanes) - start
                    hits += tl.sum(tl.where(prev == t_q, 1, 0), axis=0)
                t_q = tl.where(hits > 0, deg - fanout + jj, t_q)
                chosen = tl.where(lanes == q, t_q, chosen)
            tl.store(row + j, start + chosen, mask=j < fanout)
            tl.debug_barrier()  # later chunks read these slots back


SUBWARP_BLOCK_T = 32  # transits per program in the sub-warp class
GRID_CHUNK = 1024     # slots per program in the grid class


def k_pad(slots: int) -> int:
    return max(2, 1 << max(0, int(slots - 1).bit_length()))


# (BLOCK_T, K_PAD, num_warps) of each class the report launches; with counter ids also K_PAD 4: k-hop
# sampling (core/sampling/neighbor/khop.py) keys its draws by (sample, transit), and the report's k-hop
# checks end on a hop of fanout 3
_CLASSES = ((SUBWARP_BLOCK_T, 16, 4), (SUBWARP_BLOCK_T, 32, 4), (1, 128, 4), (1, 1024, 4))
_CIDS_CLASSES = _CLASSES + ((SUBWARP_BLOCK_T, 4, 4),)

SPECIALISATIONS = [
    Specialisation("sampling", "_neighbor_choice_kernel",
                   {"indptr_ptr": "*i64", "transits_ptr": "*i64", "cids_ptr": "*i64", "out_ptr": "*i64",
                    "num_transits": "i64", "fanout": "i64", "seed": "i64", "step": "i64", "num_nodes": "i64",
                    "REPLACE": "constexpr", "BLOCK_T": "constexpr", "K_PAD": "constexpr", "HAS_CIDS": "constexpr"},
                   {"REPLACE": rep, "BLOCK_T": bt, "K_PAD": kp, "HAS_CIDS": cids}, num_warps=nw)
    for rep in (True, False)
    for cids in (False, True)
    for bt, kp, nw in (_CIDS_CLASSES if cids else _CLASSES)
]
SPECIALISATIONS += [
    Specialisation("sampling", "_neighbor_choice_grid_kernel",
                   {"indptr_ptr": "*i64", "transits_ptr": "*i64", "cids_ptr": "*i64", "out_ptr": "*i64",
                    "fanout": "i64", "seed": "i64", "step": "i64", "num_nodes": "i64", "REPLACE": "constexpr",
                    "CHUNK": "constexpr", "HAS_CIDS": "constexpr"},
                   {"REPLACE": rep, "CHUNK": GRID_CHUNK, "HAS_CIDS": cids}, num_warps=8)
    for rep in (True, False)
    for cids in (False, True)
]
