"""Attention dropout inside the fused GAT op: DGL's ``attn_drop`` (``nn.Dropout`` on the attention
[E, H] after the softmax, out[v] = sum_e drop(a_e) feat[u] with drop(a) = a * keep / (1 - p)) without
an E x H mask in memory.

The mask is counter-based: edge e (DGL's edge id) and head h are kept where

    bits(e, h) = fmix32(fmix32((lo32(e) + key_h) mod 2^32) ^ hi32(e)) >= floor(p * 2^32)

with murmur3's 32-bit finaliser ``fmix32`` and one key per head derived from the call's seed
(:func:`head_keys`).  Defined here once in pure torch/Python integers (the reference); the numba
loops (``core/jit/gat.py``, :func:`~dgl_accel.core.jit.gat.drop_weight`) and the Triton
kernels (``kernels/gat.py``, ``dropout_keep``) compute it bit for bit in uint32 arithmetic, so the
forward and both backward passes recompute one mask and nothing per edge is stored.  The seed is
drawn from torch's global generator per call unless given (``torch.manual_seed`` reproduces a run).

On the native CPU path a call without a seed instead draws the mask from torch's stream exactly as
DGL's ``attn_drop`` (``nn.Dropout`` on the [E, H, 1] attention) draws it: ``bernoulli_(1 - p)`` on
an [E, H, 1] tensor of the attention's dtype at the same point of the stream, kept as uint8 [E, H]
(E x H bytes) for the backward.  So a drop-in ``GATConv`` trained from a seed draws DGL's masks and
gives DGL's numbers (``tests/nn/test_dropin_parity.py``); the hash keeps the Triton kernels free of a
mask in memory.
"""
from __future__ import annotations

import dataclasses
import math
import numbers

import torch

from ..sampling.checks import check_seed, resolve_seed

M32 = 0xFFFFFFFF
C1, C2 = 0x85EBCA6B, 0xC2B2AE35  # murmur3's fmix32 multipliers
GOLDEN = 0x9E3779B9  # 2^32 / golden ratio: spreads the heads' counters


def fmix32(x: int) -> int:
    """murmur3's finaliser of a 32-bit Python int (a bijection of [0, 2^32)).

    >>> fmix32(0), fmix32(1)
    (0, 1364076727)
    """
    x ^= x >> 16
    x = (x * C1) & M32
    x ^= x >> 13
    x = (x * C2) & M32
    return x ^ (x >> 16)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    # (x * c) mod 2^32 for int64 x in [0, 2^32) without int64 overflow: c in two 16-bit halves
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & M32


def fmix32_tensor(x: torch.Tensor) -> torch.Tensor:
    """:func:`fmix32` of every entry of an int64 tensor with values in [0, 2^32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, C1)
    x = x ^ (x >> 13)
    x = _mul32(x, C2)
    return x ^ (x >> 16)


def head_keys(seed: int, heads: int) -> list[int]:
    """The 32-bit key of every head: fmix32(lo32(seed) ^ fmix32(hi32(seed) + GOLDEN (h + 1)))."""
    lo, hi = seed & M32, seed >> 32
    return [fmix32(lo ^ fmix32((hi + GOLDEN * (h + 1)) & M32)) for h in range(heads)]


def edge_bits(eids: torch.Tensor, key: int) -> torch.Tensor:
    """The 32-bit hash of every edge id (int64, >= 0) under one head's ``key``, as int64."""
    e = eids.long()
    return fmix32_tensor(fmix32_tensor((e & M32) + key & M32) ^ (e >> 32))


def threshold(p: float) -> int:
    """Edges whose bits are below this are dropped: floor(p 2^32), so P(keep) = 1 - p within 2^-32."""
    return min(math.floor(p * 2**32), M32)


