"""Graph datasets for dgl-accel: DGL's Cora/Citeseer offline, the shared npz layout,
SNAP edge lists and a deterministic synthetic graph. Every loader returns a DGLGraph
with DGL's ndata keys where available (feat, label, train/val/test_mask) and never
writes under the shared dataset folder.
"""

from ..core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
from .dgl_datasets import load_dgl_dataset
from .npz import dense_features, load_npz, load_npz_arrays
from .paths import datasets_root
from .registry import available, load
from .snap import load_snap_edgelist
from .synthetic import synthetic_graph

__all__ = [
    "available", "datasets_root", "dense_features", "load", "load_dgl_dataset",
    "load_npz", "load_npz_arrays", "load_snap_edgelist", "synthetic_graph",
]
