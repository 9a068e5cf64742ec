"""Counter-based random numbers (Philox4x32-10), bit-identical to Triton's ``tl.randint`` /
``tl.rand`` for the same seed and offsets.

Samplers draw the random number for a decision from a counter that names the decision (for
example (step, node, slot)), never from a stream position, so results depend only on the seed
and not on batching, scheduling or the device: the CPU path, the Triton interpreter and a GPU
produce the same samples.
"""
from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_INT32_TO_UNIT = 4.6566127342e-10  # triton's uint_to_uniform_float scale for 32-bit inputs


def _mulhilo(a: int, b: torch.Tensor):
    """(high, low) 32-bit halves of a * b for a 32-bit constant a and uint32 values b (in int64)."""
    a_hi, a_lo = a >> 16, a & 0xFFFF
    hi = (a_hi * b + ((a_lo * b) >> 16)) >> 16  # exact: every term fits in 63 bits
    lo = (a * b) & _MASK32                     # int64 wrap-around keeps the low bits right
    return hi, lo


def philox_randint(seed: int, offsets: torch.Tensor, n_rounds: int = 10) -> torch.Tensor:
    """``tl.randint(seed, offsets)`` as int64 values in [0, 2^32); offsets: any integer tensor."""
    if isinstance(seed, torch.Tensor) or not isinstance(seed, int) or seed < 0 or seed >= 2**64:
        raise ValueError(f"expected seed to be an int in [0, 2^64) (got {seed!r}). Fix: pass a Python int.")
    offsets = offsets.to(torch.int64)
    c0 = offsets & _MASK32
    c1 = (offsets >> 32) & _MASK32
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    for _ in range(n_rounds):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _MASK32, (k1 + _KEY_B) & _MASK32
    return c0


def uint_to_uniform(x: torch.Tensor) -> torch.Tensor:
    """Triton's ``uint_to_uniform_float`` for 32-bit values: float32 in [0, 1)."""
    signed = torch.where(x >= 2**31, x - 2**32, x)          # bitcast to int32
    signed = torch.where(signed < 0, -signed - 1, signed)
    return signed.to(torch.float32) * torch.tensor(_INT32_TO_UNIT, dtype=torch.float32)


def philox_uniform(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offsets)``: float32 uniform in [0, 1)."""
    return uint_to_uniform(philox_randint(seed, offsets))
