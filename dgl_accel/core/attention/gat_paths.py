"""The three paths of the fused GAT aggregation (:mod:`.gat`) under :mod:`.variant`'s contract, the inputs
(feat, el, er) (el and er the score reads) and the parameter ``(slope, drop)``: the leaky ReLU's negative
slope and the call's :class:`~.dropout.AttentionDropout` or None.

* native: vectorised torch over edges in edge-id order (small graphs; it materialises E x H x D
  messages inside one call), the dropout weights [E, H] from :func:`edge_weights`;
* compiled: the numba loops of :mod:`dgl_accel.core.jit.gat` over the in-CSR and the out-CSR (the
  dropout recomputed from its hash, or the drawn mask);
* triton: the kernels of ``kernels/gat_heads.py`` (a program per row covering every head) where the
  heads and width fit its tiles, else ``kernels/gat.py``'s (a program per row, head and feature block);
  compiled on CUDA, interpreted on CPU.  The attention itself and its gradient (``return_attention``)
  are torch ops over the edges and the edge softmax's backward kernel.

Forward: (out [num_dst, H, D] in feat's dtype, lse [num_dst, H] in the accumulation dtype).  Backward,
with g_e = w_e (<grad_out[v], feat[u]> + grad_attn_e) (w_e the dropout weight): grad_s_e = p_e (g_e -
delta[v]) with delta[v] = sum over v's in-edges of p g (the softmax backward), times leaky'; it returns
(grad_feat, grad_el, grad_er) in the inputs' dtypes.  The compiled loops on several threads keep p_e and
g_e between their two passes (E x H scratch), on one thread make one pass over the in-CSR where its new
grad_feat is no larger (a drawn dropout mask permuted to its order once a call); the Triton kernels
recompute them (nothing per edge).

Also here, for :mod:`.gat`'s ops with the score halves inside (``attn=``, :func:`~.gat.gat_layer`):
:func:`score_halves` (el, er from feat and the attention vectors in one matmul) and
:func:`halves_backward`, which adds their gradient into grad_feat in place.
"""
from __future__ import annotations

import torch

from ..aggregation.scales import acc_dtype
from ..csr import Structure
from ..jit import gat as loops
from ..launch import kernel_module, triton_kernel
from .common import all_heads, as_array, csr_arrays, edge_ends, leaky
from .edge_softmax_paths import backward_triton as edge_softmax_backward
from .edge_softmax_paths import segment_softmax


def edge_weights(src, param, dtype) -> torch.Tensor | None:
    """The dropout weights keep / (1 - p) [E, H] of the edges 0..E-1 (E = len(src)) in ``dtype``, or None."""
    drop = param[1]
    return None if drop is None else drop.weights(torch.arange(src.shape[0], device=src.device), dtype)


# ------------------------------------------------------------------ native (vectorised torch)
def gat_scores(src, dst, el, er, slope: float):
    """(raw scores el[u] + er[v], leaky_relu of them), [E, H] in el's dtype."""
    raw = el.index_select(0, src) + er.index_select(0, dst)
    return raw, leaky(raw, slope)


def edge_scores(src, dst, el, er, param):
    """s [E, H] of :func:`gat_scores` (the variant contract's name, :mod:`.variant`)."""
    return gat_scores(src, dst, el, er, param[0])[1]


def forward_native(src, dst, num_dst: int, feat, el, er, param):
    """(out [num_dst, H, D] in feat's dtype, lse [num_dst, H] and the attention [E, H] (times the
    dropout weights) in the accumulation dtype); ``src``/``dst`` int64 in edge-id order."""
    acc = acc_dtype(feat.dtype)
    _, s = gat_scores(src, dst, el.to(acc), er.to(acc), param[0])
    a, mx, den = segment_softmax(s, dst, num_dst)
    weight = edge_weights(src, param, acc)
    if weight is not None:
        a = a.mul_(weight)
    out = torch.zeros((num_dst,) + tuple(feat.shape[1:]), dtype=acc, device=feat.device)
    out.index_add_(0, dst, a[:, :, None] * feat.to(acc).index_select(0, src))
    return out.to(feat.dtype), mx + torch.log(den), a


