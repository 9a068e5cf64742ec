"""The DGL-free sampling toolkit: samplers' maths on CSR views (:class:`dgl_accel.core.csr.Structure`)
and plain tensors, never a DGLGraph.  The DGL adapter (samplers returning blocks / subgraphs) is
:mod:`dgl_accel.sampling`.

One convention, kernel -> launcher -> CPU twin -> sampler, with one family name from ``kernels/``
to ``tests/``:

==============  ====================  ===========================  =====================  ===========================
family          kernels/ (Triton)     core/sampling/               core/jit/ (numba)      dgl_accel.sampling (DGL)
==============  ====================  ===========================  =====================  ===========================
neighbor        sampling.py [#]_      neighbor.py (entry),         neighbor.py            neighbor.py, khop.py
                                      neighbor_triton.py,
                                      choice.py (spec), engine.py,
                                      khop.py
bulk_sampling   bulk_sampling.py      bulk_sampling.py (spec),     bulk_sampling.py       bulk.py, bulk_ladies.py,
                                      bulk_sampling_triton.py,                            bulk_matrix.py
                                      bulk_matrix.py,
                                      bulk_neighbor.py, buffers.py
saint_frontier  saint_frontier.py     saint_frontier.py (entry),   --                     frontier.py, saint.py
                                      saint_frontier_triton.py,
                                      saint_frontier_cpu.py
walks           walks.py              walks.py (entry, tables),    walks.py               walks.py
                                      walks_triton.py,
                                      walks_node2vec.py,
                                      walks_mdrw.py
==============  ====================  ===========================  =====================  ===========================

.. [#] ``kernels/sampling.py`` holds the neighbour-choice kernels; it keeps its file name because
   ``kernels/registry.py``, the AOT resource table and ``docs/kernel_resources.md`` key on it.

Per family: ``<family>_triton.py`` holds the Triton launchers (and nothing else: argument
preparation, grids, lazy kernel lookup through :func:`dgl_accel.core.launch.triton_kernel`);
``<family>.py`` holds the entry points, the path choice (``core.backend.choose_path``) and the numpy
CPU twin (split into the other modules of the row when large); ``core/jit/<family>.py`` the
compiled CPU twin, used when numba is available (``core.jit.runtime.worth``).  Tests mirror the
names (``tests/test_<family>*.py``, e.g. ``test_bulk_sampling.py``, ``test_walks.py``,
``test_walk_kernels.py``; neighbour: ``test_neighbor_sampler.py``, ``test_sampling_engine.py``,
``test_khop.py``; frontier: ``test_frontier_sampler.py``), and so do the benchmarks
(``bench/sampling_neighbor.py``, ``bench/bench_bulk.py``, ``bench/saint_frontier.py``,
``bench/sampling_walks.py``).

Families without kernels: ``layer`` (LADIES / FastGCN maths), ``saint_draw`` / ``saint_norm``
(GraphSAINT node sets and normalisation), ``induced`` (node-induced subgraphs, compiled twin
``core/jit/induced.py``).  Shared: ``checks`` (the one set of argument checks and error
vocabulary, including the seed rule), ``rng`` (counter-based Philox), ``arrays`` (small helpers).

This ``__init__`` imports nothing, so that importing one module never drags in the rest.
"""
