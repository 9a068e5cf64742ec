"""Launchers, autograd Functions and device dispatch for every op (cuda: Triton; cpu: native)."""
from .gspmm import GSpMMFunction, copy_u_sum, gspmm, gspmm_forward
from .vector_scale import ScaleFunction, scale, scale_forward

__all__ = ["scale", "scale_forward", "ScaleFunction", "gspmm", "gspmm_forward", "GSpMMFunction", "copy_u_sum"]
