"""Family ``induced``: node-induced subgraphs from a cached in-CSR (what GraphSAINT and shaDow-GNN
train on, and PyG's ``subgraph_type="induced"`` neighbour sampling: ``neighbor/hops.py``).

Here -> compiled twin ``core/jit/induced.py``; adapter ``sampling/induced.py``; tests
``tests/core/sampling/test_induced.py`` (and the SAINT and shaDow tests that build subgraphs).

* ``subgraph.py``         the induced subgraph's entries (vectorised numpy, threads, symmetric halves),
                          and the edges from one node list into another (two node types).
* ``subgraph_device.py``  ``subgraph.py``'s subgraphs, and batches of them, on the CSR's device.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
