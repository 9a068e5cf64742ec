"""Approximate personalised PageRank push for many targets at once (shaDow-GNN's PPR scope; the
algorithm, its error bound and the selection: dgl_accel/core/sampling/shadow/ppr.py; the rounds:
dgl_accel/core/sampling/shadow/ppr_device.py).

The device pipeline runs the CPU reference's synchronous rounds for a group of targets in torch
ops, with work proportional to the pushed entries: each round's contributions ``(key, share)`` (key
= the receiving (target, node), in the CPU's (pusher, CSR entry) order) are sorted stably by key,
so each key's contributions form a segment in that order.  ``_ppr_spread_kernel`` adds them to the
residuals: one lane per key, ``r[key] = ((r[key] + c_0) + c_1) + ...`` in segment order, which is
``np.add.at``'s sequential order, so the float64 residuals are the CPU's bit for bit (an atomic or a
tree sum would round differently).  Keys are distinct, so lanes never write the same residual.

Launch with ``enable_fp_fusion=False`` (additions only; kept off so a later edit cannot fuse).
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit(do_not_specialize=["n_keys"])  # every round's count: one variant
def _ppr_spread_kernel(r_ptr, key_ptr, seg_ptr, val_ptr, n_keys: tl.int64, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n_keys
    key = tl.load(key_ptr + i, mask=m, other=0)
    j = tl.load(seg_ptr + i, mask=m, other=0)
    end = tl.load(seg_ptr + i + 1, mask=m, other=0)
    acc = tl.load(r_ptr + key, mask=m, other=0.0)
    while tl.max(end - j, axis=0) > 0:  # the block's longest segment; shorter ones idle
        live = j < end
        acc = tl.where(live, acc + tl.load(val_ptr + j, mask=live, other=0.0), acc)
        j += 1
    tl.store(r_ptr + key, acc, mask=m)


BLOCK = 128  # keys per program

SPECIALISATIONS = [
    Specialisation("ppr", "_ppr_spread_kernel",
                   {"r_ptr": "*fp64", "key_ptr": "*i64", "seg_ptr": "*i64", "val_ptr": "*fp64", "n_keys": "i64",
                    "BLOCK": "constexpr"},
                   {"BLOCK": BLOCK}, num_warps=4)
]
