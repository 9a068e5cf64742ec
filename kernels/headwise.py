"""Sum over CSR rows of messages with head-wise (broadcast) edge weights, and of edge features.

A program owns one row r of a CSR view and a tile of BLOCK_F features; it walks the row's entries in
chunks of BLOCK_E and accumulates in fp32 (fp64 for fp64 inputs).  Entry k (CSR position) carries

* OP == 0 (copy):  x[col_k, f]                          (copy_e: the launcher passes eids as cols)
* OP == 1 (mul):   x[col_k, f] * w[eids[k], (f // R) % K]

``x`` is [N, F] (F = L * K * R: features viewed as [N, L, K, R]) and ``w`` is [E, K]: one weight per
edge and head, shared by the R features of the head (and by the L leading groups), which is DGL's
broadcasting of ``u_mul_e`` with ``[E, H, 1]`` weights on ``[N, H, D]`` features (K = H, R = D, L = 1).
The same kernel on the out-CSR with ``x`` the output gradient is the gradient w.r.t. the node
features.  Rows without entries store 0.  Row pointers and all address arithmetic are int64.
"""
import triton
import triton.language as tl

# the same row x feature tiles as the max/min kernel, and its pieces of one
from .extrema import NUM_WARPS, TILES, feature_tile, gather_rows, row_tile
from .registry import Specialisation

__all__ = ["OPS", "NUM_WARPS", "TILES", "feature_tile", "SPECIALISATIONS"]

OPS = {"copy": 0, "mul": 1}


@triton.jit
def _headwise_fwd_kernel(indptr_ptr, cols_ptr, eids_ptr, x_ptr, w_ptr, out_ptr, num_feat, num_heads, head_len,
                         OP: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    acc_dtype = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    r, f, f_mask, start, end = row_tile(indptr_ptr, num_feat, BLOCK_F)
    head = (f // head_len) % num_heads  # the weight column of each feature
    acc = tl.zeros((BLOCK_F,), acc_dtype)
    for k0 in range(start, end, BLOCK_E):
        k, e_mask, m2, x = gather_rows(cols_ptr, x_ptr, k0, end, f, f_mask, num_feat, BLOCK_E)
        if OP == 1:
            eid = tl.load(eids_ptr + k, mask=e_mask, other=0).to(tl.int64)
            w = tl.load(w_ptr + eid[:, None] * num_heads + head[None, :], mask=m2, other=0.0).to(acc_dtype)
            x = x * w
        acc += tl.sum(x, axis=0)
    tl.store(out_ptr + r * num_feat + f, acc.to(out_ptr.dtype.element_ty), mask=f_mask)


_DT = ("fp32", "fp16", "bf16", "fp64")
_IDX = ("i32", "i64")


def _spec(t: str, idx: str, op: int, tile: tuple[int, int]) -> Specialisation:
    sig = {"indptr_ptr": "*i64", "cols_ptr": f"*{idx}", "eids_ptr": f"*{idx}", "x_ptr": f"*{t}", "w_ptr": f"*{t}",
           "out_ptr": f"*{t}", "num_feat": "i32", "num_heads": "i32", "head_len": "i32", "OP": "constexpr",
           "BLOCK_E": "constexpr", "BLOCK_F": "constexpr"}
    return Specialisation("headwise", "_headwise_fwd_kernel", sig,
                          {"OP": op, "BLOCK_E": tile[0], "BLOCK_F": tile[1]}, num_warps=NUM_WARPS)


SPECIALISATIONS = [_spec(t, idx, op, tile) for t in _DT for idx in _IDX for op in OPS.values() for tile in TILES]
