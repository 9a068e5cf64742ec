"""The typed result of the core's multi-layer samplers, shared by the CPU and device pipelines and
by every adapter (PyG's ``SamplerOutput`` plays this part there).

A :class:`SampledLayer` is one message-flow layer (a DGL block): its destination nodes, its source
nodes (the destinations first, then the other sampled sources in increasing id), and its sampled
edges in CSC form (grouped by destination): ``indptr``, the local source of each edge (an index
into ``src_nodes``) and its original edge id.  A :class:`SamplerOutput` holds the seeds and the
layers, input layer first (DGL's order of blocks).  Every tensor is int64, on the graph's device.
On a heterograph, a :class:`TypedLayer` holds the node ids per node type and one
:class:`SampledLayer` per relation, and :class:`TypedSamplerOutput` the seeds per node type.

>>> import torch
>>> layer = SampledLayer(dst_nodes=torch.tensor([3]), src_nodes=torch.tensor([3, 7]),
...                      indptr=torch.tensor([0, 2]), src_local=torch.tensor([1, 0]), eids=torch.tensor([5, 2]))
>>> out = SamplerOutput(seeds=torch.tensor([3]), layers=(layer,))
>>> out.input_nodes.tolist(), layer.num_edges, layer.dst_local.tolist()
([3, 7], 2, [0, 0])
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SampledLayer", "SamplerOutput", "TypedLayer", "TypedSamplerOutput", "assert_same_output",
           "assert_same_typed_output"]


@dataclass(frozen=True)
class SampledLayer:
    dst_nodes: torch.Tensor  # [T] global ids of the destinations (the layer's seeds, in order)
    src_nodes: torch.Tensor  # [S] global ids: dst_nodes first, then the new sources in increasing id
    indptr: torch.Tensor     # [T + 1] edges of destination i at indptr[i]:indptr[i + 1]
    src_local: torch.Tensor  # [E] each edge's source as an index into src_nodes
    eids: torch.Tensor       # [E] each edge's id in the sampled graph

    @property
    def num_edges(self) -> int:
        return self.src_local.shape[0]

    @property
    def dst_local(self) -> torch.Tensor:
        """[E] each edge's destination as an index into dst_nodes (COO form)."""
        counts = self.indptr[1:] - self.indptr[:-1]
        return torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts,
                                       output_size=self.num_edges)


@dataclass(frozen=True)
class SamplerOutput:
    seeds: torch.Tensor                # the output nodes, as given
    layers: tuple[SampledLayer, ...]   # input layer first

    @property
    def input_nodes(self) -> torch.Tensor:
        """The nodes whose input features the first layer reads."""
        return self.layers[0].src_nodes if self.layers else self.seeds


@dataclass(frozen=True)
class TypedLayer:
    """One layer of a heterograph (a typed DGL block): node ids per node type, a
    :class:`SampledLayer` per relation whose ``dst_nodes`` / ``src_nodes`` are its destination and
    source types' entries here (the same tensors)."""
    dst_nodes: tuple[torch.Tensor, ...]       # per node type: the layer's destinations, in order
    src_nodes: tuple[torch.Tensor, ...]       # per node type: its destinations, then new sources in increasing id
    relations: tuple[SampledLayer, ...]       # per relation: its sampled edges (eids: the relation's own ids)


@dataclass(frozen=True)
class TypedSamplerOutput:
    seeds: tuple[torch.Tensor, ...]           # per node type, as given
    layers: tuple[TypedLayer, ...]            # input layer first


def _same(a: torch.Tensor, c: torch.Tensor, where: str) -> None:
    assert a.dtype == c.dtype == torch.int64 and torch.equal(a.cpu(), c.cpu()), f"{where} differs"


def _same_layer(x: SampledLayer, y: SampledLayer, where: str) -> None:
    for name in ("dst_nodes", "src_nodes", "indptr", "src_local", "eids"):
        _same(getattr(x, name), getattr(y, name), f"{where}: {name}")


def assert_same_output(got, want) -> None:
    """Raise ``AssertionError`` naming the minibatch, layer and field where two lists of
    :class:`SamplerOutput` differ (every tensor int64, equal element for element, on any devices)."""
    assert len(got) == len(want), f"{len(got)} minibatches, expected {len(want)}"
    for b, (x, y) in enumerate(zip(got, want)):
        assert torch.equal(x.seeds.cpu(), y.seeds.cpu()), f"minibatch {b}: seeds"
        assert len(x.layers) == len(y.layers), f"minibatch {b}: {len(x.layers)} layers, expected {len(y.layers)}"
        for i, (lx, ly) in enumerate(zip(x.layers, y.layers)):
            _same_layer(lx, ly, f"minibatch {b}, layer {i}")


def assert_same_typed_output(got: TypedSamplerOutput, want: TypedSamplerOutput) -> None:
    """:func:`assert_same_output` for heterographs: every node type's ids, every relation's layer."""
    assert len(got.layers) == len(want.layers), f"{len(got.layers)} layers, expected {len(want.layers)}"
    for i, (x, y) in enumerate(zip(got.layers, want.layers)):
        for kind in ("dst_nodes", "src_nodes"):
            assert len(getattr(x, kind)) == len(getattr(y, kind)), f"layer {i}: node types"
            for t, (a, c) in enumerate(zip(getattr(x, kind), getattr(y, kind))):
                _same(a, c, f"layer {i}: {kind} of node type {t}")
        assert len(x.relations) == len(y.relations), f"layer {i}: relations"
        for r, (a, c) in enumerate(zip(x.relations, y.relations)):
            _same_layer(a, c, f"layer {i}, relation {r}")
