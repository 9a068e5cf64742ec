"""DGL functions other than gspmm that ``dgl_accel.enable()`` reroutes, one module per function:
each keeps DGL's signature and rules, runs what we support on the front door
(:mod:`dgl_accel.functional`) and hands everything else to DGL's original, counting the reason in
``dgl_accel.stats()``.  ``apply(active)`` in each module swaps the names; :mod:`dgl_accel.patching`
calls it."""

from ..core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
