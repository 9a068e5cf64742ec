"""Aggregation op core (DGL-free): out[v] = dst_scale[v] * sum over in-edges (u, e) of
src_scale[u] * x[u] (* w[e]), differentiable in x and w.

Files, from the kernel up (one op, one name: ``kernels/gspmm_grouped.py`` -> here ->
``tests/test_gspmm.py`` -> ``bench/bench_aggregation.py``):

* ``views.py``     :class:`GraphViews`, what the op needs of a graph (CSR views, groups, degree
                   scales, group size), and :class:`TensorGraph`, the plain-tensor implementation.
* ``launchers.py`` Triton launchers (grouped SpMM, segmented reduce, SDDMM for edge weights).
* ``native.py``    the native CPU path (compiled loops or torch), or the host library's kernel
                   when the views carry one.
* ``plan.py``      :class:`AggregationPlan`: which rows/edges one aggregation runs on (the full
                   graph here; policies such as execution paths hand down their own).
* ``function.py``  :class:`GSpMMFunction` (autograd) and :func:`aggregate`, the core entry.
* ``checks.py``    argument checks shared by every entry.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
