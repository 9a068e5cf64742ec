"""Test marks shared by the test suites: which cases run under the Triton interpreter, and which
cases of a parametrised test the quick lane runs."""
from __future__ import annotations

import pytest

__all__ = ["PATHS", "QUICK_NATIVE", "quick_first"]

# The two execution paths for ``pytest.mark.parametrize("path", PATHS)`` (and tests/conftest.py's ``path``
# fixture): the triton case runs kernels under the interpreter on CPU and says so with its mark.
PATHS = ["native", pytest.param("triton", marks=pytest.mark.interpreter, id="triton")]


def quick_first(cases: list) -> list:
    """``cases`` for ``pytest.mark.parametrize`` with every case after the first marked ``slow``: the
    quick lane (``scripts/test.sh --quick``, ``-m "not slow"``) runs one of them, the full run all.
    Cases already given as ``pytest.param`` (e.g. ``PATHS``, or a fixture's params overridden with
    ``indirect=True``) keep their values, marks and id.

    >>> [c.marks for c in quick_first([(1, 2), (3, 4)])[1:]][0][0].name
    'slow'
    >>> [[m.name for m in c.marks] for c in quick_first(PATHS)[1:]]
    [['interpreter', 'slow']]
    >>> quick_first([pytest.param(1, id="a"), (2, 3)])[1].values
    (2, 3)
    """
    def slow(case):
        if isinstance(case, type(pytest.param(None))):  # a ParameterSet (itself a tuple)
            return pytest.param(*case.values, marks=[*case.marks, pytest.mark.slow], id=case.id)
        return pytest.param(*case, marks=pytest.mark.slow) if isinstance(case, tuple) \
            else pytest.param(case, marks=pytest.mark.slow)
    return [cases[0]] + [slow(c) for c in cases[1:]]


# The native case quick, the triton (interpreter) case slow: for a test on the ``path`` fixture whose
# interpreted case is the heavy one, ``@pytest.mark.parametrize("path", QUICK_NATIVE, indirect=True)``.
QUICK_NATIVE = quick_first(PATHS)
