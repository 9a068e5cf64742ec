"""Row-wise CSR SpMM, ``out[r] = sum_{k in row r} feat[indices[k]]`` (DGL's copy_u + sum).

One program owns one destination row and one tile of the feature dimension and walks that row's
neighbour list in chunks of BLOCK_E.  This is the plain baseline that the neighbour-grouped
kernels (GNNAdvisor-style, later) improve on for skewed degrees; it is also what the main job's
GCN runs through the Triton path today.
"""
import triton
import triton.language as tl

from .registry import Specialisation


@triton.jit
def _csr_spmm_kernel(indptr_ptr, indices_ptr, feat_ptr, out_ptr, num_feats,
                     stride_feat, stride_out,
                     BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr, ACC_FP64: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    f_offs = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = f_offs < num_feats
    start = tl.load(indptr_ptr + row)  # int64 row pointers: edge counts may exceed 2^31
    end = tl.load(indptr_ptr + row + 1)
    # fp32 accumulation for fp32/fp16/bf16 inputs; fp64 inputs (gradcheck) keep fp64.
    acc = tl.zeros((BLOCK_F,), dtype=tl.float64 if ACC_FP64 else tl.float32)
    for e0 in range(start, end, BLOCK_E):
        e_offs = e0 + tl.arange(0, BLOCK_E)
        e_mask = e_offs < end
        src = tl.load(indices_ptr + e_offs, mask=e_mask, other=0).to(tl.int64)
        ptrs = feat_ptr + src[:, None] * stride_feat + f_offs[None, :]
        vals = tl.load(ptrs, mask=e_mask[:, None] & f_mask[None, :], other=0.0)
        acc += tl.sum(vals.to(acc.dtype), axis=0)
    tl.store(out_ptr + row * stride_out + f_offs, acc.to(out_ptr.dtype.element_ty), mask=f_mask)


SPECIALISATIONS = [
    Specialisation("spmm_csr", "_csr_spmm_kernel",
                   {"indptr_ptr": "*i64", "indices_ptr": f"*{idx}", "feat_ptr": f"*{t}",
                    "out_ptr": f"*{t}", "num_feats": "i32", "stride_feat": "i64", "stride_out": "i64",
                    "BLOCK_E": "constexpr", "BLOCK_F": "constexpr"},
                   {"BLOCK_E": 32, "BLOCK_F": bf, "ACC_FP64": t == "fp64"})
    for t in ("fp32", "fp16", "bf16", "fp64") for idx in ("i32", "i64") for bf in (32, 128)
]