def check_dropout(p) -> float:
    """``p`` as a float in [0, 1), else a ValueError saying what came and how to fix it."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p < 1:
        raise ValueError(f"expected dropout to be a probability in [0, 1) (got {p!r}). "
                         f"Fix: dropout=0.6 as DGL's GAT example's attn_drop, or 0.0 for none.")
    return float(p)


@dataclasses.dataclass(frozen=True)
class AttentionDropout:
    """One call's dropout: probability ``p`` in (0, 1), ``seed`` in [0, 2^64), ``heads``; ``keep``
    (bool [E, H], edge-id order) where the mask was drawn from torch's stream (then the seed is unused)."""

    p: float
    seed: int
    heads: int
    keep: torch.Tensor | None = dataclasses.field(default=None, compare=False, repr=False)
    _by_order: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)  # order -> keep[order]

    @property
    def keys(self) -> list[int]:
        return head_keys(self.seed, self.heads)

    @property
    def threshold(self) -> int:
        return threshold(self.p)

    @property
    def scale(self) -> float:
        return 1.0 / (1.0 - self.p)

    def mask(self, eids: torch.Tensor) -> torch.Tensor:
        """keep [len(eids), H] (bool) of the edges ``eids``: the reference every path reproduces."""
        if self.keep is not None:
            return self.keep[eids.to(self.keep.device)]
        thr = self.threshold
        return torch.stack([edge_bits(eids, k) >= thr for k in self.keys], dim=1)

    def weights(self, eids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """keep / (1 - p) [len(eids), H] in ``dtype``."""
        return self.mask(eids).to(dtype) * torch.tensor(self.scale, dtype=dtype)

    def loop_args(self, order: torch.Tensor | None = None) -> tuple:
        """(keys, threshold, scale, the drawn mask as a uint8 numpy array [E, H] or None, whether it is in
        ``order``) for the numba loops.  ``order`` (the in-CSR's edge ids): the drawn mask's rows in that
        order, made once per call and order (the forward and the backward read it row after row instead
        of by edge id)."""
        if self.keep is None:
            return self.keys, self.threshold, self.scale, None, False
        if order is None:
            return self.keys, self.threshold, self.scale, self.keep.view(torch.uint8).numpy(), False
        key = order.untyped_storage().data_ptr()
        if key not in self._by_order:
            self._by_order[key] = self.keep.view(torch.uint8).index_select(0, order).numpy()
        return self.keys, self.threshold, self.scale, self._by_order[key], True

    def kernel_args(self, device) -> torch.Tensor:
        """int64 [1 + H]: the threshold, then the heads' keys, for the Triton kernels (hash masks only)."""
        if self.keep is not None:
            raise ValueError("expected a hashed dropout mask for the Triton kernels (got a drawn one). "
                             "Fix: make_dropout(..., draw=None) on the Triton path.")
        return torch.tensor([self.threshold, *self.keys], dtype=torch.int64, device=device)


def make_dropout(p, seed, heads: int, draw: tuple[int, torch.Tensor] | None = None) -> AttentionDropout | None:
    """The dropout of one call (None where ``p`` is 0): ``p`` checked, ``seed`` checked (an int in
    [0, 2^64) or a one-element integer tensor) or, if None, drawn from torch's global generator.
    ``draw`` = (E, like): without a seed, the mask itself is drawn from torch's stream as DGL's
    ``nn.Dropout`` on an [E, H, 1] attention like ``like`` (its dtype and device) draws it.

    >>> make_dropout(0.0, None, 4) is None
    True
    >>> make_dropout(0.5, 7, 2).mask(torch.arange(4)).shape
    torch.Size([4, 2])
    >>> _ = torch.manual_seed(0); drawn = make_dropout(0.5, None, 2, draw=(4, torch.zeros(1)))
    >>> _ = torch.manual_seed(0); as_dgl = torch.empty(4, 2, 1).bernoulli_(0.5)[..., 0] > 0
    >>> torch.equal(drawn.mask(torch.arange(4)), as_dgl)
    True
    """
    p = check_dropout(p)
    if p == 0:
        if seed is not None:
            check_seed(seed)
        return None
    if seed is None and draw is not None:
        num_edges, like = draw
        noise = torch.empty((num_edges, heads, 1), dtype=like.dtype, device=like.device).bernoulli_(1 - p)
        return AttentionDropout(p, 0, heads, keep=noise.view(num_edges, heads) != 0)
    return AttentionDropout(p, resolve_seed(seed), heads)
