"""Argument checks of the aggregation op, shared by the core entry and the front door: each error
says what was expected, what came, and how to fix it, before any kernel runs."""
from __future__ import annotations

import torch

OPS = ("copy_u", "u_mul_e")
REDUCES = ("sum", "mean", "max", "min")
NORMS = ("none", "both", "left", "right")
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def describe(x) -> str:
    """What an argument is, for the "got ..." part of an error message."""
    return f"a tensor of dtype {x.dtype}, shape {list(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


def check_float_rows(name: str, x, rows: int, what: str, device) -> None:
    """``x`` a float tensor of ``rows`` rows (one per ``what``: "source node", "edge, in edge-id order")
    on ``device``; the messages of the extrema and head-wise ops."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"expected {name} to be a float32, float16, bfloat16 or float64 tensor of shape [{rows}, ...] "
                         f"(got {describe(x)}). Fix: {name}.float().")
    if x.shape[0] != rows:
        raise ValueError(f"expected {name} with {rows} rows, one per {what} (got {x.shape[0]}). "
                         f"Fix: for a block pass its srcdata features; edge features follow the edge ids.")
    if x.device != device:
        raise ValueError(f"expected {name} on the graph's device {device} (got {x.device}). "
                         f"Fix: {name}.to({str(device)!r}).")


def check_choice(name: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"expected {name} to be one of {', '.join(allowed)} (got {value!r}).")
    return value


def check_options(op: str, reduce: str, norm: str, group_size) -> None:
    if op not in OPS:
        check_choice("op", op, OPS)
    if reduce not in REDUCES:
        check_choice("reduce", reduce, REDUCES)
    if norm not in NORMS:
        check_choice("norm", norm, NORMS)
    if group_size is not None and (not isinstance(group_size, int) or isinstance(group_size, bool)
                                   or group_size < 1):
        raise ValueError(f"expected group_size to be None or an int >= 1 (got {group_size!r}).")
    if reduce in ("max", "min") and norm != "none":
        raise ValueError(f"expected norm='none' with reduce={reduce!r} (got norm={norm!r}): "
                         f"degree normalisation is defined for sum/mean aggregation.")


def check_features(op: str, ufeat, efeat, num_src: int, num_edges: int, device) -> None:
    """``ufeat`` [num_src, *] floating point on the graph's device; ``efeat`` exactly for u_mul_e."""
    if not isinstance(ufeat, torch.Tensor) or ufeat.dim() < 1:
        raise ValueError("expected ufeat to be a tensor with one row per source node "
                         f"(got {type(ufeat).__name__}{' of dim 0' if isinstance(ufeat, torch.Tensor) else ''}).")
    if ufeat.dtype not in FLOAT_DTYPES:
        raise ValueError(f"expected floating-point ufeat (float32, float16, bfloat16, float64) "
                         f"(got {ufeat.dtype}). Fix: ufeat.float().")
    if ufeat.shape[0] != num_src:
        raise ValueError(f"expected ufeat with {num_src} rows, one per source node "
                         f"(got {ufeat.shape[0]}). Fix: for a block pass block.srcdata features.")
    if ufeat.device != device:
        raise ValueError(f"expected graph and features on one device (got graph on {device}, "
                         f"ufeat on {ufeat.device}). Fix: g = g.to(ufeat.device).")
    if (op == "u_mul_e") != (efeat is not None):
        raise ValueError(f"expected efeat {'' if op == 'u_mul_e' else 'to be None '}for op={op!r} "
                         f"(got {'None' if efeat is None else 'a tensor'}). "
                         f"Fix: use op='u_mul_e' with edge weights, op='copy_u' without.")
    if efeat is not None:
        if not isinstance(efeat, torch.Tensor) or efeat.dtype not in FLOAT_DTYPES:
            raise ValueError(f"expected floating-point edge weights (got "
                             f"{efeat.dtype if isinstance(efeat, torch.Tensor) else type(efeat).__name__}).")
        if efeat.device != device:
            raise ValueError(f"expected graph and edge weights on one device (got graph on {device}, "
                             f"efeat on {efeat.device}). Fix: efeat.to(g.device).")
        ok_shapes = [(num_edges,), (num_edges, 1), (num_edges,) + tuple(ufeat.shape[1:])]
        if tuple(efeat.shape) not in ok_shapes:
            raise ValueError(f"expected efeat of shape [E], [E, 1] or [E, {', '.join(map(str, ufeat.shape[1:]))}] "
                             f"with E = {num_edges} (got {list(efeat.shape)}).")


def check_edge_list(src, dst, num_nodes: int | None, num_src: int | None, num_dst: int | None, id_range=None):
    """(num_src, num_dst) of an edge list ``src[e] -> dst[e]`` after checking it.  ``id_range``: the
    caller's ``(smallest id, largest source id, largest destination id)`` of a non-empty list, read
    before (saves four host reads, device syncs on a GPU)."""
    for name, t in (("src", src), ("dst", dst)):
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"expected {name} to be a 1-D int32/int64 tensor of node ids (got "
                             f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}"
                             f"{'' if not isinstance(t, torch.Tensor) else f' of shape {list(t.shape)}'}). "
                             f"Fix: torch.as_tensor(ids, dtype=torch.int64).")
    if src.shape != dst.shape or src.dtype != dst.dtype or src.device != dst.device:
        raise ValueError(f"expected src and dst of one length, dtype and device (got {list(src.shape)} "
                         f"{src.dtype} on {src.device} and {list(dst.shape)} {dst.dtype} on {dst.device}).")
    if num_nodes is not None and (num_src is not None or num_dst is not None):
        raise ValueError("expected either num_nodes (one node set) or num_src/num_dst (a bipartite graph), "
                         "not both.")
    if id_range is not None and src.numel():
        lo, hi_src, hi_dst = id_range[0], id_range[1] + 1, id_range[2] + 1
    else:
        hi_src = int(src.max()) + 1 if src.numel() else 0
        hi_dst = int(dst.max()) + 1 if dst.numel() else 0
        lo = None
    if num_nodes is not None:
        num_src = num_dst = num_nodes
    elif num_src is None and num_dst is None:  # one node set, as large as the largest id
        num_src = num_dst = max(hi_src, hi_dst)
    num_src = hi_src if num_src is None else num_src
    num_dst = hi_dst if num_dst is None else num_dst
    if lo is None:
        lo = min(int(src.min()), int(dst.min())) if src.numel() else 0
    if lo < 0 or hi_src > num_src or hi_dst > num_dst:
        raise ValueError(f"expected source ids in [0, {num_src}) and destination ids in [0, {num_dst}) "
                         f"(got sources up to {hi_src - 1}, destinations up to {hi_dst - 1}, smallest id {lo}). "
                         f"Fix: pass num_nodes= (or num_src=/num_dst=) large enough for every id.")
    return int(num_src), int(num_dst)
