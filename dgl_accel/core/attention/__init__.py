"""Attention ops of the core (DGL-free): edge softmax over CSR rows and the fused GAT aggregation.

Files, from the kernel up (``kernels/attention.py`` -> here -> ``tests/core/test_attention.py``):

* ``checks.py``       argument checks of both ops (what was expected, what came, how to fix it).
* ``reference.py``    pure-torch references: a loop of ``torch.softmax`` per row, the unfused GAT.
* ``native.py``       the native CPU path: vectorised segment softmax (scatter amax, index_add).
* ``compiled.py``     the native path's compiled loops (numba, ``core/jit/attention.py``) where worth it.
* ``launchers.py``    Triton launchers of the edge-softmax and fused GAT kernels.
* ``edge_softmax.py`` :class:`EdgeSoftmaxFunction` and :func:`edge_softmax`, the core entry.
* ``gat.py``          :class:`GATAttentionFunction` and :func:`gat_attention`, the fused entry.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
