"""Attention ops of the core (DGL-free): the edge softmax over CSR rows, and the fused attention
aggregations GAT, GATv2 and dot product.  Each op shares one stem from kernel to test
(``kernels/<op>.py`` -> ``core/jit/<op>.py`` -> ``<op>_paths.py`` -> ``<op>.py`` -> ``tests/core/test_<op>.py``).

Files:

* ``edge_softmax.py``       :class:`EdgeSoftmaxFunction` and :func:`edge_softmax`, the edge softmax's entry.
* ``edge_softmax_paths.py`` its triton, compiled and native paths (and the segment softmax the others share).
* ``gat.py``                :func:`gat_attention` and :func:`gat_layer`, GAT's entries (a :class:`Variant`, and
                            its Functions with the score halves inside).
* ``gat_paths.py``          GAT's paths under the variant contract, and the score halves' helpers.
* ``gatv2.py``              :func:`gatv2_attention`, GATv2's entry (a :class:`Variant`).
* ``gatv2_paths.py``        GATv2's paths under the variant contract.
* ``dot.py``                :func:`dot_attention`, the dot product's entry (a :class:`Variant`).
* ``dot_paths.py``          the dot product's paths under the variant contract.
* ``variant.py``            the contract and autograd skeleton the fused ops share (:class:`Variant`).
* ``common.py``             pieces the paths share (edges, numba arrays, all-heads launches).
* ``double.py``             double backward: the fused ops as differentiable compositions.
* ``dropout.py``            GAT's attention dropout (the counter-based mask, its reference).
* ``checks.py``             argument checks (what was expected, what came, how to fix it).
* ``reference.py``          pure-torch references: a loop of ``torch.softmax`` per row, the unfused GAT.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
