"""The DGL-free sampling toolkit: the samplers' maths on CSR views (:class:`dgl_accel.core.csr.Structure`)
and plain tensors, never a DGLGraph.  The DGL adapter (samplers returning blocks / subgraphs,
DataLoader glue) is :mod:`dgl_accel.sampling`.

One convention, kernel -> launcher -> CPU twin -> sampler, and one family name from ``kernels/`` to
``tests/`` and ``bench/``.  In a family ``F``: ``kernels/F.py`` holds the ``@triton.jit`` kernels;
``F_triton.py`` here their launchers and nothing else (arguments, grids, the kernel looked up through
:func:`dgl_accel.core.launch.triton_kernel`); ``F.py`` here the entry points, the path choice
(``core.backend.choose_path``) and the numpy CPU twin (split into ``F_*.py`` modules when large);
``core/jit/F.py`` the compiled CPU twin (numba, used where ``core.jit.runtime.worth(work)``); the
DGL adapter, the tests and the benchmarks carry the family name too:

* ``neighbor`` (kernels: ``kernels/sampling.py`` [1]_): ``neighbor_triton.py``; ``choice.py`` (the
  specification, CPU twin), ``neighbor.py`` (entry: :func:`.neighbor.sample_neighbors`),
  ``engine.py`` (transit groups), ``khop.py``; ``core/jit/neighbor.py``; adapter
  ``sampling/neighbor.py`` (``NeighborSampler``), ``sampling/khop.py``; ``tests/sampling/test_neighbor.py``,
  ``test_sampling_engine.py``, ``test_khop.py``; ``bench/sampling_neighbor.py``.
* ``bulk_sampling``: ``bulk_sampling_triton.py``; ``bulk_sampling.py`` (ITS specification, CPU twin,
  dispatch), ``bulk_matrix.py``, ``bulk_neighbor.py``, ``bulk_ladies.py``, ``buffers.py``;
  ``core/jit/bulk_sampling.py``; adapter ``sampling/bulk.py``, ``bulk_ladies.py``, ``bulk_matrix.py``;
  ``tests/sampling/test_bulk.py``, ``test_buffers.py``; ``bench/bench_bulk.py``.
* ``saint_frontier``: ``saint_frontier_triton.py``; ``saint_frontier.py`` (entry),
  ``saint_frontier_cpu.py`` (CPU twin); adapter ``sampling/frontier.py`` (and ``saint.py``'s frontier
  mode); ``tests/sampling/test_frontier.py``; ``bench/saint_frontier.py``.
* ``walks``: ``walks_triton.py``; ``walks.py`` (entry, tables, random walk), ``walks_node2vec.py``,
  ``walks_mdrw.py``; ``core/jit/walks.py``; adapter ``sampling/walks.py``; ``tests/sampling/test_walks.py``,
  ``test_walk_kernels.py``; ``bench/sampling_walks.py``.

.. [1] ``kernels/sampling.py`` holds the neighbour-choice kernels; it keeps its file name because
   ``kernels/registry.py``, the AOT resource table and ``docs/kernel_resources.md`` key on it.

Families without kernels: ``layer`` (LADIES / FastGCN maths), ``saint_draw`` and ``saint_norm``
(GraphSAINT node sets and normalisation; adapter ``sampling/saint.py``, ``tests/sampling/test_saint.py``,
``bench/saint_samplers.py``), ``induced`` (node-induced subgraphs; compiled twin ``core/jit/induced.py``).
Shared by all: ``checks`` (the one set of argument checks and error vocabulary, with the seed
rule), ``rng`` (counter-based Philox), ``arrays`` (small array helpers), ``output`` (the typed
sampler output every pipeline returns).

Device pipelines (``*_device.py``; torch ops and the family's kernels where the graph lives, no
numpy, the CPU path's samples; the entry points above pick them on the Triton path):
``neighbor_device.py`` (one layer, blocks), ``weighted_device.py`` (the weighted choice),
``relations_device.py`` (heterograph blocks), ``bulk_device.py``, ``ppr_device.py``,
``shadow_device.py`` (per-target k-hop sets) and ``induced_device.py`` (induced subgraphs and
batches of them).

This ``__init__`` imports nothing, so that importing one module never drags in the rest.
"""
