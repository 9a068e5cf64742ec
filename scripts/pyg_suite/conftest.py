"""Runs PyG 2.8.0's own tests with dgl-accel substituted: our layers for PyG's (NN=1: every layer
of ``dgl_accel.pyg.swapping.SWAPS`` bound in ``torch_geometric.nn`` and ``torch_geometric.nn.conv``
before the tests import them), our sampler
for PyG's (SAMPLER=1: ``dgl_accel.pyg.NeighborSampler`` in ``NeighborLoader`` and
``LinkNeighborLoader``, and the ``onlyNeighborSampler`` guard lifted: PyG skips those tests when
neither pyg-lib nor torch-sparse is installed, and ours needs neither), our loaders for PyG's
(LOADER=1: ``dgl_accel.pyg.NeighborLoader`` and ``LinkNeighborLoader`` bound in
``torch_geometric.loader``, the guard lifted as with SAMPLER), or plain PyG (none).

Put this file in the folder ABOVE a copy of PyG's ``test/`` folder at tag 2.8.0 (``fetch``
github:pyg-team/pytorch_geometric, then ``git archive 2.8.0 test | tar -x -C DIR``), so that PyG's
own ``test/conftest.py`` (its fixtures) still loads, then from DIR:

    NN=1 python -m pytest -q test/nn/conv/test_gcn_conv.py test/nn/conv/test_sage_conv.py \\
        test/nn/conv/test_gin_conv.py test/nn/conv/test_gat_conv.py test/nn/conv/test_gatv2_conv.py \\
        test/nn/conv/test_graph_conv.py
    SAMPLER=1 python -m pytest -q test/loader/test_neighbor_loader.py test/loader/test_link_neighbor_loader.py
    LOADER=1 python -m pytest -q test/loader/test_neighbor_loader.py test/loader/test_link_neighbor_loader.py

and the same without NN / SAMPLER for plain PyG's counts (docs/history/pyg-2026-11-27.md has both).
"""
import os

if os.environ.get("NN") == "1":
    import torch_geometric.nn
    import torch_geometric.nn.conv

    from dgl_accel.pyg.swapping import SWAPS

    for _theirs, _ours in SWAPS.items():  # every layer swap() changes
        setattr(torch_geometric.nn, _theirs.__name__, _ours)
        setattr(torch_geometric.nn.conv, _theirs.__name__, _ours)

if os.environ.get("SAMPLER") == "1" or os.environ.get("LOADER") == "1":
    import torch_geometric.loader.link_neighbor_loader as _link_loader
    import torch_geometric.loader.neighbor_loader as _node_loader
    import torch_geometric.testing
    import torch_geometric.testing.decorators
    import torch_geometric.typing

    from dgl_accel.pyg import NeighborSampler

    def _no_guard(fn):
        return fn

    torch_geometric.testing.onlyNeighborSampler = _no_guard
    torch_geometric.testing.decorators.onlyNeighborSampler = _no_guard
    # PyG's weighted-sampling tests are skipped without pyg-lib >= 0.3; ours samples by weight
    torch_geometric.typing.WITH_WEIGHTED_NEIGHBOR_SAMPLE = True
    _node_loader.NeighborSampler = _link_loader.NeighborSampler = NeighborSampler

if os.environ.get("LOADER") == "1":
    import torch_geometric.loader

    _with_package = torch_geometric.testing.decorators.withPackage

    def _with_package_but_pyg_lib(*packages):
        # the loader tests PyG gates on pyg-lib (disjoint, temporal) run on our loaders; a test that
        # reaches into pyg-lib itself still fails there, which the note counts
        return _with_package(*[p for p in packages if p != "pyg_lib"])

    torch_geometric.testing.withPackage = torch_geometric.testing.decorators.withPackage = _with_package_but_pyg_lib
    torch_geometric.typing.WITH_EDGE_TIME_NEIGHBOR_SAMPLE = True  # edge-level time: ours samples by it

    from dgl_accel.pyg import LinkNeighborLoader, NeighborLoader

    torch_geometric.loader.NeighborLoader = _node_loader.NeighborLoader = NeighborLoader
    torch_geometric.loader.LinkNeighborLoader = _link_loader.LinkNeighborLoader = LinkNeighborLoader
