"""Peers timed beside our kernels in the same process, each where importable:

* ``torch.sparse.mm`` on a CSR tensor (cuSPARSE on a GPU): forward ``A @ x``; backward ``A^T @ g``
  on a prebuilt transposed CSR (what a hand-written backward does; no autograd through sparse);
* PyG: ``torch_geometric.utils.spmm`` on the same CSR tensor, and a ``MessagePassing`` sum
  (messages x_j * w materialised per edge, then scatter-summed; autograd for the backward);
* DGL: ``dgl.ops.gspmm`` and ``dgl.nn.GATConv`` (never on the GPU image, which has no DGL).

Each returns ``(forward, forward_backward)`` closures or raises; the caller records the error.
"""
from __future__ import annotations

import torch


def csr_tensor(indptr, indices, values, n: int):
    return torch.sparse_csr_tensor(indptr, indices, values, (n, n), check_invariants=False)


class CsrPair:
    """``A`` (rows = destinations) and ``A^T`` as CSR tensors with per-edge values."""

    def __init__(self, src, dst, n: int, values):
        self.a = _csr(dst, src, n, values)
        self.at = _csr(src, dst, n, values)


def _csr(rows, cols, n, values):
    order = torch.argsort(rows * n + cols)
    indptr = torch.zeros(n + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=n), 0, out=indptr[1:])
    return csr_tensor(indptr, cols[order], values[order], n)


def torch_sparse(pair: CsrPair, x, gout):
    def fwd():
        return torch.sparse.mm(pair.a, x)

    def fwd_bwd():
        torch.sparse.mm(pair.a, x)
        return torch.sparse.mm(pair.at, gout)
    return fwd, fwd_bwd


def pyg_spmm(pair: CsrPair, x, gout):
    # lazy: PyG is an optional peer (absent from CI)
    from torch_geometric.utils import spmm

    def fwd():
        return spmm(pair.a, x, reduce="sum")

    def fwd_bwd():
        spmm(pair.a, x, reduce="sum")
        return spmm(pair.at, gout, reduce="sum")
    return fwd, fwd_bwd


def pyg_message_passing(src, dst, n: int, x, w, gout):
    # lazy: PyG is an optional peer (absent from CI)
    from torch_geometric.nn import MessagePassing

    class SumConv(MessagePassing):
        def __init__(self):
            super().__init__(aggr="sum")

        def forward(self, h, edge_index, edge_weight):
            return self.propagate(edge_index, x=h, edge_weight=edge_weight, size=(n, n))

        def message(self, x_j, edge_weight):
            return x_j if edge_weight is None else x_j * edge_weight.view(-1, 1)

    conv, edge_index = SumConv(), torch.stack([src, dst])
    xg = x.detach().requires_grad_(True)

    def fwd():
        with torch.no_grad():
            return conv(x, edge_index, w)

    def fwd_bwd():
        out = conv(xg, edge_index, w)
        out.backward(gout)
        return out
    return fwd, fwd_bwd


def dgl_gspmm(src, dst, n: int, x, w, gout):
    # lazy: DGL is an optional peer; the report itself never needs it (the GPU image has none)
    import dgl

    g = dgl.graph((src, dst), num_nodes=n)
    xg = x.detach().requires_grad_(True)
    op = "copy_lhs" if w is None else "mul"

    def run(h):
        return dgl.ops.gspmm(g, op, "sum", h, w)

    def fwd():
        with torch.no_grad():
            return run(x)

    def fwd_bwd():
        out = run(xg)
        out.backward(gout)
        return out
    return fwd, fwd_bwd


def dgl_gatconv(in_feats: int, heads: int, dim: int, src, dst, n: int):
    """DGL's GATConv as a peer of the attention section: ``(module, call(module, x))``."""
    # lazy: DGL is an optional peer; the report itself never needs it (the GPU image has none)
    import dgl

    g = dgl.graph((src, dst), num_nodes=n)
    return dgl.nn.GATConv(in_feats, dim, heads, allow_zero_in_degree=True), lambda m, x: m(g, x)


def message_bytes(num_edges: int, width: int, dtype: torch.dtype) -> int:
    """Memory a per-edge message peer materialises (messages, their gradient, a scatter buffer)."""
    return 3 * num_edges * width * torch.empty(0, dtype=dtype).element_size()


def memory_left(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return 2 << 30  # the CPU run is tiny by construction: refuse anything larger than 2 GiB
