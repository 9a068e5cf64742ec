"""Family ``bulk``: matrix-based bulk sampling (Tripathy, Yelick, Buluc, MLSys'24), ``k`` minibatches
a pass, for neighbour sampling and LADIES.

Kernels ``kernels/bulk_sampling.py`` -> here -> compiled twin ``core/jit/bulk_sampling.py``; adapters
``sampling/bulk.py`` (``BulkNeighborSampler``), ``sampling/bulk_ladies.py``, ``sampling/bulk_matrix.py``;
tests ``tests/core/sampling/test_bulk.py``, ``tests/core/sampling/test_bulk_device.py``,
``tests/sampling/test_bulk.py``, ``tests/sampling/test_buffers.py``; bench ``bench/bench_bulk.py``.

* ``its.py``              row-wise inverse transform sampling: the specification, CPU twin, dispatch.
* ``matrix.py``           the matrices: canonical adjacency ``A``, selections ``Q``, SpGEMM ``P = Q @ A``.
* ``neighbor.py``         one layer of bulk neighbour sampling for ``k`` minibatches (CPU path).
* ``neighbor_device.py``  every layer of ``neighbor.py`` on the adjacency's device.
* ``ladies.py``           one layer of bulk LADIES (CPU path).
* ``ladies_device.py``    ``ladies.py``'s layer on the device.
* ``buffers.py``          recycled large buffers for the per-layer arrays.
* ``launchers.py``        Triton launchers of the ITS, compaction and relabelling kernels (numpy in and
  out: the one launcher module outside the ``device-pipelines`` contract).

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
