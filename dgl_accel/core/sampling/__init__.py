"""The DGL-free sampling toolkit: the samplers' maths on CSR views (:class:`dgl_accel.core.csr.Structure`)
and plain tensors, never a DGLGraph.  The DGL adapter (samplers returning blocks / subgraphs,
DataLoader glue) is :mod:`dgl_accel.sampling`; the PyG adapter's sampler is :mod:`dgl_accel.pyg.sampler`.

One subpackage per family, and in each one rule, kernel -> launcher -> CPU twin -> sampler:
``kernels/<kernels>.py`` holds the ``@triton.jit`` kernels; the family's ``launchers.py`` their
launchers and nothing else (arguments, grids, the kernel looked up through
:func:`dgl_accel.core.launch.triton_kernel`); a CPU module ``X.py`` holds entry points, the path choice
(``core.backend.choose_path``) and the numpy CPU twin, and its device pipeline is ``X_device.py``
beside it (torch ops and the family's kernels where the graph lives, no numpy: the import-linter
contract ``device-pipelines``; the same samples as the CPU path; the entry points pick it on the
Triton path); ``core/jit/<family>.py`` holds the compiled CPU twin (numba, used where
``core.jit.runtime.worth(work)``).  Each family's ``__init__`` lists its files and names its kernels,
adapter, tests and benchmarks:

* ``neighbor/``  in-neighbour sampling: the choice, DGL's blocks, heterograph relations, PyG's hops,
  k-hop samples (kernels ``kernels/sampling.py`` [1]_).
* ``walks/``     random walks: DeepWalk, weighted, restart, node2vec, metapath, MDRW (``kernels/walks.py``).
* ``saint/``     GraphSAINT: node-set draws, normalisation, the frontier sampler
  (``kernels/saint_frontier.py``).
* ``bulk/``      matrix-based bulk sampling, ``k`` minibatches a pass: neighbour and LADIES
  (``kernels/bulk_sampling.py``).
* ``shadow/``    shaDow-GNN's scopes: k-hop sets and personalised PageRank (``kernels/ppr.py``).
* ``induced/``   node-induced subgraphs (GraphSAINT's and shaDow-GNN's subgraphs).
* ``layer/``     layer-wise importance sampling (FastGCN, LADIES), no kernels.

.. [1] ``kernels/sampling.py`` holds the neighbour-choice kernels; it keeps its file name because
   ``kernels/registry.py``, the AOT resource table and ``docs/kernel_resources.md`` key on it.

Shared by all families, here:

* ``checks.py``  the one set of argument checks and error vocabulary, with the seed rule.
* ``rng.py``     counter-based Philox (numpy and torch twins) and :func:`~.rng.call_seed`.
* ``seeds.py``   :class:`~.seeds.CallSeeds`: a sampler's seed and per-call counter, the one place
  both adapters' samplers key their calls.
* ``arrays.py``  small array helpers.
* ``output.py``  the typed sampler output every pipeline returns.

This ``__init__`` imports nothing, so that importing one module never drags in the rest.
"""