def attention_from_lse(src, dst, el, er, slope: float, lse):
    """(raw scores, p_e = exp(s_e - lse[v])) recomputed from the saved normalisers, [E, H] in lse's dtype."""
    raw, s = gat_scores(src, dst, el.to(lse.dtype), er.to(lse.dtype), slope)
    return raw, torch.exp(s - lse.index_select(0, dst))


def attention_native(src, dst, el, er, param, lse) -> torch.Tensor:
    """The attention [E, H] (after dropout) in lse's dtype."""
    p = attention_from_lse(src, dst, el, er, param[0], lse)[1]
    weight = edge_weights(src, param, p.dtype)
    return p if weight is None else p * weight


def backward_native(src, dst, feat, el, er, param, lse, grad_out, grad_attn):
    """(grad_feat, grad_el, grad_er), recomputing the attention from ``lse``; ``grad_attn`` [E, H] (or
    None) is the gradient of the returned attention."""
    acc, slope = lse.dtype, param[0]
    weight = edge_weights(src, param, acc)
    raw, p = attention_from_lse(src, dst, el, er, slope, lse)
    go, f = grad_out.to(acc), feat.to(acc)
    g = (go.index_select(0, dst) * f.index_select(0, src)).sum(-1)
    if grad_attn is not None:
        g = g + grad_attn.to(acc)
    pw = p if weight is None else p * weight
    if weight is not None:
        g = g * weight
    delta = torch.zeros(lse.shape, dtype=acc, device=lse.device).index_add_(0, dst, p * g)
    gs = p * (g - delta.index_select(0, dst))
    gsl = torch.where(raw > 0, gs, gs * slope)
    grad_el = torch.zeros(el.shape[0], el.shape[1], dtype=acc, device=el.device).index_add_(0, src, gsl)
    grad_er = torch.zeros(er.shape[0], er.shape[1], dtype=acc, device=er.device).index_add_(0, dst, gsl)
    grad_feat = torch.zeros(feat.shape, dtype=acc, device=feat.device)
    grad_feat.index_add_(0, src, pw[:, :, None] * go.index_select(0, dst))
    return grad_feat.to(feat.dtype), grad_el.to(el.dtype), grad_er.to(er.dtype)


# ------------------------------------------------------------------ compiled (numba)
def _loop_dropout(drop, feat, in_csr: Structure | None = None):
    """The loops' dropout arguments; with ``in_csr`` where the backward makes one pass
    (:func:`~dgl_accel.core.jit.gat.one_pass`) a drawn mask in its order (read row after row by the
    forward and that pass)."""
    if drop is None:
        return None
    ordered = in_csr is not None and loops.one_pass(in_csr.num_edges, feat.shape[0], feat.shape[2])
    return drop.loop_args(in_csr.eids if ordered else None)


def forward_compiled(in_csr: Structure, feat, el, er, param, want_attention: bool):
    """:func:`forward_native` compiled, over the in-CSR: (out, lse and, if ``want_attention``, the
    attention [E, H] in the accumulation dtype, else None).  Nothing of size E x H x D, nor E x H
    without ``want_attention``."""
    (slope, drop), acc = param, acc_dtype(feat.dtype)
    indptr, indices, eids = csr_arrays(in_csr)
    el_a, er_a = as_array(el, acc), as_array(er, acc)
    dropout = _loop_dropout(drop, feat, None if want_attention else in_csr)  # the attention reads it by edge id
    out, lse = loops.gat_forward(indptr, indices, eids, as_array(feat, acc), el_a, er_a, slope, dropout)
    attention = None
    if want_attention:
        attention = torch.from_numpy(loops.gat_attention(indptr, indices, eids, el_a, er_a, slope, lse, dropout))
    return torch.from_numpy(out).to(feat.dtype), torch.from_numpy(lse), attention


