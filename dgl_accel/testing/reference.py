"""Pure-torch reference implementations: vectorised, index_add/scatter based, clear not clever.

Each takes a DGL graph/block or an explicit (src, dst, num_dst) triple, and computes in the
dtype of its inputs (so `assert_matches_reference` can run it in fp64 and in the kernel dtype).
"""
import torch

GSPMM_OPS = ("copy_u", "u_mul_e")
GSPMM_REDUCES = ("sum", "mean", "max", "min")
GCN_NORMS = ("both", "left", "right", "none")


def _coo(g):
    """(src, dst, num_dst) as int64 tensors, from a DGLGraph/block or a (src, dst, num_dst)."""
    if isinstance(g, (tuple, list)):
        src, dst, num_dst = g
        return torch.as_tensor(src).long(), torch.as_tensor(dst).long(), int(num_dst)
    src, dst = g.edges(order="eid")
    return src.long(), dst.long(), g.num_dst_nodes()


def _num_src(g, ufeat):
    return len(ufeat) if isinstance(g, (tuple, list)) else g.num_src_nodes()


def ref_scale(x, alpha):
    """x * alpha in x's dtype."""
    return x * alpha


def _broadcast_efeat(ufeat_e, efeat):
    """Numpy-style broadcast of per-edge feature shapes, as DGL does: efeat [E] is a scalar
    per edge, [E, 1] broadcasts over F, [E, F] is elementwise. Pads the shorter feature shape
    with 1s on the left (the leading E dim is not broadcast)."""
    pad = ufeat_e.dim() - efeat.dim()
    if pad > 0:
        efeat = efeat.reshape(efeat.shape[:1] + (1,) * pad + efeat.shape[1:])
    elif pad < 0:
        ufeat_e = ufeat_e.reshape(ufeat_e.shape[:1] + (1,) * -pad + ufeat_e.shape[1:])
    return ufeat_e, efeat


def ref_gspmm(g, op, reduce, ufeat, efeat=None):
    """Generalised SpMM with DGL's message-passing semantics.

    out[v] = reduce_{e=(u, v)} msg(e), msg = ufeat[u] ("copy_u") or ufeat[u] * efeat[e]
    ("u_mul_e"). Rows of zero-in-degree destinations are 0 for every reduce, as in
    `g.update_all` (note: raw `dgl.ops.gspmm` leaves +-inf there for max/min). For a block,
    ufeat has num_src_nodes rows and the output num_dst_nodes rows.

    >>> src, dst = torch.tensor([0, 1, 1]), torch.tensor([1, 0, 1])  # or a DGLGraph / block
    >>> x, w = torch.tensor([[1.0], [2.0]]), torch.tensor([1.0, 1.0, -1.0])
    >>> ref_gspmm((src, dst, 2), "copy_u", "sum", x).tolist()
    [[2.0], [3.0]]
    >>> ref_gspmm((src, dst, 2), "u_mul_e", "max", x, w).tolist()
    [[2.0], [1.0]]
    """
    if op not in GSPMM_OPS:
        raise ValueError(f"op must be one of {GSPMM_OPS}, got {op!r}")
    if reduce not in GSPMM_REDUCES:
        raise ValueError(f"reduce must be one of {GSPMM_REDUCES}, got {reduce!r}")
    src, dst, num_dst = _coo(g)
    if len(ufeat) != _num_src(g, ufeat):
        raise ValueError(f"ufeat has {len(ufeat)} rows, graph has {_num_src(g, ufeat)} sources")
    msg = ufeat[src]
    if op == "u_mul_e":
        if efeat is None or len(efeat) != len(src):
            raise ValueError("u_mul_e needs efeat with one row per edge")
        msg, e = _broadcast_efeat(msg, efeat)
        msg = msg * e
    out = torch.zeros((num_dst,) + msg.shape[1:], dtype=msg.dtype, device=msg.device)
    if reduce in ("sum", "mean"):
        out.index_add_(0, dst, msg)
        if reduce == "mean":
            deg = torch.bincount(dst, minlength=num_dst).clamp(min=1).to(out.dtype)
            out = out / deg.reshape((-1,) + (1,) * (out.dim() - 1))
    else:
        # include_self=False: rows with no messages keep the 0 they were initialised with.
        idx = dst.reshape((-1,) + (1,) * (msg.dim() - 1)).expand_as(msg)
        out.scatter_reduce_(0, idx, msg, "amax" if reduce == "max" else "amin", include_self=False)
    return out


