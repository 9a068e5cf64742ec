"""Argument checks of the attention ops (the edge softmax, GAT and its layer; GATv2's and the dot
product's are beside their entries): each error says what was expected, what came and how to
fix it, before any kernel runs."""
from __future__ import annotations

import numbers

import torch

from ..aggregation.checks import FLOAT_DTYPES, describe
from ..csr import Structure

INDEX_DTYPES = (torch.int32, torch.int64)


def check_structure(rows, name: str = "rows") -> None:
    """A CSR view: int64 ``indptr`` of num_rows + 1 entries, int32/int64 ``indices``/``eids`` of one length."""
    if not isinstance(rows, Structure):
        raise ValueError(f"expected {name} to be a dgl_accel.core.csr.Structure (a CSR view) (got {describe(rows)}). "
                         f"Fix: pass views.csr('in') (rows = destinations) or views.csr('out').")
    if rows.indptr.dtype != torch.int64 or tuple(rows.indptr.shape) != (rows.num_rows + 1,):
        raise ValueError(f"expected {name}.indptr to be int64 of shape [{rows.num_rows + 1}] "
                         f"(got {rows.indptr.dtype} of shape {list(rows.indptr.shape)}). Fix: indptr.long().")
    for field in ("indices", "eids"):
        t = getattr(rows, field)
        if t.dtype not in INDEX_DTYPES or t.dim() != 1 or t.numel() != rows.indices.numel():
            raise ValueError(f"expected {name}.{field} to be a 1-D int32/int64 tensor of {rows.indices.numel()} "
                             f"entries (got {describe(t)}). Fix: build the view with dgl_accel.core.csr.sort_by_row.")


def check_float(name: str, x, device: torch.device) -> None:
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"expected {name} to be a float32, float16, bfloat16 or float64 tensor (got {describe(x)}). "
                         f"Fix: {name}.float().")
    if x.device != device:
        raise ValueError(f"expected {name} on the graph's device {device} (got {x.device}). "
                         f"Fix: {name}.to({str(device)!r}).")


def check_edge_softmax(rows, score) -> None:
    """``score`` [E] or [E, *] in edge-id order, one row per entry of ``rows``."""
    check_structure(rows)
    check_float("score", score, rows.indptr.device)
    if score.dim() < 1 or score.shape[0] != rows.num_edges:
        raise ValueError(f"expected score of shape [E, ...] with E = {rows.num_edges}, one entry per edge in "
                         f"edge-id order (got {list(score.shape)}). Fix: pass one score per edge, e.g. [E, H].")


def _heads(name: str, x, rows: int, heads: int, what: str) -> None:
    if tuple(x.shape) not in ((rows, heads), (rows, heads, 1)):
        raise ValueError(f"expected {name} of shape [{rows}, {heads}] or [{rows}, {heads}, 1], one score per "
                         f"{what} and head (got {list(x.shape)}). Fix: {name} = (h * attn).sum(-1).")


def check_feat(views, feat) -> None:
    check_float("feat", feat, views.device)
    if feat.dim() != 3 or feat.shape[0] != views.num_src or feat.shape[1] < 1 or feat.shape[2] < 1:
        raise ValueError(f"expected feat of shape [num_src, H, D] with num_src = {views.num_src} "
                         f"and H, D >= 1 (got {list(feat.shape)}). Fix: feat.view(num_src, num_heads, head_dim).")


def check_slope(negative_slope) -> None:
    if not isinstance(negative_slope, numbers.Real) or isinstance(negative_slope, bool) or negative_slope < 0:
        raise ValueError(f"expected negative_slope to be a real number >= 0 (got {negative_slope!r}). "
                         f"Fix: negative_slope=0.2, as dgl.nn.GATConv.")


