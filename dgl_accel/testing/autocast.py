"""Test helper for drop-ins under ``torch.autocast`` (both adapters; DGL-free): one module of ours against
the peer's module under the same autocast, by the flash-attention rule of :mod:`.tolerances`.

``ref64``: the peer's module in fp64, autocast off.  ``ref_same``: the peer's module under the autocast;
where the peer raises there (DGL's ``GATConv`` and ``GATv2Conv``), the peer's module and inputs cast
whole to the autocast dtype.  Ours under the autocast may be at most twice as far from ``ref64`` as
``ref_same`` is, plus the dtype's atol (scaled by the largest reference magnitude), in its output, its
input gradients and every parameter gradient; its gradients come back in each leaf's own dtype, finite.
"""
from __future__ import annotations

import copy

import torch

from .tolerances import tolerance

DTYPE = torch.bfloat16  # CPU autocast's dtype


def _flat(out) -> torch.Tensor:
    """A module's output (a tensor, a dict of them by key, a tuple's first entry) as one fp64 vector."""
    if isinstance(out, tuple):
        out = out[0]
    if isinstance(out, dict):
        return torch.cat([out[k].double().reshape(-1) for k in sorted(out)])
    return out.double().reshape(-1)


def run(module, call, x, autocast: bool, dtype=None):
    """(output, input grads, parameter grads by name) of ``call(module, x)`` with the loss
    <output, fixed weights>; under CPU autocast if ``autocast``; module and float inputs cast to ``dtype``
    first if given."""
    module = copy.deepcopy(module)
    if dtype is not None:
        module = module.to(dtype)
    leaves = x if isinstance(x, dict) else {"x": x}
    inputs = {k: (v.to(dtype) if dtype is not None else v).detach().clone().requires_grad_() for k, v in leaves.items()}
    arg = inputs if isinstance(x, dict) else inputs["x"]
    with torch.autocast("cpu", dtype=DTYPE, enabled=autocast):
        out = call(module, arg)
    flat = _flat(out)
    weights = torch.linspace(-1, 1, flat.numel(), dtype=torch.float64).sin()
    (flat * weights).sum().backward()
    params = {n: p.grad for n, p in module.named_parameters() if p.requires_grad}
    return out, {k: v.grad for k, v in inputs.items()}, params


def _bound(actual, ref64, ref_same, what: str):
    actual, ref64, ref_same = (_flat(t) for t in (actual, ref64, ref_same))
    assert actual.shape == ref64.shape, f"{what}: shape {tuple(actual.shape)} vs {tuple(ref64.shape)}"
    assert torch.isfinite(actual).all(), f"{what}: not finite"
    err = (actual - ref64).abs().max().item()
    err_same = (ref_same - ref64).abs().max().item()
    bound = 2 * err_same + tolerance(DTYPE).atol * max(1.0, ref64.abs().max().item())
    assert err <= bound, (f"{what}: max|ours - fp64| = {err:.3e} exceeds 2 * max|peer under autocast - fp64| "
                          f"+ atol = 2 * {err_same:.3e} + atol = {bound:.3e}")


def assert_autocast_matches(theirs, ours, call, x, warm: bool, peer_raises=None, where: str = "",
                            grads: bool = True) -> None:
    """``ours`` (a swapped copy of ``theirs``) under CPU bf16 autocast against ``theirs`` (rule above).
    ``warm``: both modules themselves run one fp32 forward and backward first (caches an fp32 call
    fills, on the module or the graph, must not leak into the autocast call).  ``peer_raises``: the
    exception type the peer raises under autocast (checked), or None.  ``grads=False``: gradients are
    checked for their dtype and finiteness only (a ReLU's mask flips where bf16 rounding moves a
    pre-activation across 0, a jump no tolerance bounds)."""
    if warm:
        for m in (theirs, ours):
            _flat(call(m, x)).sum().backward()
            m.zero_grad(set_to_none=True)
    ref64 = run(theirs, call, x, autocast=False, dtype=torch.float64)
    if peer_raises is not None:
        try:
            run(theirs, call, x, autocast=True)
        except peer_raises:
            pass
        else:
            raise AssertionError(f"{where}: expected the peer to raise {peer_raises.__name__} under autocast")
        ref_same = run(theirs, call, x, autocast=False, dtype=DTYPE)
    else:
        ref_same = run(theirs, call, x, autocast=True)
    got = run(ours, call, x, autocast=True)
    _bound(got[0], ref64[0], ref_same[0], f"{where}: output")
    leaves = x if isinstance(x, dict) else {"x": x}
    for k, grad in got[1].items():
        assert grad is not None and grad.dtype == leaves[k].dtype, f"{where}: input {k}'s gradient {grad}"
        assert torch.isfinite(grad).all(), f"{where}: input {k}'s gradient is not finite"
        if grads:
            _bound(grad, ref64[1][k], ref_same[1][k], f"{where}: gradient of input {k}")
    assert got[2].keys() == ref64[2].keys(), f"{where}: parameters {sorted(got[2])} vs {sorted(ref64[2])}"
    for name, p in ours.named_parameters():
        grad = got[2][name]
        assert grad is not None and grad.dtype == p.dtype, f"{where}: {name}'s gradient {grad}"
        assert torch.isfinite(grad).all(), f"{where}: {name}'s gradient is not finite"
        if grads:
            _bound(grad, ref64[2][name], ref_same[2][name], f"{where}: gradient of {name}")


__all__ = ["DTYPE", "run", "assert_autocast_matches"]
