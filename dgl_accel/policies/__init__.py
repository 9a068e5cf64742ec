"""Policies: plans handed down to the DGL-free core. ``exec_paths`` (execution paths for
full-graph training) and ``redundancy`` (GraphACT pair-node rewrite).  Imports nothing."""
