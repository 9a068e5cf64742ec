"""Attention: one attention layer (in -> H heads x D) of each kind (``op``: GAT, GATv2, dot product),
forward and forward+backward, and the peak memory of one training step, ours fused beside the unfused
composition of our own ops and the peers.  GAT:

* ``dgl_accel fused``: the projection, the two score halves el/er, then
  :func:`~dgl_accel.core.attention.gat.gat_attention` (scores, online softmax and weighted sum in
  one pass; the backward recomputes the attention from per-node normalisers);
* ``dgl_accel unfused``: the same projection and halves, then the three passes a framework runs:
  per-edge scores (E x H), :func:`~dgl_accel.core.attention.edge_softmax.edge_softmax` (E x H), and
  one u_mul_e aggregation per head (:func:`~dgl_accel.core.aggregation.function.aggregate`);
* ``PyG GATConv`` (``add_self_loops=False``, the same sizes; PyG materialises E x H x D messages);
* ``DGL GATConv`` where DGL is importable (never on the GPU image).

GATv2 (``dgl.nn.GATv2Conv``'s parameters) and dot product (``dgl.nn.DotGatConv``'s: one projection
for queries, keys and values, scores scaled by 1/sqrt(D)): fused
(:func:`~dgl_accel.core.attention.gatv2.gatv2_attention`, :func:`~dgl_accel.core.attention.dot.dot_attention`),
unfused (GATv2: its E x H x D scores in torch, then edge_softmax and the per-head aggregations; dot:
``gsddmm`` dot, edge_softmax, the aggregations) and PyG's ``GATv2Conv`` / ``TransformerConv``
(``root_weight=False``).  A provider that would materialise E x H x D tensors past half of the free
memory is a row with the reason, not an out-of-memory error.

Every provider runs its own parameters of the same shapes on the same graph and inputs (timings
and memory, not outputs, are compared here: the correctness section checks the kernels).  Peak
memory of a step (CUDA only): ``torch.cuda.max_memory_allocated`` after one forward+backward,
minus what was allocated before it, after ``reset_peak_memory_stats``; ``None`` elsewhere.
"""
from __future__ import annotations

import torch

from ..core.aggregation.function import aggregate
from ..core.aggregation.views import TensorGraph
from ..core.attention.dot import dot_attention
from ..core.attention.edge_softmax import edge_softmax
from ..core.attention.gat import gat_attention
from ..core.attention.gatv2 import gatv2_attention
from ..core.sddmm.function import gsddmm
from . import peers
from .graphs import Graph
from .timing import median_seconds, synchronize

SLOPE = 0.2


class Layer(torch.nn.Module):
    """GAT's parameters (DGL's layout: fc, attn_l, attn_r, bias) and our two ways to run them."""

    def __init__(self, in_feats: int, heads: int, dim: int, fused: bool):
        super().__init__()
        self.heads, self.dim, self.fused = heads, dim, fused
        self.fc = torch.nn.Linear(in_feats, heads * dim, bias=False)
        self.attn_l = torch.nn.Parameter(torch.randn(1, heads, dim) * 0.1)
        self.attn_r = torch.nn.Parameter(torch.randn(1, heads, dim) * 0.1)
        self.bias = torch.nn.Parameter(torch.zeros(heads * dim))

    def forward(self, views: TensorGraph, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x).view(-1, self.heads, self.dim)
        el, er = (h * self.attn_l).sum(-1), (h * self.attn_r).sum(-1)
        if self.fused:
            out = gat_attention(views, h, el, er, SLOPE)
        else:
            src, dst = (t.long() for t in views.edges_by_id())
            a = edge_softmax(views.csr("in"), torch.nn.functional.leaky_relu(el[src] + er[dst], SLOPE))
            out = _per_head_sum(views, h, a)
        return out + self.bias.view(1, self.heads, self.dim)


