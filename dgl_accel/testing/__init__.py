"""Kernel verification harness shared by the test suite.

  tensors     DGL-free hypothesis strategies: edge lists (plain, power-law hubs, bipartite), features,
              edge weights
  strategies  the same as DGL graphs and blocks (needs DGL)
  tolerances  per-dtype TOLERANCES, assert_close, assert_matches_reference (FlashAttention rule)
  reference   pure-torch ref_scale / ref_gspmm / ref_gcn_norm_aggregate
  profiles    hypothesis profiles "ci" (default) and "local"

Submodules are not imported here: strategies/profiles need hypothesis, a test-only dependency.
"""
