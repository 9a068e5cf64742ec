"""Counter-based random numbers (Philox4x32-10), bit-identical to Triton's ``tl.randint4x`` /
``tl.randint`` / ``tl.rand`` for the same seed and offsets.

Samplers draw the random number for a decision from a counter that names the decision (for
example (step, node, slot)), never from a stream position, so results depend only on the seed
and not on batching, scheduling or the device: the CPU path, the Triton interpreter and a GPU
produce the same samples.

One algorithm, two array back ends: numpy for CPU tensors (chunked, in-place uint64 ops: the
fastest measured here, and immune to torch's intra-op thread pool stalling on a busy 2-core
machine) and torch for other devices.

>>> [int(w) for w in philox4x32(0, torch.tensor([0]))[0]] == [int(philox_randint(0, torch.tensor([0]))[0])]
True
>>> call_seed(1, 0) != call_seed(1, 1)
True
"""
from __future__ import annotations

import numpy as np
import torch

from .checks import check_seed

__all__ = ["philox4x32_np", "philox_randint_np", "uint_to_uniform_np", "philox_uniform_np", "uniform53_np",
           "philox4x32", "philox_randint", "uint_to_uniform", "philox_uniform", "uniform53", "call_seed"]

_MASK32 = 0xFFFFFFFF
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_INT32_TO_UNIT = 4.6566127342e-10  # triton's uint_to_uniform_float scale for 32-bit inputs
_TWO_M53 = 2.0 ** -53              # uniform53's scale: 53 random bits
_CHUNK = 32768  # offsets per numpy chunk: temporaries stay in cache (2x faster than whole arrays)


# ----------------------------------------------------------------------------------- numpy
def philox4x32_np(seed: int, offsets: np.ndarray):
    """The four words of ``tl.randint4x(seed, offsets)`` as uint64 arrays in [0, 2^32)."""
    seed = check_seed(seed)
    off = np.asarray(offsets)
    flat = off.reshape(-1)
    words = [np.empty(flat.shape[0], dtype=np.uint64) for _ in range(4)]
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    n = min(flat.shape[0], _CHUNK)
    pa, pb = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    m32, s32 = np.uint64(_MASK32), np.uint64(32)
    ra, rb = np.uint64(_ROUND_A), np.uint64(_ROUND_B)
    for s in range(0, flat.shape[0], _CHUNK):
        e = min(s + _CHUNK, flat.shape[0])
        c0, c1, c2, c3 = (w[s:e] for w in words)
        a, b = pa[:e - s], pb[:e - s]
        c0[...] = flat[s:e]  # int64 -> uint64 wraps (two's complement) like a bitcast
        np.right_shift(c0, s32, out=c1)
        c0 &= m32
        c2.fill(0)
        c3.fill(0)
        kk0, kk1 = k0, k1
        for _ in range(10):
            np.multiply(c2, rb, out=b)  # exact: both factors < 2^32
            np.multiply(c0, ra, out=a)
            np.right_shift(b, s32, out=c0)
            c0 ^= c1
            c0 ^= np.uint64(kk0)
            np.right_shift(a, s32, out=c2)
            c2 ^= c3
            c2 ^= np.uint64(kk1)
            np.bitwise_and(b, m32, out=c1)
            np.bitwise_and(a, m32, out=c3)
            kk0, kk1 = (kk0 + _KEY_A) & _MASK32, (kk1 + _KEY_B) & _MASK32
    return tuple(w.reshape(off.shape) for w in words)


def philox_randint_np(seed: int, offsets: np.ndarray) -> np.ndarray:
    """``tl.randint(seed, offsets)`` (word 0) as uint64 values in [0, 2^32)."""
    return philox4x32_np(seed, offsets)[0]


def uint_to_uniform_np(x: np.ndarray) -> np.ndarray:
    signed = x.astype(np.uint32).view(np.int32).astype(np.int64)  # bitcast to int32
    signed = np.where(signed < 0, -signed - 1, signed)
    return signed.astype(np.float32) * np.float32(_INT32_TO_UNIT)


def philox_uniform_np(seed: int, offsets: np.ndarray) -> np.ndarray:
    """``tl.rand(seed, offsets)``: float32 uniform in [0, 1)."""
    return uint_to_uniform_np(philox_randint_np(seed, offsets))


