"""``NeighborLoader`` and ``LinkNeighborLoader`` with PyG 2.8's signatures, sampling on dgl-accel's
:class:`~dgl_accel.pyg.sampler.NeighborSampler` (no pyg-lib, no torch-sparse): a user changes only
the import::

    from dgl_accel.pyg import NeighborLoader      # was: from torch_geometric.loader import NeighborLoader
    loader = NeighborLoader(data, num_neighbors=[10, 10], input_nodes=data.train_mask, batch_size=1024,
                            shuffle=True)

Each is PyG's own loader class (a subclass: batches, ``transform``, ``filter_per_worker``, workers,
negative sampling for links are PyG's code) whose sampler is built from the loader's own arguments
(``num_neighbors``, ``replace``, ``subgraph_type``, ``disjoint``, ``temporal_strategy``,
``time_attr``, ``weight_attr``, ``is_sorted``, ``directed``), as PyG builds its own:
``subgraph_type="induced"`` (or ``directed=False``) gives the induced subgraph of the sampled nodes,
node- and link-wise, as PyG's does (see :mod:`.sampler`).  What the sampler refuses (temporal and
weighted sampling together: ``NotImplementedError``; induced with ``disjoint=True`` or temporal
sampling: PyG's ``ValueError``) raises when the loader is built, before any batch.  A
``neighbor_sampler`` passed in is used as it is, as in PyG.

Keyword-only beside PyG's arguments: ``seed``, the sampler's seed (default: drawn from torch's
generator, so ``torch.manual_seed`` makes the batches reproducible).
"""
from __future__ import annotations

from ..core.extras import missing_extra

try:
    import torch_geometric  # noqa: F401  (first, so that without PyG the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None

from torch_geometric import loader as pyg_loader

from .sampler import NeighborSampler


def _sampler(data, num_neighbors, replace, subgraph_type, disjoint, temporal_strategy, time_attr, weight_attr,
             is_sorted, directed, seed, kwargs) -> NeighborSampler:
    return NeighborSampler(data, num_neighbors, subgraph_type=subgraph_type, replace=replace, disjoint=disjoint,
                           temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                           is_sorted=is_sorted, share_memory=kwargs.get("num_workers", 0) > 0, directed=directed,
                           seed=seed)


class NeighborLoader(pyg_loader.NeighborLoader):
    """``torch_geometric.loader.NeighborLoader`` on dgl-accel's sampler (see the module docstring)."""

    def __init__(self, data, num_neighbors, input_nodes=None, input_time=None, replace=False,
                 subgraph_type="directional", disjoint=False, temporal_strategy="uniform", time_attr=None,
                 weight_attr=None, transform=None, transform_sampler_output=None, is_sorted=False,
                 filter_per_worker=None, neighbor_sampler=None, directed=True, *, seed=None, **kwargs):
        if input_time is not None and time_attr is None:  # PyG's check, before the sampler's
            raise ValueError("Received conflicting 'input_time' and 'time_attr' arguments: 'input_time' is set "
                             "while 'time_attr' is not set.")
        if neighbor_sampler is None:
            neighbor_sampler = _sampler(data, num_neighbors, replace, subgraph_type, disjoint, temporal_strategy,
                                        time_attr, weight_attr, is_sorted, directed, seed, kwargs)
        super().__init__(data, num_neighbors, input_nodes=input_nodes, input_time=input_time, replace=replace,
                         subgraph_type=subgraph_type, disjoint=disjoint, temporal_strategy=temporal_strategy,
                         time_attr=time_attr, weight_attr=weight_attr, transform=transform,
                         transform_sampler_output=transform_sampler_output, is_sorted=is_sorted,
                         filter_per_worker=filter_per_worker, neighbor_sampler=neighbor_sampler,
                         directed=directed, **kwargs)


class LinkNeighborLoader(pyg_loader.LinkNeighborLoader):
    """``torch_geometric.loader.LinkNeighborLoader`` on dgl-accel's sampler (see the module
    docstring); negative sampling (``neg_sampling``, ``neg_sampling_ratio``) is PyG's."""

    def __init__(self, data, num_neighbors, edge_label_index=None, edge_label=None, edge_label_time=None,
                 replace=False, subgraph_type="directional", disjoint=False, temporal_strategy="uniform",
                 neg_sampling=None, neg_sampling_ratio=None, time_attr=None, weight_attr=None, transform=None,
                 transform_sampler_output=None, is_sorted=False, filter_per_worker=None, neighbor_sampler=None,
                 directed=True, *, seed=None, **kwargs):
        if (edge_label_time is not None) != (time_attr is not None):  # PyG's check, before the sampler's
            raise ValueError(
                f"Received conflicting 'edge_label_time' and 'time_attr' arguments: 'edge_label_time' is "
                f"{'set' if edge_label_time is not None else 'not set'} while 'time_attr' is "
                f"{'set' if time_attr is not None else 'not set'}. Both arguments must be provided for "
                f"temporal sampling.")
        if neighbor_sampler is None:
            neighbor_sampler = _sampler(data, num_neighbors, replace, subgraph_type, disjoint, temporal_strategy,
                                        time_attr, weight_attr, is_sorted, directed, seed, kwargs)
        super().__init__(data, num_neighbors, edge_label_index=edge_label_index, edge_label=edge_label,
                         edge_label_time=edge_label_time, replace=replace, subgraph_type=subgraph_type,
                         disjoint=disjoint, temporal_strategy=temporal_strategy, neg_sampling=neg_sampling,
                         neg_sampling_ratio=neg_sampling_ratio, time_attr=time_attr, weight_attr=weight_attr,
                         transform=transform, transform_sampler_output=transform_sampler_output,
                         is_sorted=is_sorted, filter_per_worker=filter_per_worker,
                         neighbor_sampler=neighbor_sampler, directed=directed, **kwargs)


__all__ = ["NeighborLoader", "LinkNeighborLoader"]
