"""The PyG front door: dgl-accel's DGL-free core behind ``torch_geometric``'s own interfaces.

A second adapter beside the DGL one (``dgl_accel.nn``, ``dgl_accel.sampling``): it converts PyG's
inputs (``edge_index``, ``SparseTensor``/CSR, ``edge_weight``, bipartite ``(x_src, x_dst)``, ``size``)
to the core's graph views and the core's outputs back to PyG's layout; it never computes beside the
core and never imports DGL (import-linter contract ``pyg-dgl-free``).  torch-geometric is needed
only when these names are used: ``import dgl_accel`` never loads it.
"""
