"""Family ``shadow``: shaDow-GNN's scopes (Zeng et al., NeurIPS'21), k-hop and personalised PageRank.

Kernels ``kernels/sampling.py`` (the k-hop sets' neighbour choice) and ``kernels/ppr.py`` -> here ->
compiled twins ``core/jit/shadow.py``, ``core/jit/ppr.py``; adapter ``sampling/shadow.py``
(``ShaDowKHopSampler``, ``ShaDowPPRSampler``); tests ``tests/core/sampling/test_shadow.py``,
``tests/core/sampling/test_ppr.py``, ``tests/sampling/test_shadow.py``.  The subgraphs are family ``induced``'s.

* ``scope.py``         per-target k-hop sets, the merged k-hop set, the batch of induced subgraphs.
* ``scope_device.py``  ``scope.py``'s per-target k-hop sets on the CSR's device.
* ``ppr.py``           approximate PPR by pushes and top-K node sets: entry, numpy reference.
* ``ppr_device.py``    ``ppr.py``'s pushes and top-K on the device, many targets per round.
* ``launchers.py``     Triton launcher of the PPR spread kernel.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
