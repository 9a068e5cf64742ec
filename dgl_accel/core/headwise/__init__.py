"""Sum/mean aggregation with head-wise (broadcast) edge weights, and of edge features, DGL-free.

DGL's ``gspmm`` ``u_mul_e`` (and ``u_div_e``, a mul by 1/w) with edge weights that broadcast against
the node features (``[E, H, 1]`` on ``[N, H, D]``: what GAT-style layers run in
``update_all(fn.u_mul_e("ft", "a", "m"), fn.sum("m", "ft"))``), and ``copy_e`` with ``sum``/``mean``.

Files, from the kernel up (``kernels/headwise.py`` -> here -> ``tests/core/test_headwise.py``):

* ``shapes.py``    DGL's padding of the two feature shapes and the split of the features into
                   (groups L, heads K, head length R) with one weight per edge and head.
* ``paths.py``     the Triton launcher, the compiled loop (``core/jit/headwise.py``) and the
                   vectorised torch path of one CSR pass; the pure-torch reference.
* ``function.py``  :class:`HeadwiseFunction` (backward: the same op on the reverse CSR, the weight
                   gradient a ``gsddmm`` dot) and :func:`aggregate_headwise`, the core entry.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