def ref_gcn_norm_aggregate(g, feat, norm="both"):
    """GraphConv(weight=False, bias=False) aggregation with DGL's degree conventions.

    left factor: out-degree of each source (`g.out_degrees()`), right factor: in-degree of each
    destination, both clamped to >= 1 so zero-degree nodes are not divided by 0.
      "both":  out = D_in^-1/2 A^T D_out^-1/2 feat
      "left":  out = A^T D_out^-1 feat     (random-walk: scale messages by sender)
      "right": out = D_in^-1 A^T feat      (mean over received messages)
      "none":  out = A^T feat

    >>> src, dst = torch.tensor([0, 0]), torch.tensor([1, 2])  # node 0 sends to 1 and 2
    >>> ref_gcn_norm_aggregate((src, dst, 3), torch.tensor([[4.0], [0.0], [0.0]]), "left").tolist()
    [[0.0], [2.0], [2.0]]
    """
    if norm not in GCN_NORMS:
        raise ValueError(f"norm must be one of {GCN_NORMS}, got {norm!r}")
    src, dst, num_dst = _coo(g)
    shape = (-1,) + (1,) * (feat.dim() - 1)
    # Same expressions as GraphConv (pow(-0.5) / 1.0 / deg) so fp rounding matches DGL too.
    scale = (lambda d: d.pow(-0.5)) if norm == "both" else (lambda d: 1.0 / d)
    if norm in ("both", "left"):
        out_deg = torch.bincount(src, minlength=_num_src(g, feat)).clamp(min=1).to(feat.dtype)
        feat = feat * scale(out_deg).reshape(shape)
    out = ref_gspmm(g, "copy_u", "sum", feat)
    if norm in ("both", "right"):
        in_deg = torch.bincount(dst, minlength=num_dst).clamp(min=1).to(out.dtype)
        out = out * scale(in_deg).reshape(shape)
    return out


__all__ = ["GSPMM_OPS", "GSPMM_REDUCES", "GCN_NORMS", "ref_scale", "ref_gspmm",
           "ref_gcn_norm_aggregate"]


def ref_neighbor_choice(indptr, transits, fanout, seed, step, num_nodes, replace, counter_ids=None):
    """The uniform neighbour-choice spec, literally, one transit at a time: slot j of transit v
    uses word j % 4 of Philox4x32 at counter (step * num_nodes + v) * ceil(fanout / 4) + j // 4;
    with replacement start + r_j % deg; without, all neighbours if deg <= fanout, else Floyd.
    ``counter_ids[i]`` replaces v in the counter when given."""
    from dgl_accel.core.sampling.rng import philox4x32  # lazy: the other references need no sampling (nor DGL)

    out = torch.full((len(transits), fanout), -1, dtype=torch.int64)
    for i, v in enumerate(transits.tolist()):
        start, deg = int(indptr[v]), int(indptr[v + 1] - indptr[v])
        words = (fanout + 3) // 4
        c = v if counter_ids is None else int(counter_ids[i])
        blocks = philox4x32(seed, (step * num_nodes + c) * words + torch.arange(fanout) // 4)
        r = [int(blocks[j % 4][j]) for j in range(fanout)]
        if replace:
            if deg:
                out[i] = torch.tensor([start + x % deg for x in r])
        elif deg <= fanout:
            out[i, :deg] = torch.arange(start, start + deg)
        else:
            chosen = []
            for j in range(fanout):
                m = deg - fanout + j
                t = r[j] % (m + 1)
                chosen.append(m if t in chosen else t)
            out[i] = torch.tensor(chosen) + start
    return out
