"""Generalized SDDMM of the core (DGL-free): DGL's ``gsddmm`` on :class:`GraphViews`.

Files, from the kernel up (``kernels/sddmm.py`` -> here -> ``tests/core/test_sddmm.py``):

* ``checks.py``    argument checks and DGL's shape rules (padding, broadcasting, the output shape).
* ``reference.py`` the pure-torch reference (advanced indexing and torch broadcasting).
* ``native.py``    the native path: compiled loops (``core/jit/sddmm.py``, the aggregation's
                   ``rows_spmm``) for fp32/fp64 where numba runs, else torch gathers and index_add.
* ``launchers.py`` Triton launchers of the forward kernels and of the backward's segment sum.
* ``function.py``  :class:`GSDDMMFunction` and :func:`gsddmm`, the core entry.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
