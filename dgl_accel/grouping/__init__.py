"""Group size for neighbour-grouped aggregation: linear model, cost model, autotuner.

``choose_group_size(g, feat_dim)`` is the entry point; ``print(explain(g, feat_dim))`` tells why.
"""
from .autotune import autotune_group_size, clear_autotune_cache, graph_signature
from .size import (
    GroupSizeChoice, choose_group_size, cost_model_group_size, explain, linear_group_size,
    linear_inputs, set_autotune_timer,
)

__all__ = ["linear_group_size", "linear_inputs", "cost_model_group_size", "choose_group_size",
           "explain", "GroupSizeChoice", "autotune_group_size", "graph_signature",
           "clear_autotune_cache", "set_autotune_timer"]
