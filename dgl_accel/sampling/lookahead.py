"""The bulk samplers' lookahead into a stock ``dgl.dataloading.DataLoader``: an explicit, reversible hook
on DGL's index iterator, so that ``BulkNeighborSampler`` and ``LADIESSampler(..., bulk=k)`` learn the
epoch's upcoming seed batches without the user doing anything.

How DGL feeds a sampler: its ``DataLoader`` iterates a ``TensorizedDataset`` whose iterator
(``_TensorizedDatasetIter``, DGL 2.x) cuts the epoch's shuffled node ids into seed batches; the
``torch.utils.data`` fetcher takes one batch (``next(iterator)``) and hands it at once, in the same
thread, to the collate function, which calls ``sampler.sample(g, batch)``.  That holds in the main
process, in DGL's prefetch thread and in a worker process alike.

The hook: :func:`install` wraps the iterator class's ``__next__`` so that each batch it hands out
records, for the current thread, which iterator handed it out (a weak reference: the hook keeps no
epoch alive).  A bulk sampler asked for a batch reads that record (:func:`upcoming`): if the
iterator's current batch is the batch being sampled, the next ``count`` batches of the same epoch
and worker share are the ones the sampler will be asked for next.  The samplers install the hook
when built with ``lookahead=True`` (and again when unpickled in a spawned worker); :func:`remove`
puts DGL's ``__next__`` back.  On a DGL without that iterator class nothing is installed and the
samplers sample one batch a pass from such a loader (``plan`` still works).
"""
from __future__ import annotations

import threading
import weakref

import torch

try:  # DGL's private index iterator: absent in some versions
    from dgl.dataloading.dataloader import _TensorizedDatasetIter as _IndexIter
except ImportError:  # pragma: no cover - other DGL versions
    _IndexIter = None

__all__ = ["install", "remove", "installed", "upcoming"]

_lock = threading.Lock()
_record = threading.local()  # .iterator: weak reference to the iterator of this thread's last batch
_dgl_next = None  # DGL's own __next__ while the hook is installed


def _recording_next(self):
    batch = _dgl_next(self)
    _record.iterator = weakref.ref(self)
    return batch


def install() -> bool:
    """Wrap DGL's index iterator (idempotent); False where this DGL has none."""
    global _dgl_next
    if _IndexIter is None:
        return False
    with _lock:
        if _dgl_next is None:
            _dgl_next = _IndexIter.__next__
            _IndexIter.__next__ = _recording_next
    return True


def remove() -> None:
    """Put DGL's ``__next__`` back (idempotent): loaders then give the samplers no lookahead."""
    global _dgl_next
    with _lock:
        if _dgl_next is not None:
            _IndexIter.__next__ = _dgl_next
            _dgl_next = None


def installed() -> bool:
    return _dgl_next is not None


def upcoming(seeds: torch.Tensor, count: int) -> list[torch.Tensor]:
    """The next ``count`` seed batches of the DGL loader whose batch this thread is sampling, or []
    where there is none, the hook is off, or ``seeds`` is not that loader's current batch (never
    guess).  The record is used once."""
    ref = getattr(_record, "iterator", None)
    _record.iterator = None
    it = ref() if ref is not None else None
    if count <= 0 or it is None or not installed() or it.mapping_keys is not None:
        return []
    ds, pos, bs = it.dataset, int(it.index), int(it.batch_size)
    num = int(ds.shape[0])
    cur = ds[pos - bs:min(pos, num)]
    if cur.shape != seeds.shape or not torch.equal(cur.to(seeds.device, seeds.dtype), seeds):
        return []
    out = []
    while len(out) < count and pos < num:
        end = pos + bs
        if end > num:
            if it.drop_last:
                break
            end = num
        out.append(ds[pos:end].clone())
        pos += bs
    return out
