"""Kernel verification harness shared by the test suite.

  strategies  hypothesis strategies: graphs, power-law hub graphs, blocks, features, edge weights
  tolerances  per-dtype TOLERANCES, assert_close, assert_matches_reference (FlashAttention rule)
  reference   pure-torch ref_scale / ref_gspmm / ref_gcn_norm_aggregate
  profiles    hypothesis profiles "ci" (default) and "local"

Submodules are not imported here: strategies/profiles need hypothesis, a test-only dependency.
"""
