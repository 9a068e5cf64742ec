"""Test marks shared by the test suites: which cases of a parametrised test the quick lane runs."""
from __future__ import annotations

import pytest

__all__ = ["quick_first"]


def quick_first(cases: list) -> list:
    """``cases`` for ``pytest.mark.parametrize`` with every case after the first marked ``slow``: the
    quick lane (``scripts/test.sh --quick``, ``-m "not slow"``) runs one of them, the full run all.

    >>> [c.marks for c in quick_first([(1, 2), (3, 4)])[1:]][0][0].name
    'slow'
    """
    return [cases[0]] + [pytest.param(*c, marks=pytest.mark.slow) if isinstance(c, tuple)
                         else pytest.param(c, marks=pytest.mark.slow) for c in cases[1:]]
