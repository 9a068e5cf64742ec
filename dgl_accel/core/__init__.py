"""The DGL-free core: CSR views on plain tensors, the aggregation op core (Triton launchers,
native CPU path, autograd) and the sampling launchers with their compiled CPU twins.

It imports torch, numpy and (lazily, in the process's mode) triton; numba is optional.  It never
imports ``dgl`` nor anything above it (policies, the front door, the DGL adapter): the test
command proves both with import-linter.  This ``__init__`` imports nothing, so that importing one
core module never drags in the rest.
"""