def uniform53_np(seed: int, offsets: np.ndarray) -> np.ndarray:
    """float64 uniforms in [0, 1) with 53 random bits: words 0 and 1 of ``philox4x32_np`` as
    ``((w0 >> 5) * 2^26 + (w1 >> 6)) / 2^53`` (numpy's rule for doubles). Every step is exact in
    float64, so :func:`uniform53` gives the same values on any device; for searches over large
    cumulative tables, where ``tl.rand``'s float32 cannot reach most entries."""
    w0, w1, _, _ = philox4x32_np(seed, offsets)
    return ((w0 >> np.uint64(5)) * np.uint64(1 << 26) + (w1 >> np.uint64(6))).astype(np.float64) * _TWO_M53


# ----------------------------------------------------------------------------------- torch
def _philox4x32_torch(seed: int, offsets: torch.Tensor):
    """Torch version (any device), with full 64-bit products: for 32-bit a, b the int64 product
    wraps modulo 2^64, so its bit pattern holds the exact (hi, lo) halves."""
    offsets = offsets.to(torch.int64)
    c0 = offsets & _MASK32
    c1 = (offsets >> 32) & _MASK32
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    for _ in range(10):
        pb = c2 * _ROUND_B
        pa = c0 * _ROUND_A
        c0 = ((pb >> 32) ^ c1 ^ k0) & _MASK32  # arithmetic shift: garbage above bit 31 is masked off
        c2 = ((pa >> 32) ^ c3 ^ k1) & _MASK32
        c1, c3 = pb & _MASK32, pa & _MASK32
        k0, k1 = (k0 + _KEY_A) & _MASK32, (k1 + _KEY_B) & _MASK32
    return c0, c1, c2, c3


def philox4x32(seed: int, offsets: torch.Tensor):
    """The four words of ``tl.randint4x(seed, offsets)`` as int64 tensors in [0, 2^32)."""
    seed = check_seed(seed)
    if offsets.device.type == "cpu":
        words = philox4x32_np(seed, offsets.to(torch.int64).contiguous().numpy())
        return tuple(torch.from_numpy(w.view(np.int64)) for w in words)
    return _philox4x32_torch(seed, offsets)


def philox_randint(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """``tl.randint(seed, offsets)`` as int64 values in [0, 2^32); offsets: any integer tensor."""
    seed = check_seed(seed)
    if offsets.device.type == "cpu":
        return torch.from_numpy(philox_randint_np(seed, offsets.to(torch.int64).contiguous().numpy()).view(np.int64))
    return _philox4x32_torch(seed, offsets)[0]


def uint_to_uniform(x: torch.Tensor) -> torch.Tensor:
    """Triton's ``uint_to_uniform_float`` for 32-bit values: float32 in [0, 1)."""
    signed = torch.where(x >= 2**31, x - 2**32, x)          # bitcast to int32
    signed = torch.where(signed < 0, -signed - 1, signed)
    return signed.to(torch.float32) * torch.tensor(_INT32_TO_UNIT, dtype=torch.float32)


def philox_uniform(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offsets)``: float32 uniform in [0, 1)."""
    return uint_to_uniform(philox_randint(seed, offsets))


def uniform53(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """:func:`uniform53_np` on ``offsets``' device (float64)."""
    seed = check_seed(seed)
    if offsets.device.type == "cpu":
        return torch.from_numpy(uniform53_np(seed, offsets.to(torch.int64).contiguous().numpy()))
    return _uniform53_torch(seed, offsets)


def _uniform53_torch(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    w0, w1, _, _ = _philox4x32_torch(seed, offsets)
    return ((w0 >> 5) * (1 << 26) + (w1 >> 6)).to(torch.float64) * _TWO_M53


# ----------------------------------------------------------------------------------- seeds
_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def call_seed(seed: int, call: int, worker: int = 0) -> int:
    """The Philox key of one sampler call: a splitmix64 chain of (sampler seed, call counter,
    worker id), so successive mini-batches and data-loader workers draw independent numbers."""
    x = _splitmix64(seed & _MASK64)
    x = _splitmix64(x ^ (call & _MASK64))
    return _splitmix64(x ^ (worker & _MASK64))
