"""Family ``layer``: layer-wise importance sampling (FastGCN, LADIES); no kernels of its own (its bulk
variant is family ``bulk``'s ``ladies.py``).

Adapters ``sampling/layer.py`` (``LADIESSampler``, ``FastGCNSampler``), ``sampling/layer_graph.py``;
tests ``tests/sampling/test_layer.py``.

* ``importance.py``  the normalised adjacency, the layer distributions, the node draws, the edge weights.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
