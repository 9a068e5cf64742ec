"""GraphACT redundancy-reduced aggregation (Zeng & Prasanna, FPGA'20).

Neighbour pairs shared by many targets are summed once into "pair nodes"; targets holding both
read the pair node instead.  ``plan = reduce_redundancy(g)`` builds the pre-add schedule and the
rewritten graph; ``plan.aggregate(x, reduce, norm)`` equals the original aggregation (forward and
backward); ``plan.gamma_read`` / ``plan.gamma_add`` measure the savings (see plan.py);
``predicts_gain`` says whether it pays; ``attach`` / ``use_redundancy`` route dgl_accel's gspmm
(and so patched DGL message passing) through plans.  The plans, the rewrite and the cost model live
in the DGL-free core (``dgl_accel.core.redundancy``; ``reduce_edges`` takes plain edge tensors);
this package adds the DGL graph's entry and the gspmm hook.
"""
from ...core.redundancy import (
    CostConstants,
    GainEstimate,
    PreAdd,
    RedundancyPlan,
    aggregate,
    count_shared_pairs,
    greedy_match,
    predicts_gain,
    reduce_edges,
    rewrite_round,
)
from .hook import attach, attached_plan, detach, get_mode, route_count, set_mode, use_redundancy
from .transform import reduce_redundancy

__all__ = ["reduce_redundancy", "RedundancyPlan", "predicts_gain", "GainEstimate", "CostConstants",
           "use_redundancy", "set_mode", "get_mode", "attach", "detach", "attached_plan", "route_count",
           "aggregate", "PreAdd", "count_shared_pairs", "greedy_match", "rewrite_round", "reduce_edges"]
