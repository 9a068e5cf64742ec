"""Launchers, autograd Functions and device dispatch for every op (cuda: Triton; cpu: native)."""
from .spmm import CopyUSumFunction, copy_u_sum, csr_spmm_forward
from .vector_scale import ScaleFunction, scale, scale_forward

__all__ = ["scale", "scale_forward", "ScaleFunction", "copy_u_sum", "csr_spmm_forward", "CopyUSumFunction"]
