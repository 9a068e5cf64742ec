"""Hypothesis settings profiles shared by every kernel test.

"ci" is small and derandomized so a CI failure reproduces bit-for-bit on a laptop;
"local" is the heavier sweep to run before merging a kernel (HYPOTHESIS_PROFILE=local).
"""
import os

from hypothesis import HealthCheck, settings

# Graph generation is numpy-based and cheap, but DGL graph construction plus reference
# computations on hub graphs can exceed Hypothesis' default 200 ms deadline on a slow CI
# core; timing is checked by benchmarks, not by property tests.
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large]
_PROFILES = {
    "ci": dict(max_examples=25, deadline=None, derandomize=True, database=None,
               suppress_health_check=_SUPPRESS, print_blob=True),
    "local": dict(max_examples=200, deadline=None, suppress_health_check=_SUPPRESS,
                  print_blob=True),
}
DEFAULT_PROFILE = "ci"


def register_profiles():
    """Register the "ci" and "local" profiles. Idempotent: re-registering just overwrites."""
    for name, kwargs in _PROFILES.items():
        settings.register_profile(name, **kwargs)


def load_profile(name=None):
    """Load `name`, else $HYPOTHESIS_PROFILE, else "ci". Registers the profiles first, so the
    call order in conftest/test modules does not matter."""
    register_profiles()
    name = name or os.environ.get("HYPOTHESIS_PROFILE", DEFAULT_PROFILE)
    settings.load_profile(name)
    return name
