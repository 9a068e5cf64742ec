"""Drop-in subclasses of ``dgl.nn`` modules whose aggregation runs on dgl-accel's ops."""
from .graphconv import GraphConv

__all__ = ["GraphConv"]
