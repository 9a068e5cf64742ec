"""DGL-free hypothesis strategies: graphs as plain edge lists, features and edge weights.

:mod:`.strategies` builds its DGL graphs, blocks and features from these, so a DGL graph drawn there
and an :class:`EdgeList` drawn here with the same parameters have the same edges; the DGL-free test
lane (tests/core) draws from here.  Hypothesis draws only a handful of small parameters (sizes, flags,
a seed); edges and values are then generated with numpy/torch from the seed, and every generator
shuffles node labels and edge order.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from hypothesis import strategies as st

from ..core.aggregation.views import TensorGraph

IDTYPES = (torch.int32, torch.int64)
SEEDS = st.integers(0, 2**32 - 1)


class EdgeList(NamedTuple):
    """Edges ``src[e] -> dst[e]`` (edge id ``e``) over ``num_src`` sources and ``num_dst`` destinations
    (one node set, ``num_src == num_dst``, unless ``bipartite``)."""

    src: torch.Tensor
    dst: torch.Tensor
    num_src: int
    num_dst: int
    bipartite: bool = False


def tensor_graph(e: EdgeList) -> TensorGraph:
    """The core's plain-tensor graph of an :class:`EdgeList` (bipartite for a block's edge list), as
    :func:`~dgl_accel.testing.strategies.to_dgl` builds the DGL one."""
    if e.bipartite:
        return TensorGraph(e.src, e.dst, num_src=e.num_src, num_dst=e.num_dst)
    return TensorGraph(e.src, e.dst, num_nodes=e.num_src)


def _edge_list(src, dst, num_src: int, num_dst: int, idtype, bipartite: bool = False) -> EdgeList:
    return EdgeList(torch.as_tensor(np.asarray(src, dtype=np.int64), dtype=idtype),
                    torch.as_tensor(np.asarray(dst, dtype=np.int64), dtype=idtype), num_src, num_dst, bipartite)


@st.composite
def edge_lists(draw, min_nodes=0, max_nodes=64, max_edges=256, idtypes=IDTYPES,
           self_loops=True, multi_edges=True):
    """A homogeneous graph as an :class:`EdgeList` with up to `max_nodes` nodes and `max_edges` edges.

    Edge cases hit across examples (each one has a dedicated drawn parameter, so it is not
    left to chance; tests/testing/test_strategies.py checks they all occur):
      * the empty graph (0 nodes) when min_nodes == 0, and n > 0 nodes with 0 edges;
      * isolated nodes (no in- and no out-edges);
      * zero-in-degree nodes that do have out-edges (the case mean/max must zero-fill);
      * self-loops (if self_loops; with self_loops=False there are none at all);
      * multi-edges, i.e. repeated (u, v) pairs (if multi_edges; with False there are none);
      * every idtype in `idtypes`.
    """
    idtype = draw(st.sampled_from(idtypes))
    # ~1 in 10 examples each is forced to the smallest graph / to zero edges, so even a
    # 25-example CI run reliably sees them (uniform size draws would hit them ~3% of the time).
    degenerate = draw(st.integers(0, 9))
    n = min_nodes if degenerate == 0 else draw(st.integers(min_nodes, max_nodes))
    if n == 0:
        return _edge_list([], [], 0, 0, idtype)
    # Edges only touch the first `n_active` (pre-shuffle) labels: the rest are isolated.
    # Only the first `n_recv` of those receive edges: the others are zero-in-degree sources.
    n_active = draw(st.integers(1, n))
    n_recv = draw(st.integers(1, n_active))
    m = 0 if degenerate == 1 else draw(st.integers(0, max_edges))
    force_loops = self_loops and draw(st.booleans())
    force_multi = multi_edges and draw(st.booleans())
    rng = np.random.default_rng(draw(SEEDS))

    src = rng.integers(0, n_active, m)
    dst = rng.integers(0, n_recv, m)
    if force_loops and m >= 1:
        k = int(rng.integers(1, max(1, m // 4) + 1))
        src[:k] = dst[:k]  # dst < n_recv <= n_active, so (v, v) keeps the active/recv split
    if not self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if not multi_edges:
        pairs = np.unique(np.stack([src, dst], 1), axis=0)
        src, dst = pairs[:, 0], pairs[:, 1]
    elif force_multi and len(src) >= 2:
        # Overwrite the tail with copies of edges from the head: guaranteed duplicates.
        k = int(rng.integers(1, max(1, len(src) // 4) + 1))
        copy_from = rng.integers(0, len(src) - k, k)
        src[-k:], dst[-k:] = src[copy_from], dst[copy_from]
    perm = rng.permutation(n)
    order = rng.permutation(len(src))
    return _edge_list(perm[src[order]], perm[dst[order]], n, n, idtype)


@st.composite
def power_law_edge_lists(draw, min_nodes=1100, max_nodes=2048, max_background_edges=1000,
                     hub_degree=(1025, 1100), max_in_hubs=2, max_out_hubs=2, idtypes=IDTYPES):
    """Graph with Zipf-distributed degrees plus explicit hubs.

    Guaranteed in every example: at least one node with in-degree > 1024 and at least one
    with out-degree > 1024 (with the default `hub_degree`), i.e. rows longer than any single
    Triton block, so kernels must loop/split over a row. Hubs draw distinct neighbours when
    num_nodes allows; background edges are drawn with replacement from a Zipf law, so skewed
    degrees, multi-edges, self-loops and zero-in-degree nodes occur typically but not
    necessarily. Size stays modest: at most
    (max_in_hubs + max_out_hubs) * hub_degree[1] + max_background_edges edges (~5.4k default).
    """
    idtype = draw(st.sampled_from(idtypes))
    n = draw(st.integers(min_nodes, max_nodes))
    n_in = draw(st.integers(1, max_in_hubs))
    n_out = draw(st.integers(1, max_out_hubs))
    in_degs = draw(st.lists(st.integers(*hub_degree), min_size=n_in, max_size=n_in))
    out_degs = draw(st.lists(st.integers(*hub_degree), min_size=n_out, max_size=n_out))
    m_bg = draw(st.integers(0, max_background_edges))
    alpha = draw(st.sampled_from([1.2, 1.5, 2.0, 2.5]))  # Zipf exponent: mild to very skewed
    rng = np.random.default_rng(draw(SEEDS))

    zipf = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    zipf /= zipf.sum()
    # Independent popularity rankings for sending and receiving, so in- and out-hubs differ.
    p_src, p_dst = zipf[rng.permutation(n)], zipf[rng.permutation(n)]
    srcs, dsts = [rng.choice(n, m_bg, p=p_src)], [rng.choice(n, m_bg, p=p_dst)]
    for hub, deg in zip(rng.choice(n, n_in, replace=False), in_degs):
        srcs.append(rng.choice(n, deg, replace=deg > n))
        dsts.append(np.full(deg, hub))
    for hub, deg in zip(rng.choice(n, n_out, replace=False), out_degs):
        srcs.append(np.full(deg, hub))
        dsts.append(rng.choice(n, deg, replace=deg > n))
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    order = rng.permutation(len(src))
    return _edge_list(src[order], dst[order], n, n, idtype)


@st.composite
def block_edge_lists(draw, max_dst=32, max_extra_src=64, max_edges=256, idtypes=IDTYPES):
    """A bipartite message-flow graph (what `dgl.create_block` builds) with num_src >= num_dst.

    Edge cases hit across examples: the 0-src/0-dst block; num_src == num_dst > 0; dst nodes
    with zero in-degree next to dst nodes with edges (about half the examples); blocks where
    every dst receives; both idtypes. Typical but not forced: src nodes with no out-edges,
    repeated (u, v) pairs. Src ids
    [0, num_dst) play the role of the dst nodes themselves, as in `dgl.to_block`, so
    `feat[:num_dst]` is the dst feature slice GraphConv uses.
    """
    idtype = draw(st.sampled_from(idtypes))
    # ~10% each forced 0x0 and square (num_src == num_dst) blocks, as in graphs(): uniform
    # draws would hit them too rarely for a 25-example CI run.
    shape_mode = draw(st.integers(0, 9))
    num_dst = 0 if shape_mode == 0 else draw(st.integers(0, max_dst))
    num_src = num_dst + (0 if shape_mode <= 1 else draw(st.integers(0, max_extra_src)))
    # Half the examples: every dst receives; otherwise num_dst - n_recv >= 1 get no in-edges.
    if num_dst == 0 or draw(st.booleans()):
        n_recv = num_dst
    else:
        n_recv = draw(st.integers(0, num_dst - 1))
    m = draw(st.integers(0, max_edges)) if n_recv > 0 and num_src > 0 else 0
    rng = np.random.default_rng(draw(SEEDS))
    receivers = rng.choice(num_dst, n_recv, replace=False) if n_recv else np.zeros(0, np.int64)
    src = rng.integers(0, max(num_src, 1), m)
    dst = receivers[rng.integers(0, max(n_recv, 1), m)] if m else np.zeros(0, np.int64)
    return _edge_list(src, dst, num_src, num_dst, idtype, bipartite=True)


def any_edge_list(idtypes=IDTYPES):
    """One of `edge_lists()`, `power_law_edge_lists()`, `block_edge_lists()` (union of their edge cases)."""
    return st.one_of(edge_lists(idtypes=idtypes), power_law_edge_lists(idtypes=idtypes),
                     block_edge_lists(idtypes=idtypes))


def as_strategy(x):
    return x if isinstance(x, st.SearchStrategy) else st.just(x)


def randn(shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    # Sample in fp32 then cast: the same seed gives the same values in every dtype (so an fp64
    # copy of fp32 features is exact), and fp16/bf16 inputs are exactly representable.
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)


def layout(x, layout):
    """Return a non-contiguous tensor equal to (a copy of) x, shape unchanged."""
    n, d = x.shape
    if layout == "col_slice":  # row stride > d: a slice of a wider feature matrix
        out = torch.zeros(n, d + 3, dtype=x.dtype)[:, 1:d + 1]
    elif layout == "transposed":  # column stride != 1: the .t() of a [d, n] tensor
        out = torch.zeros(d, n, dtype=x.dtype).t()
    else:  # "step": both strides doubled
        out = torch.zeros(n, 2 * d, dtype=x.dtype)[:, ::2]
    if out.is_contiguous():  # col_slice/transposed degenerate for n == 1 or d == 1
        out = torch.zeros(n, 2 * d, dtype=x.dtype)[:, ::2]
    out.copy_(x)
    return out


@st.composite
def features(draw, num_rows, dim=st.integers(1, 32), dtypes=(torch.float32,),
             non_contiguous=st.booleans()):
    """Standard-normal [num_rows, dim] tensor; `dim`/`non_contiguous` may be values or strategies.

    When non_contiguous is drawn True the tensor is a column slice of a wider tensor, a
    transposed view, or a stride-2 view, and `is_contiguous()` is False whenever that is
    possible at all (numel >= 2; torch deems 0- and 1-element tensors contiguous always).
    Edge cases: num_rows == 0 (pass it), dim == 1, every dtype in `dtypes`.
    """
    d = draw(as_strategy(dim))
    dtype = draw(st.sampled_from(dtypes))
    x = randn((num_rows, d), dtype, draw(SEEDS))
    if draw(as_strategy(non_contiguous)):
        x = layout(x, draw(st.sampled_from(["col_slice", "transposed", "step"])))
    return x


@st.composite
def edge_weights(draw, num_edges, per_feature_dim=None, dtypes=(torch.float32,), positive=False):
    """Edge data for u_mul_e: shape [E], [E, 1], or (if per_feature_dim is given) [E, F].

    All three broadcasting shapes occur. positive=True draws from [0.5, 1.5) instead of
    N(0, 1), for GCN-style weights that must stay > 0.
    """
    shapes = [(num_edges,), (num_edges, 1)]
    if per_feature_dim is not None:
        shapes.append((num_edges, per_feature_dim))
    shape = draw(st.sampled_from(shapes))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(SEEDS)
    if positive:
        gen = torch.Generator().manual_seed(seed)
        return (torch.rand(shape, generator=gen) + 0.5).to(dtype)
    return randn(shape, dtype, seed)


__all__ = ["IDTYPES", "SEEDS", "EdgeList", "edge_lists", "power_law_edge_lists", "block_edge_lists",
           "any_edge_list", "features", "edge_weights", "tensor_graph"]
