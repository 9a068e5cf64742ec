"""Runs DGL 2.1.0's own tests with dgl-accel's samplers substituted (SUBSTITUTE=1, issue 17's
acceptance), with DGL's message passing routed through dgl-accel (ENABLE=1: ``dgl_accel.enable()``
for the whole run, issue 18's acceptance on ``python/pytorch/nn/test_nn.py``), or on plain DGL.
Put this file at the root of a copy of DGL's ``tests/`` folder at tag v2.1.0 (``fetch``
github:dmlc/dgl, or a clone), then from that folder:

    SUBSTITUTE=1 DGLBACKEND=pytorch python -m pytest -q python/pytorch/dataloading/test_dataloader.py
    SUBSTITUTE=1 DGLBACKEND=pytorch python -m pytest -q python/common/sampling/test_sampling.py

and the same without SUBSTITUTE=1 for plain DGL's counts (2026-11-25: identical, 92 passed /
11 failed (dataset downloads, worker_init_fn) / 144 skipped (GPU), and 43 passed / 3 skipped).
For test_nn.py: ``git show v2.1.0:tests/python/pytorch/nn/test_nn.py`` into ``python/pytorch/nn/``,
then ``ENABLE=1 DGLBACKEND=pytorch python -m pytest -q python/pytorch/nn/test_nn.py``; with NN=1
as well, our drop-in layers (``dgl_accel.nn.__all__``'s dgl.nn subclasses: GraphConv, SAGEConv,
GINConv, GATConv, GATv2Conv, DotGatConv, EdgeConv) replace DGL's in ``dgl.nn.pytorch`` for the run, so
DGL's own tests of those modules run ours."""
import os

import dgl
import dgl.dataloading
import dgl.sampling

if os.environ.get("SUBSTITUTE") == "1":
    import dgl_accel.sampling as ours

    for name in ("NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler", "SAINTSampler"):
        setattr(dgl.dataloading, name, getattr(ours, name))
    dgl.sampling.random_walk = ours.random_walk
    dgl.sampling.node2vec_random_walk = ours.node2vec_random_walk

if os.environ.get("ENABLE") == "1":
    import dgl_accel

    dgl_accel.enable()

if os.environ.get("NN") == "1":
    import dgl.nn.pytorch

    import dgl_accel.nn as ours_nn

    for name in ours_nn.__all__:
        cls = getattr(ours_nn, name)
        if isinstance(cls, type) and hasattr(dgl.nn.pytorch, name) and issubclass(cls, getattr(dgl.nn.pytorch, name)):
            setattr(dgl.nn.pytorch, name, cls)