def check_gat_vectors(views, feat, el, er, attn, negative_slope) -> None:
    """``attn`` = (attn_l, attn_r), each [H, D] or [1, H, D] of feat's dtype, in place of ``el``/``er``
    (None), on a graph whose destinations are its first sources (num_dst <= num_src)."""
    check_feat(views, feat)
    heads, dim = feat.shape[1], feat.shape[2]
    if el is not None or er is not None:
        raise ValueError("expected either el and er or attn=(attn_l, attn_r), not both (got both). "
                         "Fix: pass el=None, er=None with attn.")
    if not isinstance(attn, (tuple, list)) or len(attn) != 2:
        raise ValueError(f"expected attn to be a pair (attn_l, attn_r) (got {describe(attn)}). "
                         f"Fix: attn=(conv.attn_l, conv.attn_r).")
    for name, a in zip(("attn_l", "attn_r"), attn):
        check_float(name, a, views.device)
        if a.dtype != feat.dtype or tuple(a.shape) not in ((heads, dim), (1, heads, dim)):
            raise ValueError(f"expected {name} of shape [{heads}, {dim}] or [1, {heads}, {dim}] and dtype "
                             f"{feat.dtype} (got {describe(a)}). Fix: dgl.nn.GATConv's attn_l / attn_r, "
                             f"in feat's dtype.")
    if views.num_dst > views.num_src:
        raise ValueError(f"expected the destinations to be the first sources (num_dst <= num_src) for attn "
                         f"(got num_dst = {views.num_dst}, num_src = {views.num_src}). Fix: pass el and er.")
    check_slope(negative_slope)


def check_gat(views, feat, el, er, negative_slope) -> None:
    """``feat`` [num_src, H, D], ``el`` [num_src, H(, 1)], ``er`` [num_dst, H(, 1)], one dtype."""
    device = views.device
    check_feat(views, feat)
    for name, x in (("el", el), ("er", er)):
        check_float(name, x, device)
        if x.dtype != feat.dtype:
            raise ValueError(f"expected {name} of feat's dtype {feat.dtype} (got {x.dtype}). "
                             f"Fix: {name}.to(feat.dtype).")
    _heads("el", el, views.num_src, feat.shape[1], "source node")
    _heads("er", er, views.num_dst, feat.shape[1], "destination node")
    check_slope(negative_slope)


def check_layer(views, x, weight, attn_l, attn_r, bias) -> None:
    """``x`` [num_src, F], ``weight`` [H * D, F], ``attn_l``/``attn_r`` [H, D] or [1, H, D], ``bias``
    [H * D] or None, one float dtype, on the graph's device; destinations = the first sources."""
    for name, t in (("x", x), ("weight", weight), ("attn_l", attn_l), ("attn_r", attn_r)) + (
            (("bias", bias),) if bias is not None else ()):
        check_float(name, t, views.device)
        if t.dtype != x.dtype:
            raise ValueError(f"expected {name} in x's dtype {x.dtype} (got {t.dtype}). Fix: {name}.to(x.dtype).")
    if x.dim() != 2 or x.shape[0] != views.num_src:
        raise ValueError(f"expected x of shape [num_src, in_feats] with num_src = {views.num_src} "
                         f"(got {list(x.shape)}). Fix: one feature row per source node.")
    if attn_l.dim() not in (2, 3) or attn_l.shape[-2] < 1 or attn_l.shape[-1] < 1:
        raise ValueError(f"expected attn_l of shape [H, D] or [1, H, D] (got {describe(attn_l)}). "
                         f"Fix: dgl.nn.GATConv's attn_l.")
    heads, dim = attn_l.shape[-2:]
    if tuple(attn_l.shape) not in ((heads, dim), (1, heads, dim)) or attn_r.shape != attn_l.shape:
        raise ValueError(f"expected attn_l and attn_r of one shape [H, D] or [1, H, D] (got {list(attn_l.shape)} "
                         f"and {list(attn_r.shape)}). Fix: dgl.nn.GATConv's attn_l / attn_r.")
    if tuple(weight.shape) != (heads * dim, x.shape[1]):
        raise ValueError(f"expected weight of shape [H * D, in_feats] = [{heads * dim}, {x.shape[1]}] "
                         f"(got {list(weight.shape)}). Fix: dgl.nn.GATConv's fc.weight.")
    if bias is not None and bias.numel() != heads * dim:
        raise ValueError(f"expected bias of {heads * dim} entries (H * D) or None (got {describe(bias)}). "
                         f"Fix: dgl.nn.GATConv's bias.")
    if views.num_dst > views.num_src:
        raise ValueError(f"expected the destinations to be the first sources (num_dst <= num_src) "
                         f"(got num_dst = {views.num_dst}, num_src = {views.num_src}). Fix: use gat_attention.")
