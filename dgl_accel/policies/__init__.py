"""Policies: plans handed down to the DGL-free core. ``exec_paths`` (execution paths for
full-graph training), ``redundancy`` (GraphACT pair-node rewrite) and ``attention`` (whether a drop-in
attention layer runs the fused op or DGL's forward on the routed ops), ``extrema`` (whether a max/min
aggregation runs on the core's op or DGL's kernel).  Imports nothing."""
