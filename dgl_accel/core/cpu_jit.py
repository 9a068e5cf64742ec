"""TEMPORARY thin re-export for the aggregation code, which still imports ``from ..core import
cpu_jit``: the compiled loops moved to :mod:`dgl_accel.core.jit` (``runtime``: availability and
``MIN_WORK``; ``aggregation``: ``rows_spmm``, ``scatter_rows``).  The aggregation owner switches its
imports to those modules and deletes this file."""
from __future__ import annotations

from .jit.aggregation import rows_spmm, scatter_rows
from .jit.runtime import MIN_WORK, enabled

__all__ = ["enabled", "MIN_WORK", "rows_spmm", "scatter_rows"]