def backward_compiled(in_csr: Structure, out_csr: Structure, feat, el, er, param, lse, grad_out, grad_attn):
    """:func:`backward_native` compiled (:func:`~dgl_accel.core.jit.gat.gat_backward`: one pass over the
    in-CSR on one thread, else pass A over it and pass B over the out-CSR)."""
    acc = lse.dtype
    grads = loops.gat_backward(csr_arrays(in_csr), csr_arrays(out_csr), as_array(feat, acc), as_array(el, acc),
                               as_array(er, acc), param[0], as_array(lse, acc), as_array(grad_out, acc),
                               None if grad_attn is None else as_array(grad_attn, acc),
                               _loop_dropout(param[1], feat, in_csr))
    return tuple(torch.from_numpy(g).to(t.dtype) for g, t in zip(grads, (feat, el, er)))


def reuses_buffer(feat: torch.Tensor) -> bool:
    """Whether :func:`backward_compiled_halves` can write grad_feat into ``feat``'s own memory: the loops
    run in its dtype (float32/float64) on its buffer (contiguous), so the numpy view is that memory."""
    return feat.dtype in (torch.float32, torch.float64) and feat.is_contiguous()


def backward_compiled_halves(in_csr: Structure, out_csr: Structure, feat, attn_l, attn_r, el, er, param, lse,
                             grad_out, grad_attn, into_feat: bool = False):
    """(grad_feat, grad_attn_l, grad_attn_r) of the fused op with the score halves made from attn_l /
    attn_r inside: the halves' gradient summed in pass B's loop (no addmm).  ``into_feat`` (where
    :func:`reuses_buffer`) with the two passes: grad_feat is written into ``feat``'s memory and ``feat``
    is returned, its values gone (pass B reads row u of feat before writing row u of the gradient); the
    one pass (:func:`~dgl_accel.core.jit.gat.one_pass`) writes a new buffer, no larger than the scratch
    the two passes would take."""
    acc = lse.dtype
    heads, dim = feat.shape[1:]
    into_feat = into_feat and reuses_buffer(feat)
    halves = tuple(as_array(a.reshape(heads, dim), acc) for a in (attn_l, attn_r))
    feat_a = as_array(feat, acc)
    grads = loops.gat_backward(csr_arrays(in_csr), csr_arrays(out_csr), feat_a, as_array(el, acc),
                               as_array(er, acc), param[0], as_array(lse, acc), as_array(grad_out, acc),
                               None if grad_attn is None else as_array(grad_attn, acc),
                               _loop_dropout(param[1], feat, in_csr),
                               halves=halves, into_feat=into_feat)
    grad_feat = feat if into_feat and grads[0] is feat_a else torch.from_numpy(grads[0]).to(feat.dtype)
    return (grad_feat,) + tuple(torch.from_numpy(g).reshape(a.shape).to(a.dtype) for g, a in
                                zip(grads[3:], (attn_l, attn_r)))


# ------------------------------------------------------------------ triton
def _params(slope: float, drop, acc: torch.dtype, device) -> torch.Tensor:
    # [slope, dropout scale] as a tensor, not kernel arguments: Triton passes Python floats as fp32,
    # too coarse for fp64
    return torch.tensor([slope, 1.0 if drop is None else drop.scale], dtype=acc, device=device)


def _rng(drop, device) -> torch.Tensor:
    """int64 [threshold, key_0, ..., key_{H-1}] of the dropout mask (a placeholder without dropout)."""
    return torch.zeros(1, dtype=torch.int64, device=device) if drop is None else drop.kernel_args(device)


def _gat_heads(kernel: str, tile: tuple[int, int], rows: Structure, feat, *args, drop):
    """One of ``kernels/gat_heads.py``'s kernels over ``rows`` (a program per row, every head)."""
    all_heads("gat_heads", kernel, tile, rows, rows.eids, feat, *args, *feat.shape[1:],
              fp64=feat.dtype == torch.float64, DROPOUT=drop is not None)


