"""GraphACT redundancy-reduced aggregation (Zeng & Prasanna, FPGA'20) on plain tensors.

``plan = reduce_edges(src, dst, num_src, num_dst)`` builds the pre-add schedule and the rewritten
graph; ``plan.aggregate(x, reduce, norm)`` equals the original aggregation (forward and backward)
on the features' device; ``predicts_gain`` is the cost model.  The DGL adapter
(``dgl_accel.policies.redundancy``) adds ``reduce_redundancy(g)`` for DGL graphs and the gspmm hook.
"""
from .aggregate import PreAdd, aggregate
from .cost import CostConstants, GainEstimate, predicts_gain
from .pairs import count_shared_pairs
from .plan import RedundancyPlan, RoundStats
from .transform import greedy_match, reduce_edges, rewrite_round

__all__ = ["reduce_edges", "RedundancyPlan", "RoundStats", "predicts_gain", "GainEstimate", "CostConstants",
           "aggregate", "PreAdd", "count_shared_pairs", "greedy_match", "rewrite_round"]