def _per_head_sum(views: TensorGraph, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """sum over in-edges of a[e, k] h[u, k] per head k: one u_mul_e aggregation per head."""
    return torch.stack([aggregate(views, "u_mul_e", "sum", h[:, k], a[:, k]) for k in range(h.shape[1])], 1)


class Gatv2Layer(torch.nn.Module):
    """GATv2's parameters (DGL's layout: fc_src, fc_dst, attn, bias) and our two ways to run them."""

    def __init__(self, in_feats: int, heads: int, dim: int, fused: bool):
        super().__init__()
        self.heads, self.dim, self.fused = heads, dim, fused
        self.fc_src = torch.nn.Linear(in_feats, heads * dim, bias=False)
        self.fc_dst = torch.nn.Linear(in_feats, heads * dim, bias=False)
        self.attn = torch.nn.Parameter(torch.randn(1, heads, dim) * 0.1)
        self.bias = torch.nn.Parameter(torch.zeros(heads * dim))

    def forward(self, views: TensorGraph, x: torch.Tensor) -> torch.Tensor:
        fs, fd = self.fc_src(x).view(-1, self.heads, self.dim), self.fc_dst(x).view(-1, self.heads, self.dim)
        if self.fused:
            out = gatv2_attention(views, fs, fd, self.attn, SLOPE)
        else:
            src, dst = (t.long() for t in views.edges_by_id())
            z = torch.nn.functional.leaky_relu(fs[src] + fd[dst], SLOPE)
            out = _per_head_sum(views, fs, edge_softmax(views.csr("in"), (z * self.attn).sum(-1)))
        return out + self.bias.view(1, self.heads, self.dim)


class DotLayer(torch.nn.Module):
    """DotGatConv's parameters (one projection ``fc``, no bias) and our two ways to run them."""

    def __init__(self, in_feats: int, heads: int, dim: int, fused: bool):
        super().__init__()
        self.heads, self.dim, self.fused = heads, dim, fused
        self.fc = torch.nn.Linear(in_feats, heads * dim, bias=False)

    def forward(self, views: TensorGraph, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x).view(-1, self.heads, self.dim)
        if self.fused:
            return dot_attention(views, h, h, h)
        score = gsddmm(views, "dot", h, h, "u", "v").squeeze(-1) / self.dim ** 0.5
        return _per_head_sum(views, h, edge_softmax(views.csr("in"), score))


def _pyg_layer(kind: str, in_feats: int, heads: int, dim: int, edge_index):
    # lazy: PyG is an optional peer (absent from CI)
    import torch_geometric.nn as pyg

    if kind == "GATConv":
        conv = pyg.GATConv(in_feats, dim, heads=heads, add_self_loops=False, negative_slope=SLOPE)
    elif kind == "GATv2Conv":
        conv = pyg.GATv2Conv(in_feats, dim, heads=heads, add_self_loops=False, negative_slope=SLOPE)
    else:
        conv = pyg.TransformerConv(in_feats, dim, heads=heads, root_weight=False)
    return conv, lambda m, x: m(x, edge_index)


# per op: (our layer class, PyG's peer); E x H x D tensors the unfused composition and PyG keep
LAYERS = {"gat": (Layer, "GATConv"), "gatv2": (Gatv2Layer, "GATv2Conv"), "dot": (DotLayer, "TransformerConv")}
MESSAGE_COPIES = 6


def _within_memory(make, g: Graph, heads: int, dim: int, device, dtype=torch.float32):
    """``make`` unless ``MESSAGE_COPIES`` E x H x D tensors would pass half of the free memory."""
    need = MESSAGE_COPIES * g.num_edges * heads * dim * torch.empty(0, dtype=dtype).element_size()
    if need > 0.5 * peers.memory_left(device):
        raise MemoryError(f"skipped: {MESSAGE_COPIES} E x H x D message tensors need {need / 2**30:.1f} GiB")
    return make()


def providers(g: Graph, views: TensorGraph, in_feats: int, heads: int, dim: int, op: str = "gat", device=None):
    """(name, make) per provider of ``op``'s layer; ``make()`` -> (module, call(module, x))."""
    layer, pyg = LAYERS[op]
    edge_index = torch.stack([g.src, g.dst])
    device = device or g.src.device
    out = [("dgl_accel fused", lambda: (layer(in_feats, heads, dim, True), lambda m, x: m(views, x))),
           ("dgl_accel unfused", lambda: _within_memory(
               lambda: (layer(in_feats, heads, dim, False), lambda m, x: m(views, x)), g, heads,
               dim if op == "gatv2" else 1, device)),
           (f"PyG {pyg}", lambda: _within_memory(lambda: _pyg_layer(pyg, in_feats, heads, dim, edge_index), g, heads,
                                                 dim, device))]
    if op == "gat":
        out.append(("DGL GATConv", lambda: peers.dgl_gatconv(in_feats, heads, dim, g.src, g.dst, g.num_nodes)))
    return out


def step_peak_bytes(step, device: torch.device):
    """Bytes one ``step()`` allocated at its peak beyond what was live before it (CUDA), else None."""
    if device.type != "cuda":
        return None
    synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def bench_case(results, g: Graph, in_feats: int, heads: int, dim: int, dtype, device, timing: dict,
               only=None, op: str = "gat") -> None:
    """Every provider of ``op``'s layer (or those named in ``only``) on ``g`` in ``dtype``: one row each."""
    views = g.cache.get("views") or g.cache.setdefault("views", TensorGraph(g.src, g.dst, num_nodes=g.num_nodes))
    gen = torch.Generator(device=device).manual_seed(in_feats + heads)
    x = torch.randn(g.num_nodes, in_feats, generator=gen, device=device).to(dtype)
    for name, make in providers(g, views, in_feats, heads, dim, op, device):
        if only is not None and name not in only:
            continue
        row = dict(graph=g.name, graph_kind=g.kind, nodes=g.num_nodes, edges=g.num_edges, op=op, in_feats=in_feats,
                   heads=heads, dim=dim, dtype=str(dtype).replace("torch.", ""), provider=name)
        try:
            torch.manual_seed(0)
            module, call = make()
            module = module.to(device=device, dtype=dtype)
            xg = x.detach().requires_grad_(True)

            def fwd(module=module, call=call):
                with torch.no_grad():
                    return call(module, x)

            def fwd_bwd(module=module, call=call, xg=xg):
                module.zero_grad(set_to_none=True)
                out = call(module, xg)
                out.backward(torch.ones_like(out))
                return out
            t_f = median_seconds(fwd, device, **timing)
            t_fb = median_seconds(fwd_bwd, device, **timing)
            row.update(ok=True, fwd_ms=t_f * 1e3, fwd_bwd_ms=t_fb * 1e3,
                       step_peak_bytes=step_peak_bytes(fwd_bwd, device))
        except Exception as exc:  # a missing or failing peer is a row, not the end of the report
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        results.add("attention", **row)
        if device.type == "cuda":
            torch.cuda.empty_cache()


def run(results, graphs, device, timing: dict, tiny: bool, progress, deadline=None) -> None:
    """Attention layers per graph, fp32 and bf16: GAT in 128 -> 4 heads x 32 and the GAT paper's 8 x 8,
    GATv2 and dot product in 128 -> 8 x 8 (every layer in 16 -> 2 x 8 when tiny); graphs that would
    start after ``deadline`` are skipped."""
    configs = (("gat", 16, 2, 8), ("gatv2", 16, 2, 8), ("dot", 16, 2, 8)) if tiny else (
        ("gat", 128, 4, 32), ("gat", 128, 8, 8), ("gatv2", 128, 8, 8), ("dot", 128, 8, 8))
    for g in graphs:
        if deadline is not None and deadline.passed():
            progress(f"  attention on {g.name}: skipped (budget spent)")
            continue
        progress(f"  attention on {g.name} ({g.num_nodes:,} nodes, {g.num_edges:,} edges)")
        for op, in_feats, heads, dim in configs:
            for dtype in (torch.float32, torch.bfloat16):
                bench_case(results, g, in_feats, heads, dim, dtype, device, timing, op=op)

