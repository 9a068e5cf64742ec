"""Multi-process training on torch.distributed (gloo on CPU, nccl on GPU).

* Graph-replicated: :func:`replicated_loader` gives each rank its share of the global minibatch
  sequence (no communication for sampling); train with DistributedDataParallel and
  :func:`train_epoch`.  1, 2 or 4 processes train identically (see :mod:`.replicated`).
* Graph-partitioned (1.5D): :class:`PartitionedSpGEMM` is an ``spgemm=`` for BulkNeighborSampler
  computing P = Q A with A split over a (p/c) x c process :class:`Grid`.
* Setup checks: :func:`init` (process group with a timeout), :func:`check_same_graph`.
"""

from ..core.extras import missing_extra

try:
    import dgl  # noqa: F401  (first, so that without DGL the error names the extra that brings it)
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__) from None
from .comm import CollectiveError, init, world
from .fingerprint import check_same_graph, graph_fingerprint
from .grid import Grid
from .replicated import ReplicatedLoader, Step, per_rank_seed, replicated_loader
from .spgemm import PartitionedSpGEMM
from .train import SAGE, evaluate, train_epoch

__all__ = ["CollectiveError", "init", "world", "check_same_graph", "graph_fingerprint", "Grid",
           "ReplicatedLoader", "Step", "replicated_loader", "per_rank_seed", "PartitionedSpGEMM",
           "train_epoch", "evaluate", "SAGE"]