def forward_triton(in_csr: Structure, feat, el, er, param):
    """(out [num_dst, H, D] in feat's dtype, lse [num_dst, H] in the accumulation dtype)."""
    slope, drop = param
    feat, el, er = feat.contiguous(), el.contiguous(), er.contiguous()
    num_dst, (_, heads, dim) = in_csr.num_rows, feat.shape
    acc = acc_dtype(feat.dtype)
    out = torch.empty((num_dst, heads, dim), dtype=feat.dtype, device=feat.device)
    lse = torch.empty((num_dst, heads), dtype=acc, device=feat.device)
    heads_tile = kernel_module("gat_heads").tiles(heads, dim)
    if num_dst and heads_tile:  # every head of a row in one program
        _gat_heads("_gat_heads_fwd_kernel", heads_tile, in_csr, feat, el, er, _params(slope, drop, acc, feat.device),
                   _rng(drop, feat.device), out, lse, drop=drop)
    elif num_dst:  # heads, dim >= 1 (checks.check_gat)
        mod = kernel_module("gat")
        block_d = mod.feature_tile(dim)
        kernel = triton_kernel("gat", "_gat_fwd_kernel", feat.device)
        kernel[(num_dst, heads, -(-dim // block_d))](
            in_csr.indptr, in_csr.indices, in_csr.eids, feat, el, er, _params(slope, drop, acc, feat.device),
            _rng(drop, feat.device), out, lse, heads, dim, BLOCK_E=mod.BLOCK_E, BLOCK_D=block_d,
            DROPOUT=drop is not None, num_warps=mod.num_warps(block_d))
    return out, lse


def attention_triton(in_csr: Structure, el, er, param, lse) -> torch.Tensor:
    """The attention [E, H] in lse's dtype: torch ops over the edges (no kernel of its own)."""
    src, dst = edge_ends(in_csr)
    return attention_native(src, dst, el, er, param, lse)


def _backward_kernels(in_csr: Structure, out_csr: Structure, feat, el, er, slope: float, drop, lse, grad_out):
    """(grad_feat in feat's dtype, grad_el, grad_er in the accumulation dtype): the in-CSR pass
    (delta [num_dst, H] and grad_er), then the out-CSR pass; nothing per edge in between."""
    feat, el, er, grad_out = (t.contiguous() for t in (feat, el, er, grad_out.to(feat.dtype)))
    (num_src, heads, dim), num_dst = feat.shape, in_csr.num_rows
    acc = lse.dtype
    params, rng = _params(slope, drop, acc, feat.device), _rng(drop, feat.device)
    delta = torch.empty((num_dst, heads), dtype=acc, device=feat.device)
    grad_er = torch.empty((num_dst, heads), dtype=acc, device=feat.device)
    grad_el = torch.empty((num_src, heads), dtype=acc, device=feat.device)
    grad_feat = torch.empty_like(feat)
    heads_tile = kernel_module("gat_heads").tiles(heads, dim)
    if heads_tile:  # every head of a row in one program
        if num_dst:
            _gat_heads("_gat_heads_bwd_dst_kernel", heads_tile, in_csr, feat, el, er, params, rng, lse, grad_out,
                       delta, grad_er, drop=drop)
        if num_src:
            _gat_heads("_gat_heads_bwd_src_kernel", heads_tile, out_csr, feat, el, er, params, rng, lse, grad_out,
                       delta, grad_feat, grad_el, drop=drop)
        return grad_feat, grad_el, grad_er
    mod = kernel_module("gat")
    block_d = mod.feature_tile(dim)
    opts = dict(BLOCK_E=mod.BLOCK_E, BLOCK_D=block_d, DROPOUT=drop is not None, num_warps=mod.num_warps(block_d))
    if num_dst:
        kernel = triton_kernel("gat", "_gat_bwd_dst_kernel", feat.device)
        kernel[(num_dst, heads)](in_csr.indptr, in_csr.indices, in_csr.eids, feat, el, er, params, rng, lse, grad_out,
                                 delta, grad_er, heads, dim, **opts)
    if num_src:
        kernel = triton_kernel("gat", "_gat_bwd_src_kernel", feat.device)
        cap = mod.maxnreg("_gat_bwd_src_kernel", block_d, drop is not None)
        opts = {**opts, **({"maxnreg": cap} if cap else {})}
        kernel[(num_src, heads, -(-dim // block_d))](out_csr.indptr, out_csr.indices, out_csr.eids, feat, el, er,
                                                     params, rng, lse, grad_out, delta, grad_feat, grad_el, heads,
                                                     dim, **opts)
    return grad_feat, grad_el, grad_er


def backward_triton(in_csr: Structure, out_csr: Structure, feat, el, er, param, lse, grad_out, grad_attn):
    """The kernels' gradients; a used attention adds its own: the edge-softmax backward of w * grad_attn,
    then leaky', summed into grad_el and grad_er."""
    slope, drop = param
    grad_feat, grad_el, grad_er = _backward_kernels(in_csr, out_csr, feat, el, er, slope, drop, lse, grad_out)
    if grad_attn is not None:
        src, dst = edge_ends(in_csr)
        raw, p = attention_from_lse(src, dst, el, er, slope, lse)
        weight = edge_weights(src, param, p.dtype)
        ga = grad_attn.to(p.dtype) if weight is None else grad_attn.to(p.dtype) * weight
        extra = edge_softmax_backward(in_csr, p, ga)
        extra = torch.where(raw > 0, extra, extra * slope)
        grad_el.index_add_(0, src, extra)
        grad_er.index_add_(0, dst, extra)
    return grad_feat, grad_el.to(el.dtype), grad_er.to(er.dtype)


# ------------------------------------------------------------------ the score halves inside the op
def halves_matrix(attn_l, attn_r, heads: int, dim: int) -> torch.Tensor:
    """[H * D, 2 H], block diagonal: feat [N, H * D] @ it = (el, er) with el[:, h] = <feat[:, h], attn_l[h]>."""
    eye = torch.eye(heads, device=attn_l.device).to(attn_l.dtype)  # CPU torch has no bf16 eye
    return torch.cat([(a.reshape(heads, dim, 1) * eye[:, None, :]).reshape(heads * dim, heads)
                      for a in (attn_l, attn_r)], dim=1)


def score_halves(feat, attn_l, attn_r, num_dst: int):
    """(el [N, H], er [num_dst, H]) = ((feat * attn_l).sum(-1), (feat[:num_dst] * attn_r).sum(-1)), one matmul."""
    (n, heads, dim) = feat.shape
    acc = acc_dtype(feat.dtype)  # half types: the matmul in fp32 (CPU torch lacks some half matmuls)
    w = halves_matrix(attn_l.to(acc), attn_r.to(acc), heads, dim)
    elr = (feat.reshape(n, heads * dim).to(acc) @ w).to(feat.dtype)
    return elr[:, :heads].contiguous(), elr[:num_dst, heads:].contiguous()


def halves_backward(grads, feat, attn_l, attn_r):
    """(grad_feat, grad_attn_l, grad_attn_r) from the fused op's (grad_feat, grad_el, grad_er): the
    halves' gradient added into grad_feat in place (one addmm)."""
    grad_feat, grad_el, grad_er = grads
    (n, heads, dim), num_dst = feat.shape, grad_er.shape[0]
    acc = acc_dtype(feat.dtype)
    grad_elr = torch.zeros((n, 2 * heads), dtype=acc, device=feat.device)
    grad_elr[:, :heads] = grad_el
    grad_elr[:num_dst, heads:] = grad_er
    w = halves_matrix(attn_l.to(acc), attn_r.to(acc), heads, dim)
    if grad_feat.dtype == acc and grad_feat.is_contiguous():
        grad_feat.view(n, heads * dim).addmm_(grad_elr, w.t())  # in place: no second N x H x D buffer
    else:  # half types: through fp32
        grad_feat = grad_feat.to(acc).view(n, heads * dim).addmm_(grad_elr, w.t()).to(feat.dtype)
    grad_w = (feat.reshape(n, heads * dim).to(acc).t() @ grad_elr).reshape(heads, dim, 2, heads)
    grads_attn = [grad_w[:, :, k, :].diagonal(dim1=0, dim2=2).t().reshape(a.shape).to(a.dtype)
                  for k, a in enumerate((attn_l, attn_r))]
    return (grad_feat.view(feat.shape), *grads_attn)

