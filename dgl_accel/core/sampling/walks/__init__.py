"""Family ``walks``: random walks on a CSR view (DeepWalk, weighted, restart, node2vec, metapath, MDRW).

Kernels ``kernels/walks.py`` -> here -> compiled twin ``core/jit/walks.py``; adapter
``sampling/walks.py``; tests ``tests/core/sampling/test_walks.py``, ``tests/sampling/test_walks.py``,
``tests/kernels/test_walks.py``; bench ``bench/sampling_walks.py``.

* ``random_walk.py``  the entry :func:`~.random_walk.random_walk`, the Philox counter layout and the
  tables every walk shares (``WalkCSR``, ``WalkWeights``).
* ``node2vec.py``     node2vec's second-order walk (rejection sampling, exact fallback).
* ``mdrw.py``         the multi-dimensional random walk (GraphSAINT's frontier sampler as a walk).
* ``metapath.py``     walks along a metapath of a heterograph's relations.
* ``launchers.py``    Triton launchers of the walk kernels.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
